// A bad or mismatched launcher is refused alone (exit 3, naming why) and the job forms with
// the right ones; a hostile peer's join with absurd numbers changes nothing.

#include <grpcpp/grpcpp.h>

#include "common/net.h"
#include "gangrun/v1/session.grpc.pb.h"
#include "tests/integration/launcher_fixture.h"
#include "tests/testing/session_client.h"

namespace gangrun::testing {
namespace {

using std::chrono::seconds;

class RefusedNodesTest : public LauncherTest {
 protected:
  RefusedNodesTest() : port_(FreePort()) {}

  Launched Node(const std::vector<std::string>& extra,
                const std::vector<std::string>& worker = {"--env", "ENV"}) {
    std::vector<std::string> args = {"--master_port",      port_, "--heartbeat_interval", "0.2",
                                     "--cluster_time_out", "30"};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<std::string> worker_args = worker;
    for (auto& arg : worker_args) {
      if (arg == "ENV") arg = dir_.File("env");
    }
    return Start(args, worker_args);
  }
  // Starts the launcher that will host the scheduler, and waits until it listens.
  Launched Master(const std::vector<std::string>& extra) {
    auto master = Node(extra);
    EXPECT_TRUE(WaitForStderr(master, "waiting for", seconds(20))) << master.Stderr();
    return master;
  }
  std::string Var(int rank, const std::string& name) {
    std::string env = "\n" + ReadFile(dir_.File("env." + std::to_string(rank)));
    size_t at = env.find("\n" + name + "=");
    if (at == std::string::npos) return "";
    at += name.size() + 2;
    return env.substr(at, env.find('\n', at) - at);
  }

  std::string port_;
};

TEST_F(RefusedNodesTest, OutOfRangeNodeRankIsRefusedAloneAndTheJobForms) {
  auto a = Master({"--worker_num", "4", "--local_worker_num", "2", "--node_rank", "0"});
  // Valid on its own (4 workers could be 4 nodes), but this job has 2 nodes of 2.
  auto bad = Node({"--worker_num", "4", "--local_worker_num", "2", "--node_rank", "2"});
  EXPECT_EQ(RunToEnd(bad).code, 3) << bad.Stderr();
  EXPECT_NE(bad.Stderr().find("node rank 2 of node"), std::string::npos) << bad.Stderr();
  EXPECT_NE(bad.Stderr().find("is out of range"), std::string::npos) << bad.Stderr();
  auto b = Node({"--worker_num", "4", "--local_worker_num", "2", "--node_rank", "1"});
  EXPECT_EQ(RunToEnd(a).code, 0) << a.Stderr();
  EXPECT_EQ(RunToEnd(b).code, 0) << b.Stderr();
}

TEST_F(RefusedNodesTest, LauncherWithAnotherWorkerNumOrRunIdIsRefusedAlone) {
  auto a = Master({"--worker_num", "2", "--local_worker_num", "1", "--run_id", "job-a"});
  auto other_size = Node({"--worker_num", "3", "--local_worker_num", "1", "--run_id", "job-a"});
  EXPECT_EQ(RunToEnd(other_size).code, 3) << other_size.Stderr();
  EXPECT_NE(other_size.Stderr().find("was started with --worker_num 3, but the job has "
                                     "--worker_num 2"),
            std::string::npos)
      << other_size.Stderr();
  auto other_run = Node({"--worker_num", "2", "--local_worker_num", "1", "--run_id", "job-b"});
  EXPECT_EQ(RunToEnd(other_run).code, 3) << other_run.Stderr();
  EXPECT_NE(other_run.Stderr().find("--run_id 'job-b', but the job's run id is 'job-a'"),
            std::string::npos)
      << other_run.Stderr();
  auto b = Node({"--worker_num", "2", "--local_worker_num", "1"});
  EXPECT_EQ(RunToEnd(a).code, 0) << a.Stderr();
  EXPECT_EQ(RunToEnd(b).code, 0) << b.Stderr();
}

TEST_F(RefusedNodesTest, EveryRankSeesTheSameRunIdWithoutOneGiven) {
  auto a = Master({"--worker_num", "2", "--local_worker_num", "1"});
  auto b = Node({"--worker_num", "2", "--local_worker_num", "1"});
  EXPECT_EQ(RunToEnd(a).code, 0) << a.Stderr();
  EXPECT_EQ(RunToEnd(b).code, 0) << b.Stderr();
  EXPECT_FALSE(Var(0, "TORCHELASTIC_RUN_ID").empty());
  EXPECT_EQ(Var(0, "TORCHELASTIC_RUN_ID"), Var(1, "TORCHELASTIC_RUN_ID"));
  EXPECT_EQ(Var(0, "GANGRUN_RUN_ID"), Var(1, "GANGRUN_RUN_ID"));
}

TEST_F(RefusedNodesTest, HostileJoinWithAbsurdNumbersIsRefusedAndHurtsNobody) {
  auto a = Master({"--worker_num", "2", "--local_worker_num", "1"});
  ASSERT_TRUE(WaitForStderr(a, "waiting for 1 of 2", std::chrono::seconds(20))) << a.Stderr();
  for (int32_t workers : {INT32_MAX, -1, 0}) {
    SessionClient client(std::stoi(port_));
    ASSERT_TRUE(client.Open("").accepted);
    v1::NodeEvent event;
    auto* join = event.mutable_join();
    join->set_node_name("intruder");
    join->set_host_address("127.0.0.1");
    join->set_node_rank(INT32_MAX);
    join->set_local_worker_num(workers);
    join->set_free_port(-3);
    ASSERT_TRUE(client.SendEvent(event));
    auto command = client.ReadCommand();
    ASSERT_TRUE(command.has_value());
    EXPECT_TRUE(command->has_rejected()) << command->DebugString();
    EXPECT_NE(command->rejected().reason().find("node 'intruder'"), std::string::npos);
  }
  auto b = Node({"--worker_num", "2", "--local_worker_num", "1"});
  EXPECT_EQ(RunToEnd(a).code, 0) << a.Stderr();
  EXPECT_EQ(RunToEnd(b).code, 0) << b.Stderr();
}

}  // namespace
}  // namespace gangrun::testing
