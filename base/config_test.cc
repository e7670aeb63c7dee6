// The config registry: every declared variable is described, defaults match
// the declarations, and each of Ringo's variables parses (or fails naming
// itself) as documented. Tests set variables with setenv and reload.
#include "base/config.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <initializer_list>
#include <map>
#include <set>
#include <string>

#include "gtest/gtest.h"

namespace ringo::base {
namespace {

// The value was refused with an error naming the variable and the value.
void ExpectBad(const Config& c, const std::string& name, const std::string& value);

// Unsets every declared variable for the test and restores them after.
class ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const EnvVarInfo& var : DeclaredEnvVars()) {
      if (const char* v = std::getenv(var.name)) saved_[var.name] = v;
      unsetenv(var.name);
    }
    unsetenv("RINGO_NOT_DECLARED_FOR_TEST");
    ReloadConfigForTesting();
  }
  void TearDown() override {
    for (const EnvVarInfo& var : DeclaredEnvVars()) unsetenv(var.name);
    for (const auto& [name, value] : saved_) setenv(name.c_str(), value.c_str(), 1);
    unsetenv("RINGO_NOT_DECLARED_FOR_TEST");
    ReloadConfigForTesting();
  }

  // Sets one variable and returns the reloaded snapshot.
  const Config& With(const char* name, const char* value) {
    setenv(name, value, 1);
    ReloadConfigForTesting();
    return GetConfig();
  }

  // An enumeration variable: unset by default, each allowed value taken as
  // is, anything else (case matters) an error naming the value, with the
  // field left unset (the default's meaning).
  void ExpectEnum(const char* name, std::string Config::*field, std::initializer_list<const char*> good,
                  std::initializer_list<const char*> bad) {
    EXPECT_EQ(GetConfig().*field, "") << name;
    for (const char* v : good) {
      const Config& c = With(name, v);
      EXPECT_TRUE(c.parse_status.ok()) << c.parse_status.ToString();
      EXPECT_EQ(c.*field, v) << name;
    }
    for (const char* v : bad) {
      const Config& c = With(name, v);
      ExpectBad(c, name, v);
      EXPECT_EQ(c.*field, "") << name << "=" << v << " must fall back to the default";
    }
  }

  static const EnvVarInfo* Find(const std::string& name) {
    for (const EnvVarInfo& var : DeclaredEnvVars()) {
      if (name == var.name) return &var;
    }
    return nullptr;
  }

  std::map<std::string, std::string> saved_;
};

TEST_F(ConfigTest, EveryDeclaredVariableIsDescribed) {
  const auto& vars = DeclaredEnvVars();
  ASSERT_FALSE(vars.empty());
  std::set<std::string> names;
  const std::set<std::string> types = {"int", "bool", "string", "enum"};
  for (const EnvVarInfo& var : vars) {
    ASSERT_NE(var.name, nullptr);
    ASSERT_NE(var.type, nullptr) << var.name;
    ASSERT_NE(var.default_value, nullptr) << var.name;
    ASSERT_NE(var.help, nullptr) << var.name;
    const std::string name = var.name;
    EXPECT_FALSE(name.empty());
    for (char c : name) {
      EXPECT_TRUE(std::isupper(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) ||
                  c == '_')
          << "variable name '" << name << "' is not UPPER_CASE";
    }
    EXPECT_TRUE(names.insert(name).second) << name << " is declared twice";
    EXPECT_EQ(types.count(var.type), 1u) << name << " has type '" << var.type << "'";
    EXPECT_GT(std::string(var.help).size(), 10u) << name << " has no real help text";
    const std::string def = var.default_value;
    if (std::string(var.type) == "int" && !def.empty()) {
      char* end = nullptr;
      std::strtoll(def.c_str(), &end, 10);
      EXPECT_EQ(*end, '\0') << name << " has a non-integer default '" << def << "'";
    }
    if (std::string(var.type) == "bool") {
      EXPECT_TRUE(def.empty() || def == "0" || def == "1") << name << " default '" << def << "'";
    }
  }
  // Ringo's own variables are all there.
  for (const char* name : {"RINGO_DEBUG", "RINGO_DEBUG_FILE", "RINGO_TIMEOUT_MS", "RINGO_COMM_ID",
                           "RINGO_SOCKET_IFNAME", "RINGO_SLOT_BYTES", "RINGO_NCHANNELS", "RINGO_SPIN_COUNT",
                           "RINGO_YIELD_COUNT", "RINGO_CROWDED_WAIT", "RINGO_ALGO", "RINGO_WIRE", "RINGO_GPU_WIRE", "RINGO_CHECK", "RINGO_DETERMINISTIC", "RINGO_PROTO", "RINGO_DEVICE",
                           "RINGO_HOST_ISA", "RINGO_P2P_DISABLE",
                           "RINGO_SHM_DISABLE"}) {
    EXPECT_NE(Find(name), nullptr) << name << " is not declared";
  }
  // And the launchers' that the tools read.
  for (const char* name : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
                           "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS"}) {
    EXPECT_NE(Find(name), nullptr) << name << " is not declared";
  }
}

