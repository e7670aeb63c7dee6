#include "tools/perf/options.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <utility>
#include <limits>
#include <utility>

namespace ringo::perf {
namespace {

// --wire's names and their ringoWire_t values; "fp8" is e4m3 too.
constexpr std::pair<const char*, int> kWireNames[] = {{"none", 0}, {"bf16", 1}, {"fp16", 2},
                                                      {"e4m3", 3}, {"e5m2", 4}, {"fp8", 3}};

using base::DataType;
using base::InvalidArgument;
using base::RedOp;
using base::Status;
using base::StatusOr;

StatusOr<int64_t> ParseInt(const std::string& flag, const std::string& text, int64_t min_value,
                           int64_t max_value) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || errno != 0 || *end != '\0' || v < min_value || v > max_value) {
    return InvalidArgument(flag + " takes an integer from " + std::to_string(min_value) + " to " +
                           std::to_string(max_value) + ", not '" + text + "'");
  }
  return static_cast<int64_t>(v);
}

StatusOr<int> ParseSmallInt(const std::string& flag, const std::string& text, int min_value,
                            int max_value) {
  ASSIGN_OR_RETURN(int64_t v, ParseInt(flag, text, min_value, max_value));
  return static_cast<int>(v);
}

StatusOr<size_t> ParseSizeFlag(const std::string& flag, const std::string& text) {
  auto size = ParseSize(text);
  if (!size.ok()) return size.status().WithContext(flag);
  return size;
}

StatusOr<std::vector<RedOp>> ParseOps(const std::string& text) {
  if (text == "all") {
    return std::vector<RedOp>{RedOp::kSum, RedOp::kProd, RedOp::kMax, RedOp::kMin, RedOp::kAvg};
  }
  for (int i = 0; i < base::kNumRedOps; ++i) {
    if (text == base::RedOpName(static_cast<RedOp>(i))) {
      return std::vector<RedOp>{static_cast<RedOp>(i)};
    }
  }
  return InvalidArgument("-o takes sum, prod, min, max, avg or all, not '" + text + "'");
}

StatusOr<std::vector<DataType>> ParseTypes(const std::string& text) {
  if (text == "all") {
    std::vector<DataType> all;
    for (int i = 0; i < kPerfDataTypes; ++i) all.push_back(static_cast<DataType>(i));
    return all;
  }
  // nccl-tests' names first (base::DataTypeName), then the spellings people also use.
  static const std::pair<const char*, DataType> kAliases[] = {
      {"char", DataType::kInt8},       {"int", DataType::kInt32},
      {"float16", DataType::kFloat16}, {"fp16", DataType::kFloat16},
      {"float32", DataType::kFloat32}, {"fp32", DataType::kFloat32},
      {"float64", DataType::kFloat64}, {"fp64", DataType::kFloat64},
      {"bf16", DataType::kBFloat16},
  };
  for (int i = 0; i < kPerfDataTypes; ++i) {
    if (text == base::DataTypeName(static_cast<DataType>(i))) {
      return std::vector<DataType>{static_cast<DataType>(i)};
    }
  }
  for (const auto& [name, type] : kAliases) {
    if (text == name) return std::vector<DataType>{type};
  }
  const std::string names =
      "int8, uint8, int32, uint32, int64, uint64, half, float, double, bfloat16 or all";
  return InvalidArgument("-d takes " + names + ", not '" + text + "'");
}

// nccl-tests' size suffixes: binary multiples, either case; 0 for anything else.
double UnitOf(const std::string& suffix) {
  if (suffix.empty()) return 1;
  if (suffix.size() != 1) return 0;
  switch (suffix[0]) {
    case 'K':
    case 'k': return 1024.0;
    case 'M':
    case 'm': return 1024.0 * 1024;
    case 'G':
    case 'g': return 1024.0 * 1024 * 1024;
  }
  return 0;
}

