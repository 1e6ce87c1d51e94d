#include "launcher/worker_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

namespace gangrun::launcher {
namespace {

std::map<std::string, std::string> EnvMap(const std::vector<std::string>& env) {
  std::map<std::string, std::string> out;
  for (const auto& e : env) out[e.substr(0, e.find('='))] = e.substr(e.find('=') + 1);
  return out;
}

class WorkerPlanTest : public ::testing::Test {
 protected:
  WorkerPlanTest() {
    options.worker_num = 4;
    options.local_worker_num = 2;
    options.max_restarts = 3;
    facts.hostname = "node7";
    facts.local_ip = "10.0.0.7";
    facts.master_ip = "10.0.0.1";
    facts.scheduler_host = "10.0.0.1";
    facts.scheduler_port = 8118;
    facts.run_id = "run42";
    facts.log_dir = "logs";
    facts.base_env = {"PATH=/usr/bin", "RANK=stale", "HOME=/root"};
    facts.task = {"/usr/bin/python3", {"python", "train.py", "--lr", "1"}};
    assignment.set_node_rank(1);
    assignment.set_node_count(2);
    assignment.set_first_rank(2);
    assignment.set_local_worker_num(2);
    assignment.set_world_size(4);
    assignment.set_master_addr("10.0.0.1");
    assignment.set_master_port(40001);
  }
  Options options;
  HostFacts facts;
  v1::RankAssignment assignment;
};

TEST_F(WorkerPlanTest, TorchrunsWorkersGetTorchsAndGangrunsVariablesButNotMindSpores) {
  options.personality = Personality::kTorchrun;
  auto plan = PlanProcesses(options, facts, assignment, 1, 0);
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->size(), 2u);
  auto env = EnvMap((*plan)[1].env);
  for (const char* mindspore :
       {"MS_ROLE", "MS_SCHED_HOST", "MS_SCHED_PORT", "MS_WORKER_NUM", "MS_TOPO_TIMEOUT",
        "MS_NODE_ID", "RANK_ID", "RANK_SIZE", "DEVICE_ID"}) {
    EXPECT_EQ(env.count(mindspore), 0u) << mindspore;
  }
  EXPECT_EQ(env["RANK"], "3");
  EXPECT_EQ(env["LOCAL_RANK"], "1");
  EXPECT_EQ(env["GANGRUN_RUN_ID"], "run42");
}

TEST_F(WorkerPlanTest, WithTheJobsTorchStoreTorchConnectsWhereTheSchedulerListens) {
  options.personality = Personality::kTorchrun;
  facts.scheduler_host = "10.0.0.9";  // not the rank-0 host's address
  assignment.set_torch_store_port(40123);
  auto plan = PlanProcesses(options, facts, assignment, 2, 1);
  ASSERT_TRUE(plan.ok());
  auto env = EnvMap((*plan)[0].env);
  EXPECT_EQ(env["MASTER_ADDR"], "10.0.0.9");
  EXPECT_EQ(env["MASTER_PORT"], "40123");
  EXPECT_EQ(env["TORCHELASTIC_USE_AGENT_STORE"], "True");
  EXPECT_EQ(env["TORCHELASTIC_RESTART_COUNT"], "1");  // torch's key prefix: /worker/attempt_1
}

TEST_F(WorkerPlanTest, EveryWorkerGetsMsrunTorchrunAndGangrunVariables) {
  auto plan = PlanProcesses(options, facts, assignment, 1, 0);
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->size(), 2u);
  auto env = EnvMap((*plan)[1].env);
  EXPECT_EQ(env["MS_ROLE"], "MS_WORKER");
  EXPECT_EQ(env["MS_SCHED_HOST"], "10.0.0.1");
  EXPECT_EQ(env["MS_SCHED_PORT"], "8118");
  EXPECT_EQ(env["MS_WORKER_NUM"], "4");
  EXPECT_EQ(env["MS_TOPO_TIMEOUT"], "600");
  EXPECT_EQ(env["MS_NODE_ID"], "3");
  EXPECT_EQ(env["RANK_ID"], "3");
  EXPECT_EQ(env["RANK_SIZE"], "4");
  EXPECT_EQ(env["DEVICE_ID"], "1");
  EXPECT_EQ(env["RANK"], "3");
  EXPECT_EQ(env["LOCAL_RANK"], "1");
  EXPECT_EQ(env["WORLD_SIZE"], "4");
  EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "2");
  EXPECT_EQ(env["GROUP_RANK"], "1");
  EXPECT_EQ(env["GROUP_WORLD_SIZE"], "2");
  EXPECT_EQ(env["MASTER_ADDR"], "10.0.0.1");
  EXPECT_EQ(env["MASTER_PORT"], "40001");
  EXPECT_EQ(env["TORCHELASTIC_RESTART_COUNT"], "0");
  EXPECT_EQ(env["TORCHELASTIC_MAX_RESTARTS"], "3");
  EXPECT_EQ(env["TORCHELASTIC_RUN_ID"], "run42");
  EXPECT_EQ(env["TORCHELASTIC_USE_AGENT_STORE"], "False");
  EXPECT_EQ(env["ROLE_NAME"], "default");
  EXPECT_EQ(env["ROLE_RANK"], "3");
  EXPECT_EQ(env["ROLE_WORLD_SIZE"], "4");
  EXPECT_EQ(env.count("OMP_NUM_THREADS"), 0u);  // only torchrun's rule sets it
  EXPECT_EQ(env["GANGRUN_SCHEDULER"], "10.0.0.1:8118");
  EXPECT_EQ(env["GANGRUN_RUN_ID"], "run42");
  EXPECT_EQ(env["GANGRUN_GENERATION"], "1");
  EXPECT_EQ(env["HOME"], "/root");  // inherited
  EXPECT_EQ(env.count("RANK_TABLE_FILE"), 0u);
  EXPECT_EQ(env.count("MS_SIMULATION_LEVEL"), 0u);
  EXPECT_EQ(env.count("MSRUN_CPU_LIST"), 0u);
  EXPECT_EQ(env.count("GANGRUN_TOKEN"), 0u);
  EXPECT_EQ((*plan)[1].argv, (std::vector<std::string>{"python", "train.py", "--lr", "1"}));
  EXPECT_EQ((*plan)[1].log_path, "logs/worker_3.log");
}

