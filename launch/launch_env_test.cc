// Rank, size and rendezvous from launcher environments, as Config snapshots
// (no process environment is touched).
#include "launch/launch_env.h"

#include <gtest/gtest.h>

#include <map>

namespace ringo::launch {
namespace {

base::Config Env(const std::map<std::string, std::string>& vars) {
  base::Config config;
  config.raw = vars;
  if (auto it = vars.find("RINGO_COMM_ID"); it != vars.end()) config.comm_id = it->second;
  return config;
}

TEST(DetectLaunch, NoLauncherIsOneRank) {
  auto env = DetectLaunch(Env({}));
  ASSERT_TRUE(env.ok()) << env.status().ToString();
  EXPECT_EQ(env->launcher, "");
  EXPECT_EQ(env->rank, 0);
  EXPECT_EQ(env->size, 1);
  EXPECT_EQ(env->rendezvous, Rendezvous::kSingle);
}

TEST(DetectLaunch, OpenMpiOnOneHostUsesTheIdFile) {
  auto env = DetectLaunch(Env({{"OMPI_COMM_WORLD_RANK", "2"},
                               {"OMPI_COMM_WORLD_SIZE", "4"},
                               {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
                               {"PMIX_NAMESPACE", "prterun-vm-1234@1"}}));
  ASSERT_TRUE(env.ok()) << env.status().ToString();
  EXPECT_EQ(env->launcher, "Open MPI");
  EXPECT_EQ(env->rank, 2);
  EXPECT_EQ(env->size, 4);
  EXPECT_TRUE(env->all_local);
  EXPECT_EQ(env->rendezvous, Rendezvous::kIdFile);
  EXPECT_EQ(IdFilePath(env->job_name), "/tmp/ringo-perf-prterun-vm-1234_1.id");
}

TEST(DetectLaunch, OpenMpiAcrossHostsNeedsCommId) {
  const std::map<std::string, std::string> vars = {{"OMPI_COMM_WORLD_RANK", "0"},
                                                   {"OMPI_COMM_WORLD_SIZE", "4"},
                                                   {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                                                   {"PMIX_NAMESPACE", "job"}};
  auto env = DetectLaunch(Env(vars));
  ASSERT_FALSE(env.ok());
  EXPECT_NE(env.status().message().find("RINGO_COMM_ID=host:port"), std::string::npos);

  auto with_id = vars;
  with_id["RINGO_COMM_ID"] = "10.0.0.1:29600";
  env = DetectLaunch(Env(with_id));
  ASSERT_TRUE(env.ok()) << env.status().ToString();
  EXPECT_EQ(env->rendezvous, Rendezvous::kCommId);
  EXPECT_EQ(env->comm_id, "10.0.0.1:29600");
}

TEST(DetectLaunch, TorchrunUsesTheNextPortAfterMasterPort) {
  auto env = DetectLaunch(Env(
      {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "node7"}, {"MASTER_PORT", "29500"}}));
  ASSERT_TRUE(env.ok()) << env.status().ToString();
  EXPECT_EQ(env->launcher, "torchrun");
  EXPECT_EQ(env->rendezvous, Rendezvous::kMaster);
  EXPECT_EQ(env->comm_id, "node7:29501");

  env = DetectLaunch(
      Env({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "::1"}, {"MASTER_PORT", "80"}}));
  ASSERT_TRUE(env.ok());
  EXPECT_EQ(env->comm_id, "[::1]:81");

  EXPECT_FALSE(
      DetectLaunch(
          Env({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "65535"}}))
          .ok());
}

TEST(DetectLaunch, CommIdWinsOverMaster) {
  auto env = DetectLaunch(Env({{"RANK", "1"},
                               {"WORLD_SIZE", "2"},
                               {"MASTER_ADDR", "node7"},
                               {"MASTER_PORT", "29500"},
                               {"RINGO_COMM_ID", "node8:4000"}}));
  ASSERT_TRUE(env.ok());
  EXPECT_EQ(env->rendezvous, Rendezvous::kCommId);
  EXPECT_EQ(env->comm_id, "node8:4000");
}

TEST(DetectLaunch, SlurmOnOneNode) {
  auto env = DetectLaunch(Env({{"SLURM_PROCID", "3"},
                               {"SLURM_NTASKS", "8"},
                               {"SLURM_NNODES", "1"},
                               {"SLURM_JOB_ID", "4711"},
                               {"SLURM_STEP_ID", "0"}}));
  ASSERT_TRUE(env.ok()) << env.status().ToString();
  EXPECT_EQ(env->launcher, "Slurm");
  EXPECT_EQ(env->rank, 3);
  EXPECT_EQ(env->size, 8);
  EXPECT_EQ(env->rendezvous, Rendezvous::kIdFile);
  EXPECT_EQ(env->job_name, "4711.0");

  EXPECT_FALSE(DetectLaunch(Env({{"SLURM_PROCID", "3"},
                                 {"SLURM_NTASKS", "8"},
                                 {"SLURM_NNODES", "2"},
                                 {"SLURM_JOB_ID", "4711"}}))
                   .ok());
}

TEST(DetectLaunch, LauncherPrecedence) {
  // mpirun inside a Slurm allocation: Open MPI's numbering is the one in force.
  auto env = DetectLaunch(Env({{"OMPI_COMM_WORLD_RANK", "1"},
                               {"OMPI_COMM_WORLD_SIZE", "2"},
                               {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                               {"PMIX_NAMESPACE", "j"},
                               {"SLURM_PROCID", "0"},
                               {"SLURM_NTASKS", "1"}}));
  ASSERT_TRUE(env.ok());
  EXPECT_EQ(env->launcher, "Open MPI");
  // torchrun inside sbatch: one Slurm task per node, torchrun's RANK is the rank.
  env = DetectLaunch(Env({{"RANK", "5"},
                          {"WORLD_SIZE", "8"},
                          {"MASTER_ADDR", "n0"},
                          {"MASTER_PORT", "100"},
                          {"SLURM_PROCID", "1"},
                          {"SLURM_NTASKS", "2"}}));
  ASSERT_TRUE(env.ok());
  EXPECT_EQ(env->launcher, "torchrun");
  EXPECT_EQ(env->rank, 5);
}

TEST(DetectLaunch, InconsistentVariablesAreErrors) {
  EXPECT_FALSE(DetectLaunch(Env({{"RANK", "0"}})).ok());
  EXPECT_FALSE(DetectLaunch(Env({{"RANK", "2"}, {"WORLD_SIZE", "2"}})).ok());
  EXPECT_FALSE(DetectLaunch(Env({{"RANK", "-1"}, {"WORLD_SIZE", "2"}})).ok());
  EXPECT_FALSE(DetectLaunch(Env({{"RANK", "x"}, {"WORLD_SIZE", "2"}})).ok());
  EXPECT_FALSE(
      DetectLaunch(Env({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "0"}})).ok());
}

TEST(DetectRanks, NeedsNoRendezvous) {
  // What -np checks: a launcher is present, even one whose ranks span hosts.
  auto env = DetectRanks(Env({{"OMPI_COMM_WORLD_RANK", "0"},
                              {"OMPI_COMM_WORLD_SIZE", "2"},
                              {"OMPI_COMM_WORLD_LOCAL_SIZE", "1"}}));
  ASSERT_TRUE(env.ok());
  EXPECT_EQ(env->size, 2);
  EXPECT_EQ(env->rendezvous, Rendezvous::kSingle);
}

TEST(IdFilePath, SanitizesTheJobName) {
  EXPECT_EQ(IdFilePath("12.0"), "/tmp/ringo-perf-12.0.id");
  EXPECT_EQ(IdFilePath("../a b/c:d"), "/tmp/ringo-perf-.._a_b_c_d.id");
}

}  // namespace
}  // namespace ringo::launch