StatusOr<Collective> ParseCollective(const std::string& text) {
  for (Collective c : {Collective::kAllReduce, Collective::kReduceScatter, Collective::kAllGather,
                       Collective::kBroadcast, Collective::kReduce, Collective::kSendRecv, Collective::kAllToAll}) {
    if (text == CollectiveName(c)) return c;
  }
  return InvalidArgument("unknown collective '" + text +
                         "' (allreduce, reducescatter, allgather, broadcast, reduce, sendrecv or alltoall)");
}

// One flag: its spellings and how its value lands in Options.
struct Flag {
  const char* short_name;  // "-b"; nullptr when there is none
  const char* long_name;   // "--minbytes"
  bool takes_value;
  Status (*apply)(const std::string& flag, const std::string& value, Options* o);
};

constexpr int kMaxInt = std::numeric_limits<int>::max();

const Flag kFlags[] = {
    {"-b", "--minbytes", true,
     [](const std::string& f, const std::string& v, Options* o) -> Status {
       ASSIGN_OR_RETURN(o->min_bytes, ParseSizeFlag(f, v));
       return Status();
     }},
    {"-e", "--maxbytes", true,
     [](const std::string& f, const std::string& v, Options* o) -> Status {
       ASSIGN_OR_RETURN(o->max_bytes, ParseSizeFlag(f, v));
       return Status();
     }},
    {"-i", "--stepbytes", true,
     [](const std::string& f, const std::string& v, Options* o) -> Status {
       ASSIGN_OR_RETURN(o->step_bytes, ParseSizeFlag(f, v));
       return Status();
     }},
    {"-f", "--stepfactor", true,
     [](const std::string& f, const std::string& v, Options* o) -> Status {
       ASSIGN_OR_RETURN(o->step_factor, ParseInt(f, v, 1, 1 << 20));
       return Status();
     }},
    {"-n", "--iters", true,
     [](const std::string& f, const std::string& v, Options* o) -> Status {
       ASSIGN_OR_RETURN(o->iters, ParseSmallInt(f, v, 1, kMaxInt));
       return Status();
     }},
    {"-w", "--warmup_iters", true,
     [](const std::string& f, const std::string& v, Options* o) -> Status {
       ASSIGN_OR_RETURN(o->warmup_iters, ParseSmallInt(f, v, 0, kMaxInt));
       return Status();
     }},
    {"-G", "--cudagraph", true,
     [](const std::string& f, const std::string& v, Options* o) -> Status {
       ASSIGN_OR_RETURN(o->graph_launches, ParseSmallInt(f, v, 0, kMaxInt));
       return Status();
     }},
    {"-c", "--check", true,
     [](const std::string& f, const std::string& v, Options* o) -> Status {
       ASSIGN_OR_RETURN(o->check, ParseSmallInt(f, v, 0, 1));
       return Status();
     }},
    {"-o", "--op", true,
     [](const std::string&, const std::string& v, Options* o) -> Status {
       ASSIGN_OR_RETURN(o->ops, ParseOps(v));
       return Status();
     }},
    {"-d", "--datatype", true,
     [](const std::string&, const std::string& v, Options* o) -> Status {
       ASSIGN_OR_RETURN(o->types, ParseTypes(v));
       return Status();
     }},
    {"-r", "--root", true,
     [](const std::string& f, const std::string& v, Options* o) -> Status {
       ASSIGN_OR_RETURN(o->root, ParseSmallInt(f, v, 0, kMaxInt));
       return Status();
     }},
    {"-a", "--average", true,
     [](const std::string& f, const std::string& v, Options* o) -> Status {
       ASSIGN_OR_RETURN(int a, ParseSmallInt(f, v, 0, 3));
       o->average = static_cast<Average>(a);
       return Status();
     }},
    {"-np", "--nprocs", true,
     [](const std::string& f, const std::string& v, Options* o) -> Status {
       ASSIGN_OR_RETURN(o->num_procs, ParseSmallInt(f, v, 1, 4096));
       return Status();
     }},
    {"-R", "--local_register", true,
     [](const std::string& f, const std::string& v, Options* o) -> Status {
       ASSIGN_OR_RETURN(o->local_register, ParseSmallInt(f, v, 0, 1));
       return Status();
     }},
    {nullptr, "--threads", false,
     [](const std::string&, const std::string&, Options* o) -> Status {
       o->threads = true;
       return Status();
     }},
    {nullptr, "--bind-to", true,
     [](const std::string& f, const std::string& v, Options* o) -> Status {
       if (v != "core" && v != "none") return InvalidArgument(f + " takes core or none, not '" + v + "'");
       o->bind_to_core = v == "core";
       return Status();
     }},
    {nullptr, "--host", false,
     [](const std::string&, const std::string&, Options* o) -> Status {
       o->host_memory = true;
       return Status();
     }},
    {nullptr, "--ranks-per-gpu", true,
     [](const std::string& f, const std::string& v, Options* o) -> Status {
       ASSIGN_OR_RETURN(o->ranks_per_gpu, ParseSmallInt(f, v, 1, 4096));
       return Status();
     }},
    {nullptr, "--median", false,
     [](const std::string&, const std::string&, Options* o) -> Status {
       o->median = true;
       return Status();
     }},
    {nullptr, "--wire", true,
     [](const std::string& f, const std::string& v, Options* o) -> Status {
       for (const auto& [name, value] : kWireNames) {
         if (v == name) {
           o->wire = value;
           return Status();
         }
       }
       return InvalidArgument(f + " takes none, bf16, fp16, e4m3 (fp8) or e5m2, not '" + v + "'");
     }},
    {nullptr, "--cuda-calls", false,
     [](const std::string&, const std::string&, Options* o) -> Status {
       o->cuda_calls = true;
       return Status();
     }},
    {nullptr, "--no-inplace", false,
     [](const std::string&, const std::string&, Options* o) -> Status {
       o->in_place = false;
       return Status();
     }},
    {nullptr, "--csv", true,
     [](const std::string&, const std::string& v, Options* o) -> Status {
       if (v.empty()) return InvalidArgument("--csv needs a file name");
       o->csv_path = v;
       return Status();
     }},
    {"-h", "--help", false,
     [](const std::string&, const std::string&, Options* o) -> Status {
       o->help = true;
       return Status();
     }},
};

