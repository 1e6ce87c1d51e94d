// Several launchers on 127.0.0.1 forming one job, as several hosts would.

#include <fstream>
#include <set>

#include "common/net.h"
#include "tests/integration/launcher_fixture.h"

namespace gangrun::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class ClusterTest : public LauncherTest {
 protected:
  ClusterTest() : port_(FreePort()) {}

  // A launcher that is one node of a `world`-worker job with `local` workers here.
  Launched Node(int world, int local, std::vector<std::string> extra,
                const std::vector<std::string>& worker_args) {
    std::vector<std::string> args = {"--local_worker_num",   std::to_string(local),
                                     "--master_port",        port_,
                                     "--heartbeat_interval", "0.2"};
    if (world > 0) args.insert(args.end(), {"--worker_num", std::to_string(world)});
    args.insert(args.end(), extra.begin(), extra.end());
    return Start(args, worker_args);
  }

  // Of two launchers of one job, the one hosting the scheduler (the first to bind its port)
  // and the one that joined it as a node.
  struct Roles {
    const Launched& master;
    const Launched& node;
    bool b_is_node;
  };
  static Roles RolesOf(const Launched& a, const Launched& b) {
    bool b_joined = b.Stderr().find("joining the scheduler") != std::string::npos;
    return b_joined ? Roles{a, b, true} : Roles{b, a, false};
  }

  std::string Env(int rank) { return ReadFile(dir_.File("env." + std::to_string(rank))); }
  static std::string Var(const std::string& env, const std::string& name) {
    size_t at = env.find("\n" + name + "=");
    if (at == std::string::npos) return "";
    at += name.size() + 2;
    return env.substr(at, env.find('\n', at) - at);
  }

  std::string port_;
};

TEST_F(ClusterTest, TwoLaunchersFormOneJobWithExplicitNodeRanks) {
  auto second = Node(4, 2, {"--node_rank", "1"}, {"--env", dir_.File("env")});
  auto first = Node(4, 2, {"--node_rank", "0"}, {"--env", dir_.File("env")});
  EXPECT_EQ(RunToEnd(first).code, 0) << first.Stderr();
  EXPECT_EQ(RunToEnd(second).code, 0) << second.Stderr();
  for (int rank = 0; rank < 4; ++rank) {
    std::string env = Env(rank);
    EXPECT_EQ(Var(env, "RANK"), std::to_string(rank));
    EXPECT_EQ(Var(env, "WORLD_SIZE"), "4");
    EXPECT_EQ(Var(env, "GROUP_RANK"), std::to_string(rank / 2));
    EXPECT_EQ(Var(env, "GROUP_WORLD_SIZE"), "2");
    EXPECT_EQ(Var(env, "LOCAL_RANK"), std::to_string(rank % 2));
    EXPECT_EQ(Var(env, "MS_NODE_ID"), std::to_string(rank));
    // One MASTER_PORT for the whole job, reserved on the rank-0 node.
    EXPECT_EQ(Var(env, "MASTER_PORT"), Var(Env(0), "MASTER_PORT"));
  }
}

TEST_F(ClusterTest, AutomaticNodeRanksGiveEveryWorkerItsFinalRankAtStart) {
  auto a = Node(4, 2, {}, {"--env", dir_.File("env")});
  auto b = Node(4, 2, {}, {"--env", dir_.File("env")});
  EXPECT_EQ(RunToEnd(a).code, 0) << a.Stderr();
  EXPECT_EQ(RunToEnd(b).code, 0) << b.Stderr();
  std::set<std::string> groups;
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(Var(Env(rank), "RANK_ID"), std::to_string(rank));
    groups.insert(Var(Env(rank), "GROUP_RANK"));
  }
  EXPECT_EQ(groups, (std::set<std::string>{"0", "1"}));
}

TEST_F(ClusterTest, NodesMayHaveDifferentWorkerCounts) {
  auto a = Node(3, 2, {"--node_rank", "0"}, {"--env", dir_.File("env")});
  auto b = Node(3, 1, {"--node_rank", "1"}, {"--env", dir_.File("env")});
  EXPECT_EQ(RunToEnd(a).code, 0) << a.Stderr();
  EXPECT_EQ(RunToEnd(b).code, 0) << b.Stderr();
  EXPECT_EQ(Var(Env(2), "GROUP_RANK"), "1");
  EXPECT_EQ(Var(Env(2), "LOCAL_RANK"), "0");
  EXPECT_EQ(Var(Env(2), "LOCAL_WORLD_SIZE"), "1");
}