TEST_F(ConfigTest, RingoVariablesAreNamedRingo) {
  // Launcher and CUDA variables aside, every variable Ringo owns starts with RINGO_.
  const std::set<std::string> prefixes = {"RINGO_", "OMPI_", "PMIX_", "SLURM_", "CUDA_"};
  const std::set<std::string> torchrun = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"};
  for (const EnvVarInfo& var : DeclaredEnvVars()) {
    const std::string name = var.name;
    bool ok = torchrun.count(name) > 0;
    for (const std::string& p : prefixes) ok = ok || name.compare(0, p.size(), p) == 0;
    EXPECT_TRUE(ok) << name;
  }
}

TEST_F(ConfigTest, DefaultsWhenNothingIsSet) {
  const Config& c = GetConfig();
  EXPECT_TRUE(c.parse_status.ok()) << c.parse_status.ToString();
  EXPECT_TRUE(c.raw.empty());
  EXPECT_EQ(c.log_level, LogLevel::kWarn);
  EXPECT_EQ(c.log_file, "");
  EXPECT_EQ(c.timeout_ms, 300000);
  EXPECT_EQ(c.comm_id, "");
  EXPECT_EQ(c.socket_ifname, "");
  EXPECT_EQ(c.slot_bytes, 0);
  EXPECT_EQ(c.nchannels, 0);
  EXPECT_EQ(c.spin_count, -1);
  EXPECT_EQ(c.yield_count, -1);
  EXPECT_EQ(c.algo, "");
  EXPECT_TRUE(c.check);
  EXPECT_FALSE(c.deterministic);
  for (const EnvVarInfo& var : DeclaredEnvVars()) {
    EXPECT_FALSE(c.Get(var.name).has_value()) << var.name;
    EXPECT_FALSE(c.GetInt(var.name).has_value()) << var.name;
  }
}

TEST_F(ConfigTest, DefaultsAgreeWithDeclarations) {
  const Config& c = GetConfig();
  EXPECT_STREQ(Find("RINGO_DEBUG")->default_value, "WARN");
  EXPECT_EQ(std::to_string(c.timeout_ms), Find("RINGO_TIMEOUT_MS")->default_value);
  EXPECT_EQ(std::to_string(c.slot_bytes), Find("RINGO_SLOT_BYTES")->default_value);
  EXPECT_EQ(std::to_string(c.nchannels), Find("RINGO_NCHANNELS")->default_value);
  EXPECT_EQ(std::to_string(c.spin_count), Find("RINGO_SPIN_COUNT")->default_value);
  EXPECT_EQ(std::to_string(c.yield_count), Find("RINGO_YIELD_COUNT")->default_value);
  EXPECT_EQ(c.algo, Find("RINGO_ALGO")->default_value);
  EXPECT_EQ(c.check ? "1" : "0", std::string(Find("RINGO_CHECK")->default_value));
  EXPECT_EQ(c.deterministic ? "1" : "0", std::string(Find("RINGO_DETERMINISTIC")->default_value));
  EXPECT_STREQ(Find("RINGO_DETERMINISTIC")->type, "bool");
  EXPECT_STREQ(Find("RINGO_DEBUG")->type, "enum");
  EXPECT_STREQ(Find("RINGO_TIMEOUT_MS")->type, "int");
  EXPECT_STREQ(Find("RINGO_SLOT_BYTES")->type, "int");
  EXPECT_STREQ(Find("RINGO_NCHANNELS")->type, "int");
  EXPECT_STREQ(Find("RINGO_CHECK")->type, "bool");
  EXPECT_STREQ(Find("RINGO_COMM_ID")->type, "string");
}

