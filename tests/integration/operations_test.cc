// Operations: gangrun status/stop, /metrics, the event log, Slurm variables, daemon mode
// (scheduler, agents, submit), sd_notify and PID 1.

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "common/net.h"
#include "tests/integration/launcher_fixture.h"
#include "tests/testing/http.h"

namespace gangrun::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class OperationsTest : public LauncherTest {
 protected:
  // Runs `gangrun <args>` to its end; returns (exit code, stdout).
  std::pair<int, std::string> Command(const std::vector<std::string>& args,
                                      const std::vector<std::string>& env = {}) {
    std::vector<std::string> argv = {GangrunBinary()};
    argv.insert(argv.end(), args.begin(), args.end());
    auto run = Launch(argv, env, dir_.path(), dir_.path());
    int code = RunToEnd(run).code;
    return {code, run.Stdout() + run.Stderr()};
  }
};

TEST_F(OperationsTest, StatusShowsNodesRanksAndPidsAndStopEndsTheJobCleanly) {
  const std::string port = FreePort();
  auto job =
      Start({"--worker_num", "2", "--local_worker_num", "2", "--master_port", port}, {"--hang"});
  auto ready = WaitReady(2);
  ASSERT_EQ(ready.size(), 2u);
  auto [code, table] = Command({"status", "--master", "127.0.0.1:" + port});
  EXPECT_EQ(code, 0) << table;
  EXPECT_NE(table.find("phase running  generation 1"), std::string::npos) << table;
  for (const auto& r : ready) {
    EXPECT_NE(table.find(std::to_string(r.pid) + " running"), std::string::npos) << table;
  }
  auto [json_code, json_text] = Command({"status", "--master", "127.0.0.1:" + port, "--json"});
  ASSERT_EQ(json_code, 0) << json_text;
  auto json = nlohmann::json::parse(json_text.substr(0, json_text.rfind('}') + 1));
  EXPECT_EQ(json["phase"], "JOB_PHASE_RUNNING");
  // Numbers as numbers, 64-bit ones included (protobuf's JSON writes those as strings).
  EXPECT_TRUE(json["generation"].is_number()) << json_text;
  EXPECT_EQ(json["generation"], 1) << json_text;
  EXPECT_EQ(json["nodes"][0]["workers"].size(), 2u);
  EXPECT_EQ(json["nodes"][0]["launcher_pid"], job.pid);

  auto [stop_code, stop_text] = Command({"stop", "--master", "127.0.0.1:" + port});
  EXPECT_EQ(stop_code, 0) << stop_text;
  EXPECT_EQ(RunToEnd(job).code, 128 + SIGTERM);
  for (const auto& r : ready) EXPECT_TRUE(WaitGone(r.pid, seconds(5)));
  EXPECT_NE(job.Stderr().find("job stopped: stopped by gangrun stop"), std::string::npos)
      << job.Stderr();
  // The job is gone: status now cannot reach it (3, one line of gangrun's own), and bad
  // usage is 2.
  auto [gone_code, gone_text] = Command({"status", "--master", "127.0.0.1:" + port});
  EXPECT_EQ(gone_code, 3);
  EXPECT_NE(gone_text.find("no gangrun scheduler or daemon answers at 127.0.0.1:" + port +
                           ": connection refused"),
            std::string::npos)
      << gone_text;
  EXPECT_EQ(gone_text.find("failed to connect"), std::string::npos) << gone_text;
  EXPECT_EQ(Command({"status"}).first, 2);
  EXPECT_EQ(Command({"stop", "--bogus"}).first, 2);
}

TEST_F(OperationsTest, ClientCommandsReadTheTokenFromAFile) {
  const std::string port = FreePort(), token_file = dir_.File("token");
  std::ofstream(token_file) << "s3cret\n";
  chmod(token_file.c_str(), 0600);
  auto job = Start({"--worker_num", "1", "--local_worker_num", "1", "--master_port", port,
                    "--token_file", token_file},
                   {"--hang"});
  ASSERT_EQ(WaitReady(1).size(), 1u);
  const std::string master = "127.0.0.1:" + port;
  auto [none, none_text] = Command({"status", "--master", master});
  EXPECT_EQ(none, 3) << none_text;
  EXPECT_NE(none_text.find("the call carries no token"), std::string::npos) << none_text;
  auto [flag, flag_text] = Command({"status", "--master", master, "--token_file", token_file});
  EXPECT_EQ(flag, 0) << flag_text;
  auto [env, env_text] =
      Command({"status", "--master", master}, {"GANGRUN_TOKEN_FILE=" + token_file});
  EXPECT_EQ(env, 0) << env_text;
  auto [missing, missing_text] =
      Command({"status", "--master", master, "--token_file", dir_.File("absent")});
  EXPECT_EQ(missing, 2) << missing_text;
  auto [stop, stop_text] =
      Command({"stop", "--master", master}, {"GANGRUN_TOKEN_FILE=" + token_file});
  EXPECT_EQ(stop, 0) << stop_text;
  EXPECT_EQ(RunToEnd(job).code, 128 + SIGTERM);
}