TEST_F(ClusterTest, FailureOnOneNodeStopsEveryNode) {
  auto a = Node(4, 2, {"--node_rank", "0"}, {"--fail-rank", "3", "--exit", "5"});
  auto b = Node(4, 2, {"--node_rank", "1"}, {"--fail-rank", "3", "--exit", "5"});
  EXPECT_EQ(RunToEnd(a).code, 5) << a.Stderr();
  EXPECT_EQ(RunToEnd(b).code, 5) << b.Stderr();
  EXPECT_NE(a.Stderr().find("Root cause: rank 3"), std::string::npos) << a.Stderr();
}

// A remote rank whose last lines are not UTF-8 fails as a rank, not as a lost node: its log
// tail travels as text (U+FFFD for what is not), where the bytes made the scheduler refuse the
// whole event and drop the node's session.
TEST_F(ClusterTest, ARemoteRankWhoseLastLinesAreNotUtf8IsTheRootCauseNotALostNode) {
  const std::string script =
      "if [ \"$RANK\" = 3 ]; then printf 'bad \\377\\376 bytes\\n'; exit 5; fi; exec sleep 60";
  auto launch = [&](const std::string& node_rank) {
    return Launch(
        {GangrunBinary(), "--worker_num", "4", "--local_worker_num", "2", "--master_port", port_,
         "--node_rank", node_rank, "--heartbeat_interval", "0.2", "sh", "-c", script},
        {}, dir_.path(), dir_.path());
  };
  auto master = launch("0");
  // The first launcher hosts the scheduler, so that rank 3's exit crosses the network.
  ASSERT_TRUE(WaitForStderr(master, "waiting for", milliseconds(20000))) << master.Stderr();
  auto node = launch("1");
  EXPECT_EQ(RunToEnd(master).code, 5) << master.Stderr();
  EXPECT_EQ(RunToEnd(node).code, 5) << node.Stderr();
  EXPECT_NE(master.Stderr().find("Root cause: rank 3"), std::string::npos) << master.Stderr();
  EXPECT_NE(master.Stderr().find("bad \xEF\xBF\xBD\xEF\xBF\xBD bytes"), std::string::npos)
      << master.Stderr();
  EXPECT_EQ(master.Stderr().find("lost node"), std::string::npos) << master.Stderr();
}

TEST_F(ClusterTest, KillingOneLauncherStopsTheJobEverywhere) {
  auto a = Node(4, 2, {"--node_rank", "0"}, {"--hang"});
  auto b = Node(4, 2, {"--node_rank", "1"}, {"--hang"});
  auto ready = WaitReady(4);
  kill(b.pid, SIGKILL);
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(RunToEnd(a).code, 4) << a.Stderr();
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(5));
  EXPECT_NE(a.Stderr().find("was lost"), std::string::npos) << a.Stderr();
  RunToEnd(b);
  for (const auto& r : ready) EXPECT_TRUE(WaitGone(r.pid, milliseconds(1000))) << r.rank;
}

TEST_F(ClusterTest, KillingTheSchedulersLauncherStopsTheOtherNodes) {
  auto a = Node(4, 2, {"--node_rank", "0"}, {"--hang"});
  auto b = Node(4, 2, {"--node_rank", "1"}, {"--hang"});
  auto ready = WaitReady(4);
  auto [master, other, b_is_node] = RolesOf(a, b);
  kill(master.pid, SIGKILL);
  EXPECT_EQ(RunToEnd(other).code, 4) << other.Stderr();
  EXPECT_NE(other.Stderr().find("lost the scheduler"), std::string::npos) << other.Stderr();
  RunToEnd(master);
  for (const auto& r : ready) EXPECT_TRUE(WaitGone(r.pid, milliseconds(1000))) << r.rank;
}