// An inherited variable is replaced where it stood; every name appears once; of a variable
// set twice (the launcher's RANK and a worker_env RANK) the launcher's wins.
TEST_F(WorkerPlanTest, TheEnvironmentKeepsItsOrderAndNamesEveryVariableOnce) {
  options.worker_env = {{"RANK", "from-worker-env"}, {"ZZ_NEW", "1"}, {"ZZ_NEW", "2"}};
  auto plan = PlanProcesses(options, facts, assignment, 1, 0);
  ASSERT_TRUE(plan.ok());
  const std::vector<std::string>& env = (*plan)[0].env;
  ASSERT_GE(env.size(), 3u);
  EXPECT_EQ(env[0], "PATH=/usr/bin");
  EXPECT_EQ(env[1], "RANK=2");
  EXPECT_EQ(env[2], "HOME=/root");
  std::set<std::string> names;
  for (const auto& entry : env) {
    EXPECT_TRUE(names.insert(entry.substr(0, entry.find('='))).second) << entry;
  }
  EXPECT_EQ(EnvMap(env)["ZZ_NEW"], "1");
}

// An inherited name given twice: the launch's value stands where the first stood, the second
// is gone; a name the launch does not set is passed on as it came, twice.
TEST_F(WorkerPlanTest, AnInheritedNameGivenTwiceIsReplacedOnce) {
  facts.base_env = {"PATH=/usr/bin", "RANK=stale", "X=1", "RANK=stale2", "X=2"};
  auto plan = PlanProcesses(options, facts, assignment, 1, 0);
  ASSERT_TRUE(plan.ok());
  const std::vector<std::string>& env = (*plan)[1].env;
  ASSERT_GE(env.size(), 4u);
  EXPECT_EQ(std::vector<std::string>(env.begin(), env.begin() + 4),
            (std::vector<std::string>{"PATH=/usr/bin", "RANK=3", "X=1", "X=2"}));
  EXPECT_EQ(std::count_if(env.begin(), env.end(),
                          [](const std::string& e) { return e.rfind("RANK=", 0) == 0; }),
            1);
}

TEST_F(WorkerPlanTest, TorchrunsRoleAndVariablesReachEveryWorker) {
  options.role = "trainer";
  options.worker_env = {{"OMP_NUM_THREADS", "1"}, {"NCCL_ASYNC_ERROR_HANDLING", "1"}};
  auto plan = PlanProcesses(options, facts, assignment, 1, 0);
  ASSERT_TRUE(plan.ok());
  for (const auto& spec : *plan) {
    auto env = EnvMap(spec.env);
    EXPECT_EQ(env["ROLE_NAME"], "trainer");
    EXPECT_EQ(env["OMP_NUM_THREADS"], "1");
    EXPECT_EQ(env["NCCL_ASYNC_ERROR_HANDLING"], "1");
  }
}

TEST_F(WorkerPlanTest, AVirtualLocalRankSeesItsOwnGpuAsDeviceZero) {
  options.virtual_local_rank = true;
  auto plan = PlanProcesses(options, facts, assignment, 1, 0);
  ASSERT_TRUE(plan.ok());
  for (int i = 0; i < 2; ++i) {
    auto env = EnvMap((*plan)[i].env);
    EXPECT_EQ(env["LOCAL_RANK"], "0");
    EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], std::to_string(i));  // none inherited: the index
    EXPECT_EQ(env["RANK"], std::to_string(2 + i));
  }
  facts.base_env.push_back("CUDA_VISIBLE_DEVICES=GPU-aa, 5");
  plan = PlanProcesses(options, facts, assignment, 1, 0);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(EnvMap((*plan)[0].env)["CUDA_VISIBLE_DEVICES"], "GPU-aa");
  EXPECT_EQ(EnvMap((*plan)[1].env)["CUDA_VISIBLE_DEVICES"], "5");
}