TEST_F(OperationsTest, EveryPersonalityAndCommandAnswersVersionWithOneLine) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"gangrun", {GangrunBinary()}},
      {"msrun", {MsrunBinary()}},
      {"torchrun", {TorchrunBinary()}},
  };
  std::vector<std::pair<std::string, std::vector<std::string>>> all = cases;
  for (const char* command :
       {"status", "stop", "scale", "health", "kv", "progress", "scheduler", "agent", "submit"}) {
    all.push_back({std::string("gangrun ") + command, {GangrunBinary(), command}});
  }
  for (auto [name, argv] : all) {
    SCOPED_TRACE(name);
    argv.push_back("--version");
    auto run = Launch(argv, {}, dir_.path(), dir_.path());
    EXPECT_EQ(RunToEnd(run).code, 0) << run.Stderr();
    EXPECT_TRUE(std::regex_match(run.Stdout(),
                                 std::regex(name + " [0-9]+\\.[0-9]+\\.[0-9]+( \\(.+\\))?\n")))
        << run.Stdout();
    EXPECT_EQ(run.Stderr(), "");
  }
  // After the task script, --version is the task's.
  auto task = Start({"--worker_num", "1", "--local_worker_num", "1"}, {"--version"});
  EXPECT_EQ(RunToEnd(task).code, 0) << task.Stderr();
  EXPECT_NE(task.Stderr().find("all 1 local process(es) running (rank 0"), std::string::npos)
      << task.Stderr();
  EXPECT_EQ(task.Stdout().find("gangrun 0."), std::string::npos) << task.Stdout();
}

TEST_F(OperationsTest, MetricsEndpointServesPrometheusText) {
  const std::string port = FreePort(), metrics = FreePort();
  auto job = Start({"--worker_num", "2", "--local_worker_num", "2", "--master_port", port,
                    "--metrics_port", metrics},
                   {"--hang"});
  ASSERT_EQ(WaitReady(2).size(), 2u);
  // Workers can report ready before the launcher has heard of them; its "running" line comes
  // after the scheduler (same event loop, earlier in the queue than our scrape) counted them.
  ASSERT_TRUE(WaitForStderr(job, "all 2 local process(es) running", seconds(10)));
  auto [status, body] = HttpGet(metrics, "/metrics");
  ASSERT_EQ(status, 200) << body;
  const std::string text = "\n" + body;
  EXPECT_NE(text.find("# TYPE gangrun_workers gauge"), std::string::npos);
  size_t at = text.find("gangrun_workers{job=\"");
  ASSERT_NE(at, std::string::npos) << text;
  std::string id = text.substr(at + 21, text.find('"', at + 21) - at - 21);
  EXPECT_EQ(Sample(text, "gangrun_workers{job=\"" + id + "\",state=\"running\"}"), 2) << text;
  EXPECT_EQ(Sample(text, "gangrun_nodes{job=\"" + id + "\",state=\"running\"}"), 1) << text;
  EXPECT_EQ(Sample(text, "gangrun_generation{job=\"" + id + "\"}"), 1) << text;
  EXPECT_EQ(Sample(text, "gangrun_rendezvous_seconds_count{job=\"" + id + "\"}"), 1) << text;
  EXPECT_EQ(Sample(text, "gangrun_failures_total{job=\"" + id + "\",cause=\"worker_exit\"}"), 0);
  EXPECT_GE(Sample(text, "gangrun_heartbeat_lag_seconds{job=\"" + id + "\"}"), 0) << text;
  EXPECT_EQ(HttpGet(metrics, "/other").first, 404);
  kill(job.pid, SIGTERM);
  EXPECT_EQ(RunToEnd(job).code, 128 + SIGTERM);
}