TEST_F(ClusterTest, ALostNodeStartedAgainRejoinsWithinTheBudget) {
  // Generation 1 hangs (bystanders of a rank that never fails); generation 2 exits 0.
  std::vector<std::string> worker = {"--fail-rank", "99", "--only-generation", "1"};
  auto a = Node(2, 1, {"--node_rank", "0", "--max_restarts", "1"}, worker);
  auto b = Node(2, 1, {"--node_rank", "1", "--max_restarts", "1"}, worker);
  auto ready = WaitReady(2);
  auto [master, lost, b_is_node] = RolesOf(a, b);
  const std::string lost_rank = b_is_node ? "1" : "0";
  kill(lost.pid, SIGKILL);
  RunToEnd(lost);
  auto again = Node(2, 1, {"--node_rank", lost_rank, "--max_restarts", "1"}, worker);
  EXPECT_EQ(RunToEnd(master).code, 0) << master.Stderr();
  EXPECT_EQ(RunToEnd(again).code, 0) << again.Stderr();
  EXPECT_NE(master.Stderr().find("waiting for a node to take its place"), std::string::npos)
      << master.Stderr();
  EXPECT_NE(master.Stderr().find("generation 2"), std::string::npos);
  for (const auto& r : ready) EXPECT_TRUE(WaitGone(r.pid, seconds(5)));
}

// Elastic jobs: generation 1 hangs, later generations exit 0 at once.
const std::vector<std::string> kHangInFirstGeneration = {"--fail-rank", "99", "--only-generation",
                                                         "1"};

TEST_F(ClusterTest, ElasticJobGrowsFromMinToMaxWhenANodeJoins) {
  auto worker = kHangInFirstGeneration;
  worker.insert(worker.end(), {"--env", dir_.File("env")});
  auto a = Node(0, 2, {"--worker_num", "2:4", "--last_call", "0.1"}, worker);
  WaitReady(2);  // generation 1 runs with 2 workers
  auto b = Node(0, 2, {"--worker_num", "2:4", "--last_call", "0.1"}, worker);
  EXPECT_EQ(RunToEnd(a).code, 0) << a.Stderr();
  EXPECT_EQ(RunToEnd(b).code, 0) << b.Stderr();
  EXPECT_NE(a.Stderr().find("the job re-forms with 4 workers"), std::string::npos) << a.Stderr();
  for (int rank = 0; rank < 4; ++rank) {
    std::string env = Env(rank);
    EXPECT_EQ(Var(env, "WORLD_SIZE"), "4") << rank;
    EXPECT_EQ(Var(env, "GANGRUN_GENERATION"), "2") << rank;
    EXPECT_EQ(Var(env, "TORCHELASTIC_RESTART_COUNT"), "0") << rank;
  }
}

TEST_F(ClusterTest, ElasticJobShrinksWhenANodeIsLost) {
  auto worker = kHangInFirstGeneration;
  worker.insert(worker.end(), {"--env", dir_.File("env")});
  auto a = Node(0, 2, {"--worker_num", "2:4", "--node_rank", "0"}, worker);
  auto b = Node(0, 2, {"--worker_num", "2:4", "--node_rank", "1"}, worker);
  auto ready = WaitReady(4);
  auto [master, lost, b_is_node] = RolesOf(a, b);
  kill(lost.pid, SIGKILL);
  RunToEnd(lost);
  EXPECT_EQ(RunToEnd(master).code, 0) << master.Stderr();
  EXPECT_NE(master.Stderr().find("the job re-forms with 2 workers"), std::string::npos)
      << master.Stderr();
  EXPECT_EQ(Var(Env(0), "WORLD_SIZE"), "2");
  // The lost node's workers go with its keeper, which notices its launcher's death on its own.
  for (const auto& r : ready) EXPECT_TRUE(WaitGone(r.pid, seconds(5)));
}

TEST_F(ClusterTest, ScaleCommandShrinksARunningElasticJob) {
  auto a = Node(0, 2, {"--worker_num", "2:4", "--node_rank", "0"}, kHangInFirstGeneration);
  auto b = Node(0, 2, {"--worker_num", "2:4", "--node_rank", "1"}, kHangInFirstGeneration);
  WaitReady(4);
  auto scale =
      Launch({GangrunBinary(), "scale", "--master", "127.0.0.1:" + port_, "--worker_num", "2"}, {},
             dir_.path(), dir_.path());
  EXPECT_EQ(RunToEnd(scale).code, 0) << scale.Stderr();
  EXPECT_EQ(RunToEnd(a).code, 0) << a.Stderr() << "\nthe other launcher:\n" << b.Stderr();
  EXPECT_EQ(RunToEnd(b).code, 0) << b.Stderr();
  EXPECT_NE((a.Stderr() + b.Stderr()).find("re-forms with 2 workers"), std::string::npos);
  auto refused =
      Launch({GangrunBinary(), "scale", "--master", "127.0.0.1:" + port_, "--worker_num", "0"}, {},
             dir_.path(), dir_.path());
  EXPECT_EQ(RunToEnd(refused).code, 2);
}