// Finds the flag `arg` spells. `attached` receives a value given in the same
// argument: "--minbytes=8" or, for one-letter flags as getopt allows, "-b8".
const Flag* FindFlag(const std::string& arg, std::string* attached, bool* has_attached) {
  *has_attached = false;
  for (const Flag& f : kFlags) {
    if ((f.short_name && arg == f.short_name) || arg == f.long_name) return &f;
  }
  for (const Flag& f : kFlags) {
    const std::string long_eq = std::string(f.long_name) + "=";
    if (arg.compare(0, long_eq.size(), long_eq) == 0) {
      *attached = arg.substr(long_eq.size());
      *has_attached = true;
      return &f;
    }
  }
  // "-np" is matched above, so "-n8" here is -n with 8, never a misspelt -np.
  for (const Flag& f : kFlags) {
    if (f.short_name && f.takes_value && std::string(f.short_name).size() == 2 && arg.size() > 2 &&
        arg.compare(0, 2, f.short_name) == 0) {
      *attached = arg.substr(2);
      *has_attached = true;
      return &f;
    }
  }
  return nullptr;
}

Status Validate(const Options& o, bool have_collective) {
  if (!have_collective) {
    return InvalidArgument(
        "missing the collective (allreduce, reducescatter, allgather, broadcast or reduce)");
  }
  if (o.bind_to_core && (o.num_procs == 0 || o.threads))
    return InvalidArgument("--bind-to core needs -np N without --threads (ranks that are processes)");
  if (o.threads && o.num_procs == 0)
    return InvalidArgument("--threads needs -np N (the ranks to start)");
  if (o.min_bytes > o.max_bytes) {
    return InvalidArgument("-b " + std::to_string(o.min_bytes) + " is larger than -e " +
                           std::to_string(o.max_bytes));
  }
  if (o.min_bytes < o.max_bytes) {
    if (o.step_factor > 1 && o.min_bytes == 0) {
      return InvalidArgument("-b 0 with -f never grows; start at 1 byte or more");
    }
    if (o.step_factor <= 1 && o.step_bytes == 0) {
      return InvalidArgument("-i 0 never grows; give -i > 0 or -f > 1");
    }
  }
  return Status();
}

}  // namespace