// The pages ask who is looking: a job with a token serves /metrics, /status.json and its page
// to a request with its page secret only (bearer or basic auth, as Prometheus sends it), and
// listens where the scheduler does (loopback for a single-host job), not on 0.0.0.0.
TEST_F(OperationsTest, ThePagesOfAJobWithATokenAskForItsPageSecret) {
  const std::string port = FreePort(), metrics = FreePort();
  const std::string token = dir_.File("token");
  { std::ofstream(token) << "a-token-of-more-than-thirty-two-characters\n"; }
  chmod(token.c_str(), 0600);
  auto job = Start({"--worker_num", "1", "--local_worker_num", "1", "--master_port", port,
                    "--metrics_port", metrics, "--token_file", token},
                   {"--hang"});
  ASSERT_EQ(WaitReady(1).size(), 1u);
  ASSERT_TRUE(WaitForStderr(job, "all 1 local process(es) running", seconds(10)));
  EXPECT_NE(job.Stderr().find("http://127.0.0.1:" + metrics + "/metrics"), std::string::npos)
      << job.Stderr();
  auto generate =
      Launch({GangrunBinary(), "generate", "page-secret", token}, {}, dir_.path(), dir_.path());
  ASSERT_EQ(RunToEnd(generate).code, 0) << generate.Stderr();
  const std::string secret(absl::StripAsciiWhitespace(generate.Stdout()));
  ASSERT_EQ(secret.size(), 64u) << secret;
  EXPECT_EQ(secret.find("a-token"), std::string::npos);
  for (const char* target : {"/metrics", "/status.json", "/"}) {
    EXPECT_EQ(HttpGet(metrics, target).first, 401) << target;
    EXPECT_EQ(HttpGet(metrics, target, "Bearer wrong").first, 401) << target;
    EXPECT_EQ(HttpGet(metrics, target, "Bearer a-token-of-more-than-thirty-two-characters").first,
              401)
        << target << ": the token itself never crosses the wire";
    EXPECT_EQ(HttpGet(metrics, target, "Bearer " + secret).first, 200) << target;
    EXPECT_EQ(HttpGet(metrics, target, "Basic " + absl::Base64Escape("prometheus:" + secret)).first,
              200)
        << target;
  }
  auto [code, body] = HttpGet(metrics, "/status.json", "Bearer " + secret);
  EXPECT_NE(body.find("\"nodes\""), std::string::npos) << body;
  kill(job.pid, SIGTERM);
  EXPECT_EQ(RunToEnd(job).code, 128 + SIGTERM);
}

TEST_F(OperationsTest, HealthPortSaysWhenTheNodesWorkersRun) {
  const std::string port = FreePort(), health = FreePort();
  const std::string target = "127.0.0.1:" + health;
  // Node 0 of a two-node job: alive at once, its workers run only when node 1 joins.
  auto first = Start({"--worker_num", "2", "--local_worker_num", "1", "--master_port", port,
                      "--health_port", health, "--node_rank", "0"},
                     {"--hang"});
  ASSERT_TRUE(WaitForStderr(first, "waiting for 1 of 2 workers", seconds(10))) << first.Stderr();
  EXPECT_EQ(Command({"health", "--target", target}), std::make_pair(0, std::string("SERVING\n")));
  EXPECT_EQ(Command({"health", "--target", target, "--service", "gangrun.v1.Node"}).first, 1);
  EXPECT_EQ(Command({"health", "--target", "127.0.0.1:" + port}).first, 0);  // the scheduler's
  auto second = Start(
      {"--worker_num", "2", "--local_worker_num", "1", "--master_port", port, "--node_rank", "1"},
      {"--hang"});
  ASSERT_EQ(WaitReady(2).size(), 2u);
  ASSERT_TRUE(WaitForStderr(first, "all 1 local process(es) running", seconds(10)));
  EXPECT_EQ(Command({"health", "--target", target, "--service", "gangrun.v1.Node"}).first, 0);
  kill(first.pid, SIGTERM);
  EXPECT_EQ(RunToEnd(first).code, 128 + SIGTERM);
  EXPECT_EQ(RunToEnd(second).code, 128 + SIGTERM);
}