TEST_F(ClusterTest, StoppedNodeIsLostAfterTheNodeTimeout) {
  auto a = Node(2, 1, {"--node_rank", "0", "--node_timeout", "1"}, {"--hang"});
  auto b = Node(2, 1, {"--node_rank", "1", "--node_timeout", "1"}, {"--hang"});
  auto ready = WaitReady(2);
  auto [master, stopped, b_is_node] = RolesOf(a, b);
  kill(stopped.pid, SIGSTOP);
  EXPECT_EQ(RunToEnd(master).code, 4) << master.Stderr();
  EXPECT_NE(master.Stderr().find("no heartbeat"), std::string::npos) << master.Stderr();
  kill(stopped.pid, SIGKILL);
  kill(stopped.pid, SIGCONT);
  RunToEnd(stopped);
  for (const auto& r : ready) EXPECT_TRUE(WaitGone(r.pid, milliseconds(1000))) << r.rank;
}

// The remote node's keepalive pings are its heartbeats (scheduler/liveness.h): told so, it
// sends a message only every 2 node timeouts, and a job whose workers run for 4 node timeouts
// without a word still ends well. Without the pings it would be lost after 1 s.
TEST_F(ClusterTest, ARemoteNodeIsHeardOnItsConnectionBetweenRareMessages) {
  auto launch = [&](const std::string& node_rank) {
    return Launch({GangrunBinary(), "--worker_num", "2", "--local_worker_num", "1", "--master_port",
                   port_, "--heartbeat_interval", "0.2", "--node_timeout", "1", "--node_rank",
                   node_rank, TestWorkerBinary(), "--run-ms", "4000"},
                  {"GANGRUN_LOG_LEVEL=debug"}, dir_.path(), dir_.path());
  };
  auto a = launch("0");
  auto b = launch("1");
  EXPECT_EQ(RunToEnd(a).code, 0) << a.Stderr();
  EXPECT_EQ(RunToEnd(b).code, 0) << b.Stderr();
  const std::string err = a.Stderr() + b.Stderr();
  EXPECT_NE(err.find("heartbeat messages every 2000 ms"), std::string::npos) << err;
  EXPECT_EQ(err.find("was lost"), std::string::npos) << err;
  EXPECT_EQ(err.find("connection activity"), std::string::npos) << err;
}

TEST_F(ClusterTest, AStallOfTheMasterHostBlamesTheStallNotItsOwnNode) {
  auto a = Node(2, 1, {"--node_rank", "0", "--node_timeout", "1"}, {"--hang"});
  auto b = Node(2, 1, {"--node_rank", "1", "--node_timeout", "1"}, {"--hang"});
  auto ready = WaitReady(2);
  auto [master, other, b_is_node] = RolesOf(a, b);
  kill(master.pid, SIGSTOP);
  // The other node notices the silent scheduler on its own, and stops its workers.
  EXPECT_EQ(RunToEnd(other).code, 4) << other.Stderr();
  EXPECT_NE(other.Stderr().find("lost the scheduler"), std::string::npos) << other.Stderr();
  kill(master.pid, SIGCONT);
  EXPECT_EQ(RunToEnd(master).code, 4) << master.Stderr();
  const std::string err = master.Stderr();
  EXPECT_NE(err.find("the scheduler did not run for"), std::string::npos) << err;
  EXPECT_EQ(err.find("launcher pid " + std::to_string(master.pid) + ") was lost"),
            std::string::npos)
      << "the master blamed its own node:\n"
      << err;
  for (const auto& r : ready) EXPECT_TRUE(WaitGone(r.pid, milliseconds(2000))) << r.rank;
}