TEST_F(ConfigTest, TimeoutParses) {
  const Config& c = With("RINGO_TIMEOUT_MS", "1234");
  EXPECT_TRUE(c.parse_status.ok()) << c.parse_status.ToString();
  EXPECT_EQ(c.timeout_ms, 1234);
  EXPECT_EQ(c.Get("RINGO_TIMEOUT_MS").value_or(""), "1234");
  EXPECT_EQ(c.GetInt("RINGO_TIMEOUT_MS").value_or(0), 1234);
  EXPECT_EQ(c.raw.at("RINGO_TIMEOUT_MS"), "1234");
  EXPECT_EQ(With("RINGO_TIMEOUT_MS", "1").timeout_ms, 1);
  EXPECT_EQ(With("RINGO_TIMEOUT_MS", "86400000000").timeout_ms, 86400000000LL);
}

// A bad value: an InvalidArgument parse_status naming the variable and the
// value, and the field keeps its default.
void ExpectBad(const Config& c, const std::string& name, const std::string& value) {
  EXPECT_FALSE(c.parse_status.ok()) << name << "='" << value << "' was accepted";
  EXPECT_EQ(c.parse_status.code(), Code::kInvalidArgument);
  EXPECT_NE(c.parse_status.message().find(name), std::string::npos) << c.parse_status.message();
  if (!value.empty()) {
    EXPECT_NE(c.parse_status.message().find(value), std::string::npos) << c.parse_status.message();
  }
}

TEST_F(ConfigTest, BadTimeouts) {
  for (const char* bad : {"0", "-5", "abc", "12abc", "1.5", "0x10", "99999999999999999999999"}) {
    const Config& c = With("RINGO_TIMEOUT_MS", bad);
    ExpectBad(c, "RINGO_TIMEOUT_MS", bad);
    EXPECT_EQ(c.timeout_ms, 300000) << bad;
  }
}

TEST_F(ConfigTest, SlotBytesParses) {
  for (int64_t v : {0, 64, 128, 4096, 1 << 20}) {
    const Config& c = With("RINGO_SLOT_BYTES", std::to_string(v).c_str());
    EXPECT_TRUE(c.parse_status.ok()) << v << ": " << c.parse_status.ToString();
    EXPECT_EQ(c.slot_bytes, v);
  }
}

TEST_F(ConfigTest, BadSlotBytes) {
  for (const char* bad : {"1", "32", "63", "100", "65", "4097", "-64", "-1", "big", "64k"}) {
    const Config& c = With("RINGO_SLOT_BYTES", bad);
    ExpectBad(c, "RINGO_SLOT_BYTES", bad);
    EXPECT_EQ(c.slot_bytes, 0) << bad << " must fall back to the planner's choice";
  }
}

TEST_F(ConfigTest, NChannelsParses) {
  for (int v : {0, 1, 2, 3, 8}) {
    const Config& c = With("RINGO_NCHANNELS", std::to_string(v).c_str());
    EXPECT_TRUE(c.parse_status.ok()) << c.parse_status.ToString();
    EXPECT_EQ(c.nchannels, v);
  }
}

TEST_F(ConfigTest, BadNChannels) {
  for (const char* bad : {"-1", "two", "2x", "1e3"}) {
    const Config& c = With("RINGO_NCHANNELS", bad);
    ExpectBad(c, "RINGO_NCHANNELS", bad);
    EXPECT_EQ(c.nchannels, 0) << bad;
  }
}

TEST_F(ConfigTest, SpinCount) {
  EXPECT_EQ(With("RINGO_SPIN_COUNT", "-1").spin_count, -1);
  EXPECT_EQ(With("RINGO_SPIN_COUNT", "0").spin_count, 0);
  const Config& c = With("RINGO_SPIN_COUNT", "5000");
  EXPECT_TRUE(c.parse_status.ok());
  EXPECT_EQ(c.spin_count, 5000);
  const Config& bad = With("RINGO_SPIN_COUNT", "-2");
  ExpectBad(bad, "RINGO_SPIN_COUNT", "-2");
  EXPECT_EQ(bad.spin_count, -1);
}

TEST_F(ConfigTest, CrowdedWait) {
  EXPECT_EQ(GetConfig().crowded_wait, -1);
  EXPECT_EQ(With("RINGO_CROWDED_WAIT", "0").crowded_wait, 0);
  const Config& on = With("RINGO_CROWDED_WAIT", "1");
  EXPECT_TRUE(on.parse_status.ok()) << on.parse_status.ToString();
  EXPECT_EQ(on.crowded_wait, 1);
  for (const char* bad : {"2", "-2", "yes"}) {
    const Config& c = With("RINGO_CROWDED_WAIT", bad);
    ExpectBad(c, "RINGO_CROWDED_WAIT", bad);
    EXPECT_EQ(c.crowded_wait, -1) << bad;
  }
}