TEST_F(OperationsTest, EventLogRecordsMembershipFailureRestartAndEnd) {
  const std::string log = dir_.File("events.jsonl");
  auto job = Start({"--worker_num", "2", "--local_worker_num", "2", "--max_restarts", "1",
                    "--restart_backoff", "0", "--event_log", log},
                   {"--fail-rank", "1", "--exit", "3", "--only-generation", "1"});
  EXPECT_EQ(RunToEnd(job).code, 0) << job.Stderr();
  std::vector<std::string> events;
  std::vector<std::string> phases;  // the ledger's lines: "<generation> <phase>"
  std::ifstream in(log);
  std::string line;
  while (std::getline(in, line)) {
    auto event = nlohmann::json::parse(line);  // every line is one JSON object
    EXPECT_TRUE(event.contains("ts"));
    if (event["event"] == "phase") {
      phases.push_back(event["generation"].dump() + " " + event["phase"].get<std::string>());
      continue;
    }
    if (event["event"] == "phase_moved") continue;
    events.push_back(event["event"]);
    if (event["event"] == "worker_failed") {
      EXPECT_EQ(event["rank"], 1);
      EXPECT_EQ(event["exit_code"], 3);
    }
    if (event["event"] == "job_finished") {
      EXPECT_EQ(event["outcome"], "succeeded");
    }
  }
  const std::vector<std::string> expected = {"node_joined",
                                             "generation_started",
                                             "generation_running",
                                             "worker_failed",
                                             "generation_aborted",
                                             "generation_ended",
                                             "verdict",
                                             "restart_scheduled",
                                             "generation_started",
                                             "generation_running",
                                             "generation_ended",
                                             "job_finished"};
  EXPECT_EQ(events, expected);
  // The ledger's phases: forming first, each generation's training, the failed one stopped.
  ASSERT_FALSE(phases.empty());
  EXPECT_EQ(phases.front(), "0 forming");
  const auto first = std::find(phases.begin(), phases.end(), "1 training");
  const auto stopping = std::find(first, phases.end(), "1 stopping");
  EXPECT_NE(std::find(stopping, phases.end(), "2 training"), phases.end())
      << ::testing::PrintToString(phases);
}

TEST_F(OperationsTest, SlurmVariablesGiveNodeRankNodeCountAndMaster) {
  const std::string port = FreePort();
  auto slurm = [&](int node_id) {
    return std::vector<std::string>{"GANGRUN_TEST_READY=" + fifo_.path(), "SLURM_JOB_ID=4242",
                                    "SLURM_NODEID=" + std::to_string(node_id),
                                    "SLURM_JOB_NUM_NODES=2",
                                    "SLURM_JOB_NODELIST=localhost,127.0.0.[1-1]"};
  };
  auto node = [&](int node_id) {
    return Launch({GangrunBinary(), "--local_worker_num", "1", "--master_port", port,
                   TestWorkerBinary(), "--env", dir_.File("env")},
                  slurm(node_id), dir_.path(), dir_.path());
  };
  auto second = node(1);
  auto first = node(0);
  EXPECT_EQ(RunToEnd(first).code, 0) << first.Stderr();
  EXPECT_EQ(RunToEnd(second).code, 0) << second.Stderr();
  EXPECT_NE(first.Stderr().find(
                "Slurm job 4242: run id slurm-4242, node rank 0, master localhost, 2 node(s)"),
            std::string::npos)
      << first.Stderr();
  for (int rank = 0; rank < 2; ++rank) {
    std::string env = ReadFile(dir_.File("env." + std::to_string(rank)));
    EXPECT_NE(env.find("\nWORLD_SIZE=2\n"), std::string::npos) << env;
    EXPECT_NE(env.find("\nGROUP_RANK=" + std::to_string(rank) + "\n"), std::string::npos) << env;
    EXPECT_NE(env.find("\nGANGRUN_RUN_ID=slurm-4242\n"), std::string::npos) << env;
  }
}

TEST_F(OperationsTest, BadSlurmNodeListIsOneClearError) {
  auto run = Launch({GangrunBinary(), TestWorkerBinary()},
                    {"SLURM_JOB_ID=1", "SLURM_JOB_NODELIST=node[01-"}, dir_.path(), dir_.path());
  EXPECT_EQ(RunToEnd(run).code, 2);
  EXPECT_NE(run.Stderr().find("cannot read SLURM_JOB_NODELIST 'node[01-'"), std::string::npos)
      << run.Stderr();
}

}  // namespace
}  // namespace gangrun::testing
