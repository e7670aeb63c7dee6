// ringo-perf's command line: nccl-tests' flags, sizes, and the errors that
// make the tool exit 2.
#include "tools/perf/options.h"
#include "tools/perf/collective.h"

#include <gtest/gtest.h>

namespace ringo::perf {
namespace {

using base::DataType;
using base::RedOp;

base::StatusOr<Options> Parse(std::vector<std::string> args) { return ParseOptions(args); }

std::string ErrorOf(std::vector<std::string> args) {
  auto o = ParseOptions(args);
  EXPECT_FALSE(o.ok());
  return o.ok() ? "" : o.status().message();
}

TEST(ParseSize, AcceptsBytesAndBinarySuffixes) {
  EXPECT_EQ(ParseSize("0").value(), 0u);
  EXPECT_EQ(ParseSize("8").value(), 8u);
  EXPECT_EQ(ParseSize("1K").value(), 1024u);
  EXPECT_EQ(ParseSize("1k").value(), 1024u);
  EXPECT_EQ(ParseSize("1.5K").value(), 1536u);
  EXPECT_EQ(ParseSize("64M").value(), 64u << 20);
  EXPECT_EQ(ParseSize("2G").value(), size_t{2} << 30);
}

TEST(ParseSize, RejectsEverythingElse) {
  for (const char* bad : {"", "-1", "+8", "abc", "8X", "8KB", "0.5", "1e400", "nan", "8 K"}) {
    EXPECT_FALSE(ParseSize(bad).ok()) << bad;
  }
}

TEST(ParseOptions, DefaultsAreNcclTests) {
  auto o = Parse({"allreduce"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->collective, Collective::kAllReduce);
  EXPECT_EQ(o->min_bytes, 32u << 20);
  EXPECT_EQ(o->max_bytes, 32u << 20);
  EXPECT_EQ(o->step_bytes, 1u << 20);
  EXPECT_EQ(o->step_factor, 1u);
  EXPECT_EQ(o->iters, 20);
  EXPECT_EQ(o->warmup_iters, 5);
  EXPECT_TRUE(o->check);
  EXPECT_EQ(o->ops, std::vector<RedOp>{RedOp::kSum});
  EXPECT_EQ(o->types, std::vector<DataType>{DataType::kFloat32});
  EXPECT_EQ(o->root, 0);
  EXPECT_EQ(o->average, Average::kMean);
  EXPECT_EQ(o->num_procs, 0);
  EXPECT_FALSE(o->host_memory);
  EXPECT_FALSE(o->median);
  EXPECT_TRUE(o->in_place);
  EXPECT_EQ(o->local_register, 0);
  EXPECT_TRUE(o->csv_path.empty());
}

TEST(ParseOptions, EveryCollective) {
  const std::pair<const char*, Collective> all[] = {{"allreduce", Collective::kAllReduce},
                                                    {"reducescatter", Collective::kReduceScatter},
                                                    {"allgather", Collective::kAllGather},
                                                    {"broadcast", Collective::kBroadcast},
                                                    {"reduce", Collective::kReduce},
                                                    {"sendrecv", Collective::kSendRecv},
                                                    {"alltoall", Collective::kAllToAll}};
  for (const auto& [name, c] : all) {
    auto o = Parse({name});
    ASSERT_TRUE(o.ok()) << name;
    EXPECT_EQ(o->collective, c);
    EXPECT_STREQ(CollectiveName(c), name);
  }
}

TEST(ParseOptions, EveryFlag) {
  auto o = Parse({"reduce", "-b", "8", "-e",  "64M", "-f",     "4",     "-i",     "16",       "-n",
                  "7",      "-w", "0", "-c",  "0",   "-o",     "max",   "-d",     "bfloat16", "-r",
                  "3",      "-a", "2", "-np", "4",   "--host", "--csv", "out.csv", "--median",
                  "--no-inplace", "-R", "1"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->collective, Collective::kReduce);
  EXPECT_EQ(o->local_register, 1);
  EXPECT_EQ(o->min_bytes, 8u);
  EXPECT_EQ(o->max_bytes, 64u << 20);
  EXPECT_EQ(o->step_factor, 4u);
  EXPECT_EQ(o->step_bytes, 16u);
  EXPECT_EQ(o->iters, 7);
  EXPECT_EQ(o->warmup_iters, 0);
  EXPECT_FALSE(o->check);
  EXPECT_EQ(o->ops, std::vector<RedOp>{RedOp::kMax});
  EXPECT_EQ(o->types, std::vector<DataType>{DataType::kBFloat16});
  EXPECT_EQ(o->root, 3);
  EXPECT_EQ(o->average, Average::kMin);
  EXPECT_EQ(o->num_procs, 4);
  EXPECT_TRUE(o->host_memory);
  EXPECT_EQ(o->csv_path, "out.csv");
  EXPECT_TRUE(o->median);
  EXPECT_FALSE(o->in_place);
}

TEST(ParseOptions, LocalRegisterIsZeroOrOne) {
  auto o = Parse({"allreduce", "--local_register=1"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->local_register, 1);
  for (const char* bad : {"2", "-1", "yes"}) {
    auto b = Parse({"allreduce", "-R", bad});
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_NE(b.status().message().find("-R"), std::string::npos) << b.status().ToString();
  }
}

TEST(ParseOptions, RanksPerGpu) {
  auto d = Parse({"allreduce"});
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->ranks_per_gpu, 1);
  EXPECT_FALSE(d->host_memory);
  auto o = Parse({"allreduce", "-np", "8", "--ranks-per-gpu", "4"});
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->ranks_per_gpu, 4);
  auto eq = Parse({"allreduce", "--ranks-per-gpu=2", "--host"});
  ASSERT_TRUE(eq.ok()) << eq.status().message();
  EXPECT_EQ(eq->ranks_per_gpu, 2);
  EXPECT_TRUE(eq->host_memory);
  for (const char* bad : {"0", "-1", "two", "1.5", "4097", ""}) {
    auto b = Parse({"allreduce", "--ranks-per-gpu", bad});
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_NE(b.status().message().find("--ranks-per-gpu takes an integer from 1 to 4096"),
              std::string::npos)
        << b.status().message();
  }
  EXPECT_FALSE(Parse({"allreduce", "--ranks-per-gpu"}).ok());
  EXPECT_NE(Usage("ringo-perf").find("--ranks-per-gpu K"), std::string::npos);
}

TEST(ParseOptions, ThreadsNeedRanksToStart) {
  auto d = Parse({"allreduce"});
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->threads);
  auto o = Parse({"allreduce", "-np", "4", "--threads"});
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_TRUE(o->threads);
  EXPECT_EQ(o->num_procs, 4);
  auto alone = Parse({"allreduce", "--threads"});
  ASSERT_FALSE(alone.ok());
  EXPECT_NE(alone.status().message().find("--threads needs -np"), std::string::npos)
      << alone.status().message();
  EXPECT_FALSE(Parse({"allreduce", "-np", "2", "--threads=1"}).ok());  // takes no value
  EXPECT_NE(Usage("ringo-perf").find("--threads"), std::string::npos);
}

TEST(ParseOptions, BindToCoreBindsForkedRanksOnly) {
  auto d = Parse({"allreduce", "-np", "2"});
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->bind_to_core);
  auto o = Parse({"sendrecv", "-np", "2", "--bind-to", "core"});
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_TRUE(o->bind_to_core);
  auto none = Parse({"sendrecv", "-np", "2", "--bind-to=none"});
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_FALSE(none->bind_to_core);
  auto bad = Parse({"sendrecv", "-np", "2", "--bind-to", "socket"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("core or none"), std::string::npos) << bad.status().message();
  auto launched = Parse({"sendrecv", "--bind-to", "core"});  // under a launcher: its binding
  ASSERT_FALSE(launched.ok());
  EXPECT_NE(launched.status().message().find("needs -np"), std::string::npos) << launched.status().message();
  EXPECT_FALSE(Parse({"sendrecv", "-np", "2", "--threads", "--bind-to", "core"}).ok());
  EXPECT_NE(Usage("ringo-perf").find("--bind-to core|none"), std::string::npos);
}

TEST(ParseOptions, LongAndAttachedSpellings) {
  auto o = Parse({"--minbytes=1K", "allgather", "--maxbytes", "2K", "-n8", "--warmup_iters=2",
                  "--datatype=half", "--op", "all"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->min_bytes, 1024u);
  EXPECT_EQ(o->max_bytes, 2048u);
  EXPECT_EQ(o->iters, 8);
  EXPECT_EQ(o->warmup_iters, 2);
  EXPECT_EQ(o->types, std::vector<DataType>{DataType::kFloat16});
  EXPECT_EQ(o->ops.size(), 5u);
}

TEST(ParseOptions, TypeNamesAndAliases) {
  const std::pair<const char*, DataType> names[] = {
      {"int8", DataType::kInt8},        {"uint8", DataType::kUint8},
      {"int32", DataType::kInt32},      {"uint32", DataType::kUint32},
      {"int64", DataType::kInt64},      {"uint64", DataType::kUint64},
      {"half", DataType::kFloat16},     {"float16", DataType::kFloat16},
      {"float", DataType::kFloat32},    {"float32", DataType::kFloat32},
      {"double", DataType::kFloat64},   {"float64", DataType::kFloat64},
      {"bfloat16", DataType::kBFloat16}};
  for (const auto& [name, type] : names) {
    auto o = Parse({"allreduce", "-d", name});
    ASSERT_TRUE(o.ok()) << name;
    EXPECT_EQ(o->types, std::vector<DataType>{type}) << name;
  }
  auto all = Parse({"allreduce", "-d", "all"});
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->types.size(), 10u);
  EXPECT_EQ(all->types.front(), DataType::kInt8);
  EXPECT_EQ(all->types.back(), DataType::kBFloat16);
}

TEST(ParseOptions, HelpNeedsNothingElse) {
  for (const char* flag : {"-h", "--help"}) {
    auto o = Parse({flag});
    ASSERT_TRUE(o.ok()) << flag;
    EXPECT_TRUE(o->help);
  }
  EXPECT_NE(Usage("ringo-perf").find("-np N"), std::string::npos);
  EXPECT_NE(Usage("ringo-perf").find("--median"), std::string::npos);
  EXPECT_EQ(FlagsUsage("gloo-perf").find("Usage: gloo-perf COLLECTIVE"), 0u);
  EXPECT_EQ(FlagsUsage("gloo-perf").find("RINGO_COMM_ID"), std::string::npos);
}

TEST(ParseOptions, ErrorsNameTheProblem) {
  EXPECT_NE(ErrorOf({}).find("missing the collective"), std::string::npos);
  EXPECT_NE(ErrorOf({"allgatherv"}).find("unknown collective 'allgatherv'"), std::string::npos);
  EXPECT_NE(ErrorOf({"allreduce", "--bogus"}).find("unknown option '--bogus'"), std::string::npos);
  EXPECT_NE(ErrorOf({"allreduce", "-x"}).find("unknown option '-x'"), std::string::npos);
  EXPECT_NE(ErrorOf({"allreduce", "-b"}).find("-b needs a value"), std::string::npos);
  EXPECT_NE(ErrorOf({"allreduce", "-b", "lots"}).find("-b: 'lots' is not a size"),
            std::string::npos);
  EXPECT_NE(ErrorOf({"allreduce", "allgather"}).find("unexpected argument"), std::string::npos);
  EXPECT_NE(ErrorOf({"allreduce", "--host=1"}).find("takes no value"), std::string::npos);
  EXPECT_NE(ErrorOf({"allreduce", "-o", "xor"}).find("'xor'"), std::string::npos);
  EXPECT_NE(ErrorOf({"allreduce", "-d", "fp8"}).find("'fp8'"), std::string::npos);
  EXPECT_NE(ErrorOf({"allreduce", "-b", "2K", "-e", "1K"}).find("larger than -e"),
            std::string::npos);
}

TEST(ParseOptions, RejectsOutOfRangeNumbers) {
  const std::vector<std::vector<std::string>> bad = {
      {"-c", "2"},  {"-a", "4"}, {"-n", "0"},   {"-w", "-1"}, {"-r", "-1"},
      {"-np", "0"}, {"-f", "0"}, {"-n", "1.5"}, {"-n", "9x"}, {"-np", "99999"},
  };
  for (const auto& flags : bad) {
    std::vector<std::string> args = {"allreduce"};
    args.insert(args.end(), flags.begin(), flags.end());
    EXPECT_FALSE(ParseOptions(args).ok()) << flags[0] << " " << flags[1];
  }
}

TEST(ParseOptions, RejectsSweepsThatNeverGrow) {
  EXPECT_NE(ErrorOf({"allreduce", "-b", "0", "-e", "8", "-f", "2"}).find("never grows"),
            std::string::npos);
  EXPECT_NE(ErrorOf({"allreduce", "-b", "0", "-e", "8", "-i", "0"}).find("never grows"),
            std::string::npos);
  EXPECT_TRUE(Parse({"allreduce", "-b", "0", "-e", "0", "-f", "2"}).ok());
}

TEST(MessageSizes, FactorSweep) {
  auto o = Parse({"allreduce", "-b", "8", "-e", "64M", "-f", "4"});
  ASSERT_TRUE(o.ok());
  const std::vector<size_t> sizes = MessageSizes(*o);
  ASSERT_EQ(sizes.size(), 12u);
  EXPECT_EQ(sizes.front(), 8u);
  EXPECT_EQ(sizes[1], 32u);
  EXPECT_EQ(sizes.back(), size_t{32} << 20);  // 8 * 4^11; 8 * 4^12 passes 64M
}

TEST(MessageSizes, LinearSweepAndFactorWins) {
  auto linear = Parse({"allreduce", "-b", "0", "-e", "10", "-i", "4"});
  ASSERT_TRUE(linear.ok());
  EXPECT_EQ(MessageSizes(*linear), (std::vector<size_t>{0, 4, 8}));
  auto both = Parse({"allreduce", "-b", "1", "-e", "10", "-i", "4", "-f", "3"});
  ASSERT_TRUE(both.ok());
  EXPECT_EQ(MessageSizes(*both), (std::vector<size_t>{1, 3, 9}));
  auto one = Parse({"allreduce", "-b", "1K", "-e", "1K"});
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(MessageSizes(*one), std::vector<size_t>{1024});
}

TEST(MessageSizes, StopsAtOverflow) {
  Options o;
  o.min_bytes = size_t{1} << 62;
  o.max_bytes = ~size_t{0};
  o.step_factor = 4;
  EXPECT_EQ(MessageSizes(o).size(), 1u);
}

TEST(Collectives, OpAndRoot) {
  EXPECT_TRUE(HasOp(Collective::kAllReduce));
  EXPECT_TRUE(HasOp(Collective::kReduceScatter));
  EXPECT_TRUE(HasOp(Collective::kReduce));
  EXPECT_FALSE(HasOp(Collective::kAllGather));
  EXPECT_FALSE(HasOp(Collective::kBroadcast));
  EXPECT_TRUE(HasRoot(Collective::kBroadcast));
  EXPECT_TRUE(HasRoot(Collective::kReduce));
  EXPECT_FALSE(HasRoot(Collective::kAllReduce));
  EXPECT_FALSE(HasOp(Collective::kSendRecv));
  EXPECT_FALSE(HasOp(Collective::kAllToAll));
  EXPECT_FALSE(HasInPlace(Collective::kSendRecv));
  EXPECT_TRUE(HasInPlace(Collective::kAllToAll));
}

// nccl-tests' busbw factors: sendrecv 1, alltoall (n-1)/n.
TEST(Collectives, PointToPointCountsAndBusFactors) {
  EXPECT_EQ(BusFactor(Collective::kSendRecv, 4), 1.0);
  EXPECT_EQ(BusFactor(Collective::kAllToAll, 4), 0.75);
  const CollCounts sr = ComputeCounts(Collective::kSendRecv, 4000, 4, 4);
  EXPECT_EQ(sr.param_count, 1000u);
  EXPECT_EQ(sr.send_count, 1000u);
  EXPECT_EQ(sr.recv_count, 1000u);
  const CollCounts a2a = ComputeCounts(Collective::kAllToAll, 4000, 4, 3);  // 333 each way per peer
  EXPECT_EQ(a2a.param_count, 333u);
  EXPECT_EQ(a2a.send_count, 999u);
  EXPECT_EQ(a2a.recv_count, 999u);
}

}  // namespace
}  // namespace ringo::perf