TEST_F(ConfigTest, YieldCount) {
  EXPECT_EQ(GetConfig().yield_count, -1);
  EXPECT_EQ(With("RINGO_YIELD_COUNT", "0").yield_count, 0);
  const Config& c = With("RINGO_YIELD_COUNT", "50000");
  EXPECT_TRUE(c.parse_status.ok()) << c.parse_status.ToString();
  EXPECT_EQ(c.yield_count, 50000);
  const Config& bad = With("RINGO_YIELD_COUNT", "lots");
  ExpectBad(bad, "RINGO_YIELD_COUNT", "lots");
  EXPECT_EQ(bad.yield_count, -1);
}

TEST_F(ConfigTest, Algorithm) {
  ExpectEnum("RINGO_ALGO", &Config::algo, {"ring", "oneshot", "direct", "doubling"}, {"tree", "RING", "one-shot"});
}

TEST_F(ConfigTest, Protocol) { ExpectEnum("RINGO_PROTO", &Config::proto, {"simple", "ll"}, {"LL", "ll128", "fast"}); }

TEST_F(ConfigTest, DeviceKind) {
  ExpectEnum("RINGO_DEVICE", &Config::device, {"auto", "host", "cuda"}, {"HOST", "gpu", "cpu", "1"});
}

TEST_F(ConfigTest, HostIsa) {
  ExpectEnum("RINGO_HOST_ISA", &Config::host_isa, {"auto", "generic", "avx2"}, {"AVX2", "sse2", "avx512", "1"});
}

TEST_F(ConfigTest, DebugLevels) {
  const std::map<std::string, LogLevel> levels = {
      {"NONE", LogLevel::kNone}, {"WARN", LogLevel::kWarn}, {"INFO", LogLevel::kInfo}, {"TRACE", LogLevel::kTrace}};
  for (const auto& [text, level] : levels) {
    const Config& c = With("RINGO_DEBUG", text.c_str());
    EXPECT_TRUE(c.parse_status.ok()) << text << ": " << c.parse_status.ToString();
    EXPECT_EQ(c.log_level, level) << text;
  }
}

TEST_F(ConfigTest, BadDebugLevel) {
  for (const char* bad : {"VERBOSE", "3", "INFOX", "WAR"}) {
    const Config& c = With("RINGO_DEBUG", bad);
    ExpectBad(c, "RINGO_DEBUG", bad);
    EXPECT_EQ(c.log_level, LogLevel::kWarn) << bad;
  }
}

TEST_F(ConfigTest, SeveralBadValuesAreAllNamed) {
  setenv("RINGO_DEBUG", "LOUD", 1);
  setenv("RINGO_TIMEOUT_MS", "soon", 1);
  setenv("RINGO_SLOT_BYTES", "100", 1);
  setenv("RINGO_NCHANNELS", "-3", 1);
  ReloadConfigForTesting();
  const Config& c = GetConfig();
  ASSERT_FALSE(c.parse_status.ok());
  EXPECT_EQ(c.parse_status.code(), Code::kInvalidArgument);
  const std::string& m = c.parse_status.message();
  for (const char* name : {"RINGO_DEBUG", "RINGO_TIMEOUT_MS", "RINGO_SLOT_BYTES", "RINGO_NCHANNELS"}) {
    EXPECT_NE(m.find(name), std::string::npos) << name << " missing from: " << m;
  }
  for (const char* value : {"LOUD", "soon", "100", "-3"}) {
    EXPECT_NE(m.find(value), std::string::npos) << value << " missing from: " << m;
  }
}

TEST_F(ConfigTest, GoodValueNextToABadOneStillApplies) {
  setenv("RINGO_TIMEOUT_MS", "777", 1);
  setenv("RINGO_NCHANNELS", "oops", 1);
  ReloadConfigForTesting();
  const Config& c = GetConfig();
  EXPECT_FALSE(c.parse_status.ok());
  EXPECT_EQ(c.timeout_ms, 777);
  EXPECT_EQ(c.parse_status.message().find("RINGO_TIMEOUT_MS"), std::string::npos) << c.parse_status.message();
}

