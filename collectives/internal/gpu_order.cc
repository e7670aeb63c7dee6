#include "collectives/internal/gpu_order.h"

namespace ringo::collectives::internal {

base::Status LaunchOrder::Before(void* stream, LaunchEvent& event) const {
  if (!launched_) return base::Status();
  return event.MakeStreamWait(stream);
}

base::Status LaunchOrder::After(void* stream, LaunchEvent& event) {
  RETURN_IF_ERROR(event.Record(stream));
  launched_ = true;
  return base::Status();
}

}  // namespace ringo::collectives::internal
