#include "launcher/slurm.h"

#include <gtest/gtest.h>

#include <map>

namespace gangrun::launcher {
namespace {

using Hosts = std::vector<std::string>;

TEST(SlurmNodeListTest, ExpandsEveryForm) {
  EXPECT_EQ(*ExpandSlurmNodeList("node1"), Hosts({"node1"}));
  EXPECT_EQ(*ExpandSlurmNodeList("a,b,c"), Hosts({"a", "b", "c"}));
  EXPECT_EQ(*ExpandSlurmNodeList("node[01-04,07]"),
            Hosts({"node01", "node02", "node03", "node04", "node07"}));
  EXPECT_EQ(*ExpandSlurmNodeList("gpu[8-10]"), Hosts({"gpu8", "gpu9", "gpu10"}));
  EXPECT_EQ(*ExpandSlurmNodeList("a[1-2],b3,c[009-010]"),
            Hosts({"a1", "a2", "b3", "c009", "c010"}));
  EXPECT_EQ(*ExpandSlurmNodeList("rack[1-2]-n[1-2]"),
            Hosts({"rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"}));
  EXPECT_EQ(*ExpandSlurmNodeList("10.0.0.[1-2]"), Hosts({"10.0.0.1", "10.0.0.2"}));
}

TEST(SlurmNodeListTest, RefusesMalformedLists) {
  for (const char* bad : {"", "node[01-", "node]1[", "node[4-2]", "node[a-b]", "n[1-2", "a,,b",
                          "node[]", "n[0-99999999]"}) {
    auto hosts = ExpandSlurmNodeList(bad);
    EXPECT_FALSE(hosts.ok()) << bad;
    if (!hosts.ok()) {
      EXPECT_NE(std::string(hosts.status().message()).find("SLURM_JOB_NODELIST"),
                std::string::npos);
    }
  }
}

EnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(ApplySlurmTest, TakesRankCountAndMasterInsideAnAllocation) {
  Options options;
  options.local_worker_num = 4;
  auto said = ApplySlurm(options, {"local_worker_num"},
                         Env({{"SLURM_JOB_ID", "7"},
                              {"SLURM_NODEID", "2"},
                              {"SLURM_JOB_NUM_NODES", "3"},
                              {"SLURM_JOB_NODELIST", "n[3-5]"}}));
  ASSERT_TRUE(said.ok());
  EXPECT_EQ(options.node_rank, 2);
  EXPECT_EQ(options.worker_num, 12);
  EXPECT_EQ(options.master_addr, "n3");
  EXPECT_EQ(options.run_id, "slurm-7");
  EXPECT_EQ(options.master_port, 20000 + 7 * 16);
  EXPECT_EQ(said->taken,
            "Slurm job 7: run id slurm-7, node rank 2, master n3, port 20112, 3 node(s) x 4 = "
            "12 workers");
  EXPECT_TRUE(said->warnings.empty());
}

TEST(ApplySlurmTest, InsideAStepTheStepsVariablesWinAndEachTaskIsALauncher) {
  // srun -N1 -n2 inside a two-node allocation: the step has one node and two tasks.
  Options options;
  options.local_worker_num = 2;
  auto said = ApplySlurm(options, {"local_worker_num"},
                         Env({{"SLURM_JOB_ID", "40"},
                              {"SLURM_STEP_ID", "3"},
                              {"SLURM_NODEID", "0"},
                              {"SLURM_PROCID", "1"},
                              {"SLURM_LOCALID", "1"},
                              {"SLURM_JOB_NUM_NODES", "2"},
                              {"SLURM_JOB_NODELIST", "n[1-2]"},
                              {"SLURM_STEP_NUM_NODES", "1"},
                              {"SLURM_STEP_NUM_TASKS", "2"},
                              {"SLURM_STEP_NODELIST", "n2"}}));
  ASSERT_TRUE(said.ok()) << said.status();
  EXPECT_EQ(options.run_id, "slurm-40.3");
  EXPECT_EQ(options.node_rank, 1);
  EXPECT_EQ(options.master_addr, "n2");
  EXPECT_EQ(options.worker_num, 4);
  EXPECT_EQ(options.master_port, 20000 + 40 * 16 + 3);
  EXPECT_EQ(said->taken,
            "Slurm step 40.3: run id slurm-40.3, node rank 1, master n2, port 20643, 2 task(s) "
            "x 2 = 4 workers");
  ASSERT_EQ(said->warnings.size(), 1u);
  EXPECT_NE(said->warnings[0].find("SLURM_LOCALID 1"), std::string::npos) << said->warnings[0];
}

TEST(ApplySlurmTest, TwoJobsOrTwoStepsNeverShareARunId) {
  auto run_id = [](const std::string& job, const std::string& step) {
    Options options;
    std::map<std::string, std::string> vars = {{"SLURM_JOB_ID", job}};
    if (!step.empty()) vars["SLURM_STEP_ID"] = step;
    EXPECT_TRUE(ApplySlurm(options, {}, Env(vars)).ok());
    return options.run_id;
  };
  EXPECT_NE(run_id("39", "0"), run_id("40", "0"));
  EXPECT_NE(run_id("39", "0"), run_id("39", "1"));
  Options explicit_id;
  explicit_id.run_id = "mine";
  ASSERT_TRUE(ApplySlurm(explicit_id, {"run_id"}, Env({{"SLURM_JOB_ID", "39"}})).ok());
  EXPECT_EQ(explicit_id.run_id, "mine");
}

TEST(ApplySlurmTest, ExplicitOptionsWinAndNothingHappensOutsideSlurm) {
  Options options;
  options.node_rank = 0;
  options.worker_num = 5;
  options.master_addr = "head";
  auto said =
      ApplySlurm(options, {"node_rank", "worker_num", "master_addr", "run_id", "master_port"},
                 Env({{"SLURM_JOB_ID", "7"},
                      {"SLURM_NODEID", "1"},
                      {"SLURM_NNODES", "2"},
                      {"SLURM_NODELIST", "x,y"}}));
  ASSERT_TRUE(said.ok());
  EXPECT_EQ(said->taken, "");
  EXPECT_EQ(options.node_rank, 0);
  EXPECT_EQ(options.worker_num, 5);
  EXPECT_EQ(options.master_addr, "head");

  Options untouched;
  EXPECT_EQ(ApplySlurm(untouched, {}, Env({{"SLURM_NODEID", "1"}}))->taken, "");
  EXPECT_EQ(untouched.node_rank, -1);
}

TEST(ApplySlurmTest, BadVariablesAreOneClearError) {
  Options options;
  auto bad_id = ApplySlurm(options, {}, Env({{"SLURM_JOB_ID", "7"}, {"SLURM_NODEID", "x"}}));
  ASSERT_FALSE(bad_id.ok());
  EXPECT_NE(std::string(bad_id.status().message()).find("SLURM_NODEID 'x'"), std::string::npos);
  auto bad_count =
      ApplySlurm(options, {}, Env({{"SLURM_JOB_ID", "7"}, {"SLURM_JOB_NUM_NODES", "0"}}));
  EXPECT_FALSE(bad_count.ok());
}

}  // namespace
}  // namespace gangrun::launcher