TEST_F(ConfigTest, StringsAndCheck) {
  setenv("RINGO_COMM_ID", "10.0.0.1:5000", 1);
  setenv("RINGO_SOCKET_IFNAME", "^docker,lo", 1);
  setenv("RINGO_DEBUG_FILE", "/tmp/ringo.%h.%p", 1);
  setenv("RINGO_CHECK", "0", 1);
  ReloadConfigForTesting();
  const Config& c = GetConfig();
  EXPECT_TRUE(c.parse_status.ok()) << c.parse_status.ToString();
  EXPECT_EQ(c.comm_id, "10.0.0.1:5000");
  EXPECT_EQ(c.socket_ifname, "^docker,lo");
  EXPECT_EQ(c.log_file, "/tmp/ringo.%h.%p");
  EXPECT_FALSE(c.check);
  EXPECT_EQ(c.raw.size(), 4u);
  EXPECT_TRUE(With("RINGO_CHECK", "1").check);
  EXPECT_TRUE(With("RINGO_DETERMINISTIC", "1").deterministic);
  EXPECT_FALSE(With("RINGO_DETERMINISTIC", "2").parse_status.ok());
}

TEST_F(ConfigTest, RequireGpu) {
  EXPECT_FALSE(GetConfig().require_gpu);
  EXPECT_STREQ(Find("RINGO_REQUIRE_GPU")->default_value, "0");
  EXPECT_TRUE(With("RINGO_REQUIRE_GPU", "1").require_gpu);
  EXPECT_FALSE(With("RINGO_REQUIRE_GPU", "0").require_gpu);
  const Config& bad = With("RINGO_REQUIRE_GPU", "yes");
  ExpectBad(bad, "RINGO_REQUIRE_GPU", "yes");
  EXPECT_FALSE(bad.require_gpu);
}

TEST_F(ConfigTest, CudaDeviceMaxConnections) {
  EXPECT_EQ(GetConfig().cuda_device_max_connections, 0);
  EXPECT_EQ(With("CUDA_DEVICE_MAX_CONNECTIONS", "16").cuda_device_max_connections, 16);
  const Config& odd =
      With("CUDA_DEVICE_MAX_CONNECTIONS", "0");  // CUDA's variable: not Ringo's to refuse
  EXPECT_TRUE(odd.parse_status.ok()) << odd.parse_status.ToString();
  EXPECT_EQ(odd.cuda_device_max_connections, 0);
  // Export: left alone when set (capped at CUDA's 32 when read), set when unset.
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "12", 1);
  EXPECT_EQ(ExportCudaDeviceMaxConnections(32), 12);
  EXPECT_STREQ(std::getenv("CUDA_DEVICE_MAX_CONNECTIONS"), "12");
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "64", 1);
  EXPECT_EQ(ExportCudaDeviceMaxConnections(32), 32);
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "many", 1);
  EXPECT_EQ(ExportCudaDeviceMaxConnections(32), 8);  // what CUDA falls back to
  unsetenv("CUDA_DEVICE_MAX_CONNECTIONS");
  EXPECT_EQ(ExportCudaDeviceMaxConnections(32), 32);
  EXPECT_STREQ(std::getenv("CUDA_DEVICE_MAX_CONNECTIONS"), "32");
  // Value 0 (an MPS client): reports what holds, sets nothing.
  unsetenv("CUDA_DEVICE_MAX_CONNECTIONS");
  EXPECT_EQ(ExportCudaDeviceMaxConnections(0), 8);
  EXPECT_EQ(std::getenv("CUDA_DEVICE_MAX_CONNECTIONS"), nullptr);
}