TEST_F(WorkerPlanTest, InheritedVariablesAreReplacedNotDuplicated) {
  auto plan = PlanProcesses(options, facts, assignment, 1, 0);
  int count = 0;
  for (const auto& e : (*plan)[0].env) count += e.rfind("RANK=", 0) == 0;
  EXPECT_EQ(count, 1);
}

TEST_F(WorkerPlanTest, OptionalVariablesAppearWhenAskedFor) {
  options.rank_table_file = "/etc/rank_table.json";
  options.bind_core = {BindCore::Mode::kAuto, {}};
  facts.cpu_count = 4;
  facts.token = "s3cret";
  auto env = EnvMap((*PlanProcesses(options, facts, assignment, 1, 0))[1].env);
  EXPECT_EQ(env["RANK_TABLE_FILE"], "/etc/rank_table.json");
  EXPECT_EQ(env["MSRUN_CPU_LIST"], "[2, 3]");
  EXPECT_EQ(env["GANGRUN_TOKEN"], "s3cret");
}

TEST_F(WorkerPlanTest, LogNameSubstitutesIpAndHostname) {
  options.worker_log_name = "w_{hostname}_{ip}";
  EXPECT_EQ(WorkerLogPath(options, facts, 5), "logs/w_node7_10.0.0.7_5.log");
  facts.log_dir = "";
  EXPECT_EQ(WorkerLogPath(options, facts, 5), "w_node7_10.0.0.7_5.log");
}

TEST_F(WorkerPlanTest, MsrunMasterAlsoRunsTheMindSporeScheduler) {
  options.personality = Personality::kMsrun;
  auto plan = PlanProcesses(options, facts, assignment, 1, 0);
  ASSERT_EQ(plan->size(), 3u);
  const auto& sched = (*plan)[0];
  EXPECT_EQ(sched.rank, -1);
  EXPECT_EQ(sched.log_path, "logs/scheduler.log");
  auto env = EnvMap(sched.env);
  EXPECT_EQ(env["MS_ROLE"], "MS_SCHED");
  EXPECT_EQ(env["RANK_ID"], "0");
  EXPECT_EQ(env["MS_SCHED_PORT"], "8118");
  facts.is_master = false;
  EXPECT_EQ(PlanProcesses(options, facts, assignment, 1, 0)->size(), 2u);
}

TEST_F(WorkerPlanTest, GangrunPersonalityHasNoMindSporeScheduler) {
  EXPECT_EQ(PlanProcesses(options, facts, assignment, 1, 0)->front().rank, 2);
}

TEST_F(WorkerPlanTest, SimulationDropsNetworkingVariables) {
  options.sim_level = 1;
  options.sim_rank_id = 6;
  options.personality = Personality::kMsrun;
  auto plan = PlanProcesses(options, facts, assignment, 1, 0);
  ASSERT_EQ(plan->size(), 2u);  // no scheduler process while simulating
  auto env = EnvMap((*plan)[0].env);
  EXPECT_EQ(env["MS_SIMULATION_LEVEL"], "1");
  EXPECT_EQ(env["RANK_ID"], "6");
  EXPECT_EQ(env.count("MS_SCHED_HOST"), 0u);
  EXPECT_EQ(env.count("MS_ROLE"), 0u);
  EXPECT_EQ(env.count("MS_TOPO_TIMEOUT"), 0u);
}

TEST(MsrunRulesTest, SimRankFallsBackToRankIdAndMeansOneProcess) {
  Options o;
  o.sim_level = 0;
  o.local_worker_num = 8;
  ApplyMsrunRules(o, [](const std::string& name) -> std::optional<std::string> {
    if (name == "RANK_ID") return "5";
    return std::nullopt;
  });
  EXPECT_EQ(o.sim_rank_id, 5);
  EXPECT_EQ(o.local_worker_num, 1);
}

TEST(MsrunRulesTest, MoreThan128LocalProcessesAreCapped) {
  Options o;
  o.sim_level = 0;
  o.worker_num = 512;
  o.local_worker_num = 256;
  auto warnings = ApplyMsrunRules(o, [](const std::string&) { return std::nullopt; });
  EXPECT_EQ(o.local_worker_num, 1);
  EXPECT_EQ(o.sim_rank_id, 0);
  EXPECT_EQ(warnings.size(), 1u);
}

TEST(MsrunRulesTest, SingleNodeJobIgnoresNodeRank) {
  Options o;
  o.worker_num = 4;
  o.local_worker_num = 4;
  o.node_rank = 2;
  auto warnings = ApplyMsrunRules(o, [](const std::string&) { return std::nullopt; });
  EXPECT_EQ(o.node_rank, -1);
  EXPECT_EQ(warnings.size(), 1u);
}

TEST(JoinHostPortTest, BracketsIpv6) {
  EXPECT_EQ(JoinHostPort("::1", 80), "[::1]:80");
  EXPECT_EQ(JoinHostPort("10.0.0.1", 80), "10.0.0.1:80");
}

}  // namespace
}  // namespace gangrun::launcher