TEST_F(ClusterTest, WrongTokenIsRejected) {
  auto a = Node(2, 1, {"--node_rank", "0", "--token", "right", "--cluster_time_out", "2"}, {});
  // Let the right launcher bind first: wait for its progress line.
  ASSERT_TRUE(WaitForStderr(a, "waiting for 1 of 2 workers", seconds(20))) << a.Stderr();
  auto b = Node(2, 1, {"--node_rank", "1", "--token", "wrong"}, {});
  EXPECT_EQ(RunToEnd(b).code, 3) << b.Stderr();
  EXPECT_NE(b.Stderr().find("token mismatch"), std::string::npos) << b.Stderr();
  EXPECT_EQ(RunToEnd(a).code, 3) << a.Stderr();
  // Each launcher says once that its token is short enough to guess.
  EXPECT_NE(a.Stderr().find("the token has 5 characters"), std::string::npos) << a.Stderr();
  // The master names whom it refused, and why, when it says and when it ends: the launcher
  // proves first (the master's proof would be an offline oracle), so the master tells.
  EXPECT_NE(a.Stderr().find("refused a launcher at 127.0.0.1: its token is not the job's"),
            std::string::npos)
      << a.Stderr();
  EXPECT_NE(
      a.Stderr().find("1 worker(s) never came; refused: 127.0.0.1 (its token is not the job's)"),
      std::string::npos)
      << a.Stderr();
}

TEST_F(ClusterTest, DuplicateNodeRankIsRefusedByName) {
  auto a = Node(2, 1, {"--node_rank", "0", "--cluster_time_out", "3"}, {});
  auto b = Node(2, 1, {"--node_rank", "0", "--cluster_time_out", "3"}, {});
  int codes = RunToEnd(a).code + RunToEnd(b).code;
  EXPECT_EQ(codes, 6);
  EXPECT_NE((a.Stderr() + b.Stderr()).find("duplicate node rank 0"), std::string::npos)
      << a.Stderr() << b.Stderr();
}

TEST_F(ClusterTest, ExtraNodeIsRefusedByNameAndTheJobStillForms) {
  auto a = Node(3, 2, {"--node_rank", "0"}, {});
  ASSERT_TRUE(WaitForStderr(a, "waiting for 1 of 3 workers", seconds(20))) << a.Stderr();
  auto extra = Node(3, 2, {}, {});
  EXPECT_EQ(RunToEnd(extra).code, 3) << extra.Stderr();
  EXPECT_NE(extra.Stderr().find("extra node"), std::string::npos) << extra.Stderr();
  auto c = Node(3, 1, {}, {});
  EXPECT_EQ(RunToEnd(a).code, 0) << a.Stderr();
  EXPECT_EQ(RunToEnd(c).code, 0) << c.Stderr();
}

TEST_F(ClusterTest, FormationTimeoutNamesWhatNeverCame) {
  auto a = Node(4, 2, {"--cluster_time_out", "1"}, {});
  EXPECT_EQ(RunToEnd(a).code, 3);
  EXPECT_NE(a.Stderr().find("2 of 4 workers joined"), std::string::npos) << a.Stderr();
  EXPECT_NE(a.Stderr().find("2 worker(s) never came"), std::string::npos) << a.Stderr();
}

TEST_F(ClusterTest, WorkersShareTheKeyValueStore) {
  std::ofstream(dir_.File("kv.sh")) << "#!/bin/sh\nG=" << GangrunBinary() << "\n"
                                    << "[ \"$RANK\" = 0 ] && $G kv put uid token-42\n"
                                    << "v=$($G kv wait uid --timeout 20) || exit 9\n"
                                    << "n=$($G kv add arrived 1) || exit 8\n"
                                    << "echo \"$v $n\"\n";
  chmod(dir_.File("kv.sh").c_str(), 0755);
  std::vector<std::string> common = {
      "--worker_num", "4", "--local_worker_num", "2", "--master_port", port_, "--token", "t0k"};
  auto argv = [&](const std::string& node_rank) {
    std::vector<std::string> v = {GangrunBinary()};
    v.insert(v.end(), common.begin(), common.end());
    v.insert(v.end(), {"--node_rank", node_rank, "./kv.sh"});
    return v;
  };
  auto a = Launch(argv("0"), {}, dir_.path(), dir_.path());
  auto b = Launch(argv("1"), {}, dir_.path(), dir_.path());
  EXPECT_EQ(RunToEnd(a).code, 0) << a.Stderr();
  EXPECT_EQ(RunToEnd(b).code, 0) << b.Stderr();
  std::set<std::string> arrivals;
  for (int rank = 0; rank < 4; ++rank) {
    std::string log = ReadFile(dir_.File("worker_" + std::to_string(rank) + ".log"));
    EXPECT_EQ(log.rfind("token-42 ", 0), 0u) << log;
    arrivals.insert(log.substr(9));
  }
  EXPECT_EQ(arrivals, (std::set<std::string>{"1\n", "2\n", "3\n", "4\n"}));
}

}  // namespace
}  // namespace gangrun::testing
