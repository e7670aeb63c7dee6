#include "collectives/engines/gpu_order.h"

namespace ringo::collectives {

base::Status LaunchOrder::Before(const LaunchSite& site, const LaunchEvents& events) const {
  if (site.capturing) {
    // Launches of one capture chain; the first of a new capture waits for
    // nothing (a wait on an event recorded elsewhere would cross the capture).
    if (last_capture_ != site.capture_id) return base::Status();
    return events.captured->MakeStreamWait(site.stream);
  }
  if (launched_ && site.stream_id != last_stream_) RETURN_IF_ERROR(events.eager->MakeStreamWait(site.stream));
  if (replays_tracked_ && events.replayed != nullptr) RETURN_IF_ERROR(events.replayed->MakeStreamWait(site.stream));
  return base::Status();
}

base::Status LaunchOrder::After(const LaunchSite& site, const LaunchEvents& events) {
  if (site.capturing) {
    RETURN_IF_ERROR(events.captured->Record(site.stream));
    last_capture_ = site.capture_id;
    if (events.replayed != nullptr) {
      RETURN_IF_ERROR(events.replayed->Record(site.stream));
      replays_tracked_ = true;
    }
    return base::Status();
  }
  RETURN_IF_ERROR(events.eager->Record(site.stream));
  launched_ = true;
  last_stream_ = site.stream_id;
  return base::Status();
}

}  // namespace ringo::collectives
