#include "tests/gpu_case.h"

#include <algorithm>

#include "base/config.h"
#include "collectives/plan/planner.h"
#include "tests/reference.h"

namespace ringo::tests {

size_t ChunkElems(ringoDataType_t dt, int nranks) {
  const collectives::DeviceGeometry g = collectives::ChooseDeviceGeometry(collectives::SettingsFrom(base::GetConfig()), nranks);
  kernels::CollArgs probe;
  probe.dtype = static_cast<base::DataType>(dt);
  probe.count = 1;
  const collectives::DeviceSlices slices = collectives::MaxDeviceSlices(g);
  const collectives::DevicePlan plan = collectives::PlanDeviceCollective(probe, nranks, g, slices.simple, slices.ll);
  return std::max<size_t>(1, plan.slice_bytes / DataTypeSize(dt));
}

}  // namespace ringo::tests
