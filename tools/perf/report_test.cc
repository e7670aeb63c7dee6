// ringo-perf's output must read like nccl-tests' to the scripts that parse it:
// the column titles and row widths are compared character for character.
#include "tools/perf/report.h"

#include <gtest/gtest.h>

#include <sstream>

namespace ringo::perf {
namespace {

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

Options SweepOptions() {
  Options o;
  o.min_bytes = 8;
  o.max_bytes = 64 << 20;
  o.step_factor = 4;
  return o;
}

RunInfo TwoRanks() {
  RunInfo info;
  info.nranks = 2;
  info.library = "Ringo 0.1.2";
  info.hostname = "box";
  info.cores = 2;
  info.build_mode = "opt";
  info.ranks = {{0, 1234, -1, "box", ""}, {1, 1235, -1, "box", ""}};
  return info;
}

TEST(FormatTime, NcclTestsPrecision) {
  EXPECT_EQ(FormatTime(5.123), "   5.12");
  EXPECT_EQ(FormatTime(99.994), "  99.99");
  EXPECT_EQ(FormatTime(123.46), "  123.5");
  EXPECT_EQ(FormatTime(9999.9), " 9999.9");
  EXPECT_EQ(FormatTime(12345.6), "  12346");
  EXPECT_EQ(FormatTime(1234567.0), "1234567");
}

TEST(FormatHeader, NcclTestsLayout) {
  const std::vector<std::string> lines = Lines(FormatHeader(SweepOptions(), TwoRanks()));
  ASSERT_GE(lines.size(), 13u);
  EXPECT_EQ(lines[0],
            "# nThread 1 nGpus 1 minBytes 8 maxBytes 67108864 step: 4(factor) warmup iters: 5 "
            "iters: 20 agg iters: 1 validation: 1 graph: 0");
  EXPECT_EQ(lines[1], "#");
  EXPECT_EQ(lines[2], "# Ringo 0.1.2, ringo-perf allreduce, build opt, 2 ranks, host memory");
  EXPECT_EQ(lines[3], "# Machine: box, 2 cores");
  EXPECT_EQ(lines[4],
            "# Time: per rank the mean of 20 back-to-back iterations after 5 warm-up; over ranks "
            "the mean (-a 1)");
  EXPECT_EQ(lines[5], "#");
  EXPECT_EQ(lines[6], "# Using devices");
  EXPECT_EQ(lines[7], "#  Rank  0 Group  0 Pid   1234 on        box device -1 [host memory]");
  EXPECT_EQ(lines[8], "#  Rank  1 Group  0 Pid   1235 on        box device -1 [host memory]");
  EXPECT_EQ(lines[9], "#");
  EXPECT_EQ(lines[10],
            "#                                                              out-of-place        "
            "               in-place          ");
  EXPECT_EQ(lines[11],
            "#       size         count      type   redop    root     time   algbw   busbw "
            "#wrong     time   algbw   busbw #wrong");
  EXPECT_EQ(lines[12],
            "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)     "
            "       (us)  (GB/s)  (GB/s)       ");
}

TEST(FormatHeader, GpuRanksNameTheirDeviceAndEventTiming) {
  RunInfo info = TwoRanks();
  info.host_memory = false;
  info.ranks = {{0, 1234, 0, "box", "[0000:07:00.0] NVIDIA H100 80GB HBM3"},
                {1, 1235, 0, "box", ""}};
  const std::vector<std::string> lines = Lines(FormatHeader(SweepOptions(), info));
  ASSERT_GE(lines.size(), 9u);
  EXPECT_EQ(lines[2], "# Ringo 0.1.2, ringo-perf allreduce, build opt, 2 ranks, device memory");
  EXPECT_EQ(lines[4],
            "# Time: per rank the mean of 20 back-to-back iterations after 5 warm-up, from CUDA "
            "events on each rank's stream; over ranks the mean (-a 1)");
  EXPECT_EQ(lines[7],
            "#  Rank  0 Group  0 Pid   1234 on        box device  0 [0000:07:00.0] NVIDIA H100 "
            "80GB HBM3");
  EXPECT_EQ(lines[8], "#  Rank  1 Group  0 Pid   1235 on        box device  0 [cuda]");
}

TEST(FormatHeader, NamesAPeerAndTheMedian) {
  Options o = SweepOptions();
  o.median = true;
  o.iters = 50;
  o.average = Average::kMax;
  RunInfo info = TwoRanks();
  info.library = "Open MPI v4.1.4";
  info.program = "ompi-perf";
  const std::vector<std::string> lines = Lines(FormatHeader(o, info));
  EXPECT_EQ(lines[2], "# Open MPI v4.1.4, ompi-perf allreduce, build opt, 2 ranks, host memory");
  EXPECT_EQ(lines[4],
            "# Time: per rank the median of 50 one-iteration timings (p10, p90 and mean in the CSV) after "
            "5 warm-up; over ranks the max (-a 3)");
}

TEST(FormatHeader, LinearStepAndNoValidation) {
  Options o;
  o.check = false;
  o.step_bytes = 4096;
  const std::string first = Lines(FormatHeader(o, TwoRanks()))[0];
  EXPECT_NE(first.find("step: 4096(bytes)"), std::string::npos) << first;
  EXPECT_NE(first.find("validation: 0"), std::string::npos) << first;
}

TEST(FormatRow, ColumnsLineUpUnderTheTitles) {
  Row row;
  row.bytes = 67108864;
  row.count = 16777216;
  row.type = "float";
  row.redop = "sum";
  row.root = -1;
  row.out_of_place = {true, 12345.6, 5.44, 8.16, 0};
  row.in_place = {true, 99.5, 674.4, 1011.7, 3};
  const std::string line = FormatRow(row);
  EXPECT_EQ(line,
            "    67108864      16777216     float     sum      -1    12346    5.44    8.16      0"
            "    99.50  674.40  1011.70      3\n");
  // Each value ends where its title ends.
  const std::string titles = Lines(FormatHeader(SweepOptions(), TwoRanks()))[11];
  for (const char* title : {"size", "count", "type", "redop", "root", "algbw"}) {
    const size_t end = titles.find(title) + std::string(title).size();
    EXPECT_NE(line[end - 1], ' ') << title;
    EXPECT_EQ(line[end], ' ') << title;
  }
  const size_t wrong_end = titles.find("#wrong") + 6;
  EXPECT_EQ(line[wrong_end - 1], '0');
}

TEST(FormatRow, UncheckedIsNotApplicable) {
  Row row;
  row.type = "half";
  row.redop = "none";
  row.out_of_place = {true, 1.0, 0.0, 0.0, -1};
  row.in_place = {true, 1.0, 0.0, 0.0, -1};
  const std::string line = FormatRow(row);
  EXPECT_EQ(line.substr(line.size() - 6), "  N/A\n");
}

TEST(FormatRow, NotMeasuredIsNotApplicable) {
  Row row{8, 2, "float", "sum", -1, {true, 1.5, 0.01, 0.01, 0}, {}};
  row.in_place.measured = false;
  const std::string line = FormatRow(row);
  const std::string tail = "      N/A     N/A     N/A    N/A\n";
  ASSERT_GT(line.size(), tail.size());
  EXPECT_EQ(line.substr(line.size() - tail.size()), tail) << line;
  EXPECT_EQ(CsvRow(row), "8,2,float,sum,-1,1.500,0.010000,0.010000,0,,,,,,,,,,\n");
}

TEST(FormatFooter, OkAndFailed) {
  EXPECT_EQ(FormatFooter(0, 12.5),
            "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 12.5\n#\n");
  EXPECT_EQ(Lines(FormatFooter(7, 0))[0], "# Out of bounds values : 7 FAILED");
}

TEST(Csv, SameColumnsAsTheTable) {
  Row row{1024, 256, "float", "sum", -1, {true, 1.5, 0.68, 1.02, 0}, {true, 1.25, 0.82, 1.23, -1}};
  EXPECT_EQ(CsvHeader(),
            "size,count,type,redop,root,time_us,algbw_gbs,busbw_gbs,wrong,inplace_time_us,"
            "inplace_algbw_gbs,inplace_busbw_gbs,inplace_wrong,time_p10_us,time_p90_us,"
            "inplace_time_p10_us,inplace_time_p90_us,time_mean_us,inplace_time_mean_us\n");
  EXPECT_EQ(CsvRow(row),
            "1024,256,float,sum,-1,1.500,0.680000,1.020000,0,1.250,0.820000,1.230000,N/A,,,,,,\n");
}

TEST(Csv, PercentilesWhenMeasured) {
  Row row{8, 2, "float", "sum", -1, {true, 1.5, 0.01, 0.01, 0, 1.25, 2.5, 1.75},
          {true, 1.0, 0.01, 0.01, 0, 0.5, 3, 1.125}};
  EXPECT_EQ(CsvRow(row),
            "8,2,float,sum,-1,1.500,0.010000,0.010000,0,1.000,0.010000,0.010000,0,"
            "1.250,2.500,0.500,3.000,1.750,1.125\n");
}

TEST(Reporter, AveragesBusBandwidthOverEveryMeasurement) {
  std::FILE* csv = std::tmpfile();
  ASSERT_NE(csv, nullptr);
  Reporter reporter(/*is_main=*/true, csv);
  Row row{8, 2, "float", "sum", -1, {true, 1, 1, 2, 0, -1, -1, -1, ""}, {true, 1, 1, 4, 0, -1, -1, -1, ""}};
  testing::internal::CaptureStdout();
  reporter.AddRow(row);
  Row half = row;
  half.in_place.measured = false;  // left out of the average: (2 + 4 + 2) / 3
  reporter.AddRow(half);
  reporter.Footer(0);
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("# Avg bus bandwidth    : 2.66667\n"), std::string::npos) << out;
  std::rewind(csv);
  char buf[256] = {};
  ASSERT_NE(std::fgets(buf, sizeof(buf), csv), nullptr);
  EXPECT_EQ(std::string(buf), CsvRow(row));
  std::fclose(csv);
}

TEST(Reporter, NotesAreCommentLines) {
  Reporter reporter(/*is_main=*/true, nullptr);
  testing::internal::CaptureStdout();
  reporter.Note("half sum: skipped: no float16");
  EXPECT_EQ(testing::internal::GetCapturedStdout(), "# half sum: skipped: no float16\n");
}

TEST(Reporter, SilentOffRankZero) {
  Reporter reporter(/*is_main=*/false, nullptr);
  testing::internal::CaptureStdout();
  reporter.Note("not printed");
  reporter.Header(SweepOptions(), TwoRanks());
  reporter.AddRow(Row{});
  reporter.Footer(1);
  EXPECT_EQ(testing::internal::GetCapturedStdout(), "");
}

}  // namespace
}  // namespace ringo::perf