const char* WireName(int wire) {
  for (const auto& [name, value] : kWireNames) {
    if (value == wire) return name;
  }
  return "?";
}

const char* CollectiveName(Collective c) {
  switch (c) {
    case Collective::kAllReduce: return "allreduce";
    case Collective::kReduceScatter: return "reducescatter";
    case Collective::kAllGather: return "allgather";
    case Collective::kBroadcast: return "broadcast";
    case Collective::kReduce: return "reduce";
    case Collective::kSendRecv: return "sendrecv";
    case Collective::kAllToAll: return "alltoall";
  }
  return "?";
}

bool HasOp(Collective c) {
  return c == Collective::kAllReduce || c == Collective::kReduceScatter || c == Collective::kReduce;
}

bool HasRoot(Collective c) { return c == Collective::kBroadcast || c == Collective::kReduce; }

bool HasInPlace(Collective c) { return c != Collective::kSendRecv; }

StatusOr<size_t> ParseSize(const std::string& text) {
  const auto bad = [&] {
    return InvalidArgument("'" + text + "' is not a size (bytes, with an optional K, M or G)");
  };
  if (text.empty() || text[0] == '-' || text[0] == '+') return bad();
  errno = 0;
  char* end = nullptr;
  const double number = std::strtod(text.c_str(), &end);
  if (errno != 0 || end == text.c_str() || !std::isfinite(number)) return bad();
  const double unit = UnitOf(end);
  if (unit == 0) return bad();
  const double bytes = number * unit;
  if (bytes != std::floor(bytes) || bytes >= 9.2e18) return bad();
  return static_cast<size_t>(bytes);
}

StatusOr<Options> ParseOptions(const std::vector<std::string>& args) {
  Options o;
  bool have_collective = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg.size() < 2 || arg[0] != '-') {
      if (have_collective) return InvalidArgument("unexpected argument '" + arg + "'");
      ASSIGN_OR_RETURN(o.collective, ParseCollective(arg));
      have_collective = true;
      continue;
    }
    std::string value;
    bool has_value = false;
    const Flag* flag = FindFlag(arg, &value, &has_value);
    if (flag == nullptr) return InvalidArgument("unknown option '" + arg + "'");
    const std::string name = flag->short_name ? flag->short_name : flag->long_name;
    if (has_value && !flag->takes_value) return InvalidArgument(name + " takes no value");
    if (flag->takes_value && !has_value) {
      if (i + 1 >= args.size()) return InvalidArgument(name + " needs a value");
      value = args[++i];
    }
    RETURN_IF_ERROR(flag->apply(name, value, &o));
  }
  if (o.help) return o;
  RETURN_IF_ERROR(Validate(o, have_collective));
  return o;
}

std::vector<size_t> MessageSizes(const Options& o) {
  std::vector<size_t> sizes;
  for (size_t size = o.min_bytes; size <= o.max_bytes;) {
    sizes.push_back(size);
    const size_t next = o.step_factor > 1 ? size * o.step_factor : size + o.step_bytes;
    // Stop on no progress (min == max) and on overflow past SIZE_MAX.
    if (next <= size || (o.step_factor > 1 && next / o.step_factor != size)) break;
    size = next;
  }
  return sizes;
}

