#include "collectives/engines/gpu_order.h"

namespace ringo::collectives {

base::Status LaunchOrder::Before(void* stream, const CaptureState& capture, LaunchEvent& eager,
                                 LaunchEvent& captured) const {
  if (capture.active) {
    if (last_capture_ != capture.id) return base::Status();  // the first launch of this capture
    return captured.MakeStreamWait(stream);
  }
  if (!launched_) return base::Status();
  return eager.MakeStreamWait(stream);
}

base::Status LaunchOrder::After(void* stream, const CaptureState& capture, LaunchEvent& eager,
                                LaunchEvent& captured) {
  if (capture.active) {
    RETURN_IF_ERROR(captured.Record(stream));
    last_capture_ = capture.id;
    return base::Status();
  }
  RETURN_IF_ERROR(eager.Record(stream));
  launched_ = true;
  return base::Status();
}

}  // namespace ringo::collectives