TEST_F(ConfigTest, VerbsVariables) {
  const Config& c = GetConfig();
  EXPECT_FALSE(c.ib_disable);
  EXPECT_EQ(c.ib_hca, "");
  EXPECT_EQ(std::to_string(c.ib_gid_index), Find("RINGO_IB_GID_INDEX")->default_value);
  EXPECT_EQ(std::to_string(c.ib_timeout), Find("RINGO_IB_TIMEOUT")->default_value);
  EXPECT_EQ(std::to_string(c.ib_retry_cnt), Find("RINGO_IB_RETRY_CNT")->default_value);
  EXPECT_EQ(std::to_string(c.ib_qps_per_connection), Find("RINGO_IB_QPS_PER_CONNECTION")->default_value);
  EXPECT_TRUE(With("RINGO_IB_DISABLE", "1").ib_disable);
  EXPECT_EQ(With("RINGO_IB_HCA", "^mlx5_1").ib_hca, "^mlx5_1");
  EXPECT_EQ(With("RINGO_IB_GID_INDEX", "3").ib_gid_index, 3);
  EXPECT_EQ(With("RINGO_IB_QPS_PER_CONNECTION", "4").ib_qps_per_connection, 4);
  ExpectBad(With("RINGO_IB_TIMEOUT", "32"), "RINGO_IB_TIMEOUT", "32");
  ExpectBad(With("RINGO_IB_RETRY_CNT", "8"), "RINGO_IB_RETRY_CNT", "8");
  ExpectBad(With("RINGO_IB_QPS_PER_CONNECTION", "0"), "RINGO_IB_QPS_PER_CONNECTION", "0");
  ExpectBad(With("RINGO_IB_GID_INDEX", "-2"), "RINGO_IB_GID_INDEX", "-2");
  const Config& bad = With("RINGO_IB_TIMEOUT", "40");
  EXPECT_EQ(bad.ib_timeout, 18);  // keeps the default
}

TEST_F(ConfigTest, MpsControlPresentLooksForTheDaemonsPipe) {
  char dir[] = "/tmp/ringo-mps-test.XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  EXPECT_FALSE(MpsControlPresent(With("CUDA_MPS_PIPE_DIRECTORY", dir)));
  const std::string control = std::string(dir) + "/control";
  ASSERT_EQ(mkfifo(control.c_str(), 0600), 0);
  EXPECT_TRUE(MpsControlPresent(With("CUDA_MPS_PIPE_DIRECTORY", dir)));
  EXPECT_FALSE(MpsControlPresent(With("CUDA_MPS_PIPE_DIRECTORY", "/nonexistent/ringo-mps")));
  unlink(control.c_str());
  rmdir(dir);
}

TEST_F(ConfigTest, LauncherVariablesThroughGetInt) {
  setenv("RANK", "3", 1);
  setenv("WORLD_SIZE", "8", 1);
  setenv("MASTER_ADDR", "node17", 1);
  setenv("SLURM_PROCID", "x", 1);
  ReloadConfigForTesting();
  const Config& c = GetConfig();
  EXPECT_TRUE(c.parse_status.ok()) << "launcher variables are not validated at load";
  EXPECT_EQ(c.GetInt("RANK").value_or(-1), 3);
  EXPECT_EQ(c.GetInt("WORLD_SIZE").value_or(-1), 8);
  EXPECT_EQ(c.Get("MASTER_ADDR").value_or(""), "node17");
  EXPECT_FALSE(c.GetInt("MASTER_ADDR").has_value());
  EXPECT_EQ(c.Get("SLURM_PROCID").value_or(""), "x");
  EXPECT_FALSE(c.GetInt("SLURM_PROCID").has_value());
  EXPECT_FALSE(c.Get("OMPI_COMM_WORLD_RANK").has_value());
}

TEST_F(ConfigTest, UndeclaredVariablesAreNotRead) {
  setenv("RINGO_NOT_DECLARED_FOR_TEST", "1", 1);
  ReloadConfigForTesting();
  const Config& c = GetConfig();
  EXPECT_EQ(c.raw.count("RINGO_NOT_DECLARED_FOR_TEST"), 0u);
  EXPECT_TRUE(c.raw.empty());
}

TEST_F(ConfigTest, SnapshotIsImmutableAcrossReloads) {
  const Config& before = With("RINGO_TIMEOUT_MS", "111");
  EXPECT_EQ(&before, &GetConfig());  // stable until the next reload
  const Config& after = With("RINGO_TIMEOUT_MS", "222");
  EXPECT_NE(&before, &after);
  EXPECT_EQ(before.timeout_ms, 111);  // the old snapshot is still alive and unchanged
  EXPECT_EQ(after.timeout_ms, 222);
  // Changing the environment without a reload changes nothing.
  setenv("RINGO_TIMEOUT_MS", "333", 1);
  EXPECT_EQ(GetConfig().timeout_ms, 222);
}

using ConfigDeathTest = ConfigTest;

TEST_F(ConfigDeathTest, GetOfAnUndeclaredNameAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const Config& c = GetConfig();
  EXPECT_DEATH((void)c.Get("RINGO_NO_SUCH_VARIABLE"), "RINGO_NO_SUCH_VARIABLE is not declared");
  EXPECT_DEATH((void)c.GetInt("NOT_DECLARED"), "not declared");
}

}  // namespace
}  // namespace ringo::base