std::string Usage(const std::string& program) {
  return FlagsUsage(program) +
         "Without -np, rank and size come from mpirun (OMPI_COMM_WORLD_*), torchrun\n"
         "(RANK, WORLD_SIZE) or srun (SLURM_PROCID, SLURM_NTASKS); a single rank otherwise.\n"
         "Rendezvous: RINGO_COMM_ID=host:port, else MASTER_ADDR:MASTER_PORT+1, else (all\n"
         "ranks on one host under mpirun or srun) a file in /tmp named after the job.\n"
         "Memory: GPU buffers (cudaMalloc, one non-blocking stream per rank, times from\n"
         "CUDA events, results checked by a kernel on the device) where a GPU is visible\n"
         "and this build has CUDA; host memory with --host or where none is visible.\n"
         "Rank r uses GPU (r / K) % GPUs with --ranks-per-gpu K.\n"
         "Exit status: 0 when every result is right, 1 on wrong results or a failure,\n"
         "2 on bad usage.\n";
}

std::string FlagsUsage(const std::string& program) {
  return "Usage: " + program +
         " COLLECTIVE [options]\n"
         "  COLLECTIVE: allreduce, reducescatter, allgather, broadcast or reduce\n"
         "  -b, --minbytes SIZE      smallest message, bytes with optional K/M/G (default 32M)\n"
         "  -e, --maxbytes SIZE      largest message (default 32M)\n"
         "  -i, --stepbytes SIZE     linear increment between sizes (default 1M)\n"
         "  -f, --stepfactor N       multiply the size by N each step; wins over -i when > 1\n"
         "  -n, --iters N            timed iterations per size (default 20)\n"
         "  -w, --warmup_iters N     untimed iterations before each measurement (default 5)\n"
         "  -G, --cudagraph N        capture the -n iterations in a CUDA graph and launch it\n"
         "                           N times; the time is per collective (GPU only)\n"
         "  -c, --check 0|1          verify every result and count #wrong (default 1)\n"
         "  -o, --op OP              sum, prod, min, max, avg or all (default sum)\n"
         "  -d, --datatype TYPE      int8, uint8, int32, uint32, int64, uint64, half,\n"
         "                           float, double, bfloat16 or all (default float)\n"
         "  -r, --root N             root rank of broadcast and reduce (default 0)\n"
         "  -a, --average 0|1|2|3    time reported: rank 0, mean, min or max over ranks\n"
         "                           (default 1)\n"
         "  -np N                    fork N ranks on this host (no launcher needed)\n"
         "  --threads                with -np N: the N ranks are threads of this process\n"
         "                           (one communicator each from the library's init-all)\n"
         "  --bind-to core|none      with -np N: each rank on a CPU of its own, as mpirun\n"
         "                           binds (core), or where the system puts it (none,\n"
         "                           the default)\n"
         "  --host                   use host memory even where a GPU is usable\n"
         "  --ranks-per-gpu K        K ranks share each GPU: rank r uses GPU\n"
         "                           (r / K) % visible GPUs (default 1)\n"
         "  -R, --local_register <0/1>  1: buffers from the library's allocator\n"
         "                           (ringoMemAlloc: every rank reads its peers' buffers\n"
         "                           directly); 0: plain host memory (default 0)\n"
         "  --median                 time each iteration alone and report the median\n"
         "                           (10th/90th percentiles in the CSV), not the mean\n"
         "  --cuda-calls             after each row, the CUDA runtime calls the library\n"
         "                           made per timed call on rank 0's thread (eager calls)\n"
         "  --wire NAME              the communicator's wire format between hosts: none,\n"
         "                           bf16, fp16, e4m3 (fp8) or e5m2 (ringoCommSetWire;\n"
         "                           default: RINGO_WIRE); rows it applies to end with\n"
         "                           wirebw, the bytes the network carried per second\n"
         "  --no-inplace             measure out of place only (in-place columns N/A)\n"
         "  --csv FILE               also write one row per size/type/op to FILE\n"
         "  -h, --help               this text\n";
}

}  // namespace ringo::perf
