#include "tools/perf/collective.h"

namespace ringo::perf {

CollCounts ComputeCounts(Collective c, size_t bytes, size_t type_size, int nranks) {
  const size_t count = bytes / type_size;
  const size_t n = static_cast<size_t>(nranks);
  CollCounts k;
  switch (c) {
    case Collective::kAllReduce:
    case Collective::kBroadcast:
    case Collective::kReduce: k.send_count = k.recv_count = k.param_count = count; break;
    case Collective::kReduceScatter:
      k.param_count = k.recv_count = count / n;
      k.send_count = k.recv_count * n;
      k.recv_inplace_offset = k.recv_count;
      break;
    case Collective::kAllGather:
      k.param_count = k.send_count = count / n;
      k.recv_count = k.send_count * n;
      k.send_inplace_offset = k.send_count;
      break;
    case Collective::kSendRecv: k.send_count = k.recv_count = k.param_count = count; break;
    case Collective::kAllToAll:
      k.param_count = count / n;
      k.send_count = k.recv_count = k.param_count * n;
      break;
  }
  return k;
}

double BusFactor(Collective c, int nranks) {
  const double n = nranks;
  switch (c) {
    case Collective::kAllReduce: return 2.0 * (n - 1) / n;
    case Collective::kReduceScatter:
    case Collective::kAllGather: return (n - 1) / n;
    case Collective::kBroadcast:
    case Collective::kReduce:
    case Collective::kSendRecv: return 1.0;
    case Collective::kAllToAll: return (n - 1) / n;
  }
  return 1.0;
}

}  // namespace ringo::perf
