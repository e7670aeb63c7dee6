// Helpers shared by the API tests.
#include "tests/api_test_util.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <thread>

#include "tests/harness.h"

namespace ringo::tests {

std::vector<ringoComm_t> MakeHostComms(int n) {
  ringoUniqueId id;
  ringoResult_t rc = ringoGetUniqueId(&id);
  EXPECT_EQ(rc, ringoSuccess) << ringoGetLastError(nullptr);
  if (rc != ringoSuccess) return {};
  std::vector<ringoComm_t> comms(n, nullptr);
  std::vector<ringoResult_t> results(n, ringoSuccess);
  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      ringoConfig_t config = RINGO_CONFIG_INITIALIZER;
      config.device_kind = RINGO_DEVICE_HOST;
      results[r] = ringoCommInitRankConfig(&comms[r], n, id, r, &config);
      if (results[r] != ringoSuccess) errors[r] = ringoGetLastError(nullptr);
    });
  }
  for (auto& t : threads) t.join();
  bool ok = true;
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(results[r], ringoSuccess) << "rank " << r << ": " << errors[r];
    ok = ok && results[r] == ringoSuccess;
  }
  if (!ok) {
    for (int r = 0; r < n; ++r) {
      if (results[r] == ringoSuccess) ringoCommDestroy(comms[r]);
    }
    return {};
  }
  return comms;
}

void DestroyComms(const std::vector<ringoComm_t>& comms) {
  for (ringoComm_t c : comms) EXPECT_EQ(ringoCommDestroy(c), ringoSuccess);
}

bool MentionsAny(const std::string& text, std::initializer_list<const char*> keywords) {
  std::string lower = text;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char ch) { return std::tolower(ch); });
  for (const char* k : keywords) {
    if (lower.find(k) != std::string::npos) return true;
  }
  return false;
}

namespace {

std::string Keywords(std::initializer_list<const char*> keywords) {
  std::string out;
  for (const char* k : keywords) out += std::string(out.empty() ? "" : " or ") + "'" + k + "'";
  return out;
}

}  // namespace

::testing::AssertionResult FailsWith(ringoResult_t rc, ringoResult_t want, ringoComm_t comm,
                                     std::initializer_list<const char*> keywords) {
  const std::string last = ringoGetLastError(nullptr);
  if (rc != want) {
    return ::testing::AssertionFailure() << "returned " << ResultName(rc) << ", want "
                                         << ResultName(want) << " (last error: '" << last << "')";
  }
  if (last.empty()) {
    return ::testing::AssertionFailure() << "ringoGetLastError(NULL) is empty after the failure";
  }
  if (!MentionsAny(last, keywords)) {
    return ::testing::AssertionFailure()
           << "ringoGetLastError(NULL) = '" << last << "' does not mention " << Keywords(keywords);
  }
  if (comm != nullptr && std::string(ringoGetLastError(comm)).empty()) {
    return ::testing::AssertionFailure() << "ringoGetLastError(comm) is empty after a failure on "
                                            "comm (ringoGetLastError(NULL) = '"
                                         << last << "')";
  }
  return ::testing::AssertionSuccess();
}

std::string CheckFails(const char* what, ringoResult_t rc, ringoResult_t want,
                       std::initializer_list<const char*> keywords) {
  ::testing::AssertionResult r = FailsWith(rc, want, nullptr, keywords);
  if (r) return "";
  return std::string(what) + ": " + r.message() + "\n";
}

std::string InChild(const std::function<std::string()>& fn) {
  HarnessOptions options;
  options.make_unique_id = false;
  auto results = RunRanks(
      1, RankMode::kProcesses, std::chrono::milliseconds(60000),
      [&](int, int, const ringoUniqueId&) { return fn(); }, options);
  return results[0].ok ? "" : results[0].message;
}

ringoComm_t MakeSoloHostComm() {
  ringoUniqueId id;
  if (ringoGetUniqueId(&id) != ringoSuccess) return nullptr;
  ringoConfig_t config = RINGO_CONFIG_INITIALIZER;
  config.device_kind = RINGO_DEVICE_HOST;
  ringoComm_t comm = nullptr;
  if (ringoCommInitRankConfig(&comm, 1, id, 0, &config) != ringoSuccess) return nullptr;
  return comm;
}

std::string NamesAbsentRank(const std::string& message, int rank) {
  const size_t never = message.find(" never joined");
  const size_t list = never == std::string::npos ? std::string::npos : message.rfind("rank(s) ", never);
  if (list != std::string::npos) {
    const std::string ranks = message.substr(list + 8, never - list - 8) + ",";
    for (size_t at = 0, comma; (comma = ranks.find(',', at)) != std::string::npos; at = comma + 1) {
      if (ranks.substr(at, comma - at) == std::to_string(rank)) return "";
    }
  }
  return "the message does not name rank " + std::to_string(rank) + " as never joined: \"" + message + "\"";
}

}  // namespace ringo::tests
