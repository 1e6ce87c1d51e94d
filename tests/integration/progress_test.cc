// Progress supervision with real workers: Python ranks that report through GANGRUN_PROGRESS
// and hang (one somewhere else than the others), a section timeout, torch's FileTimer, a
// healthy job with a short bound, a shell worker using `gangrun progress`, a native worker's
// stack, and a flood of reports.

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/integration/launcher_fixture.h"

namespace gangrun::testing {
namespace {

using std::chrono::seconds;
using std::chrono::steady_clock;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kCpuIsMeasurable = false;  // a sanitizer multiplies the launcher's CPU cost
#else
constexpr bool kCpuIsMeasurable = true;
#endif

// Four ranks step five times; then rank 2 waits in load_batch, the others in all_reduce_wait.
constexpr char kHangingJob[] = R"PY(
import os, socket, sys, time
sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
def report(text):
    sock.sendto(text.encode(), os.environ["GANGRUN_PROGRESS"])
def load_batch():
    time.sleep(3600)
def all_reduce_wait():
    time.sleep(3600)
for step in range(5):
    report("step %d" % step)
if int(os.environ["RANK"]) == 2:
    load_batch()
else:
    all_reduce_wait()
)PY";

class ProgressTest : public LauncherTest {
 protected:
  std::string Script(const std::string& name, const std::string& text) {
    std::ofstream(dir_.File(name)) << text;
    return dir_.File(name);
  }
  Launched Run(const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
    std::vector<std::string> argv = {GangrunBinary()};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<std::string> full_env = {"GANGRUN_TEST_READY=" + fifo_.path()};
    full_env.insert(full_env.end(), env.begin(), env.end());
    return Launch(argv, full_env, dir_.path(), dir_.path());
  }
  // `gangrun <args>` to its end: (exit code, stdout + stderr).
  std::pair<int, std::string> Command(const std::vector<std::string>& args,
                                      const std::vector<std::string>& env = {}) {
    auto run = Run(args, env);
    int code = RunToEnd(run).code;
    return {code, run.Stdout() + run.Stderr()};
  }
  std::string Log(int rank) {
    return ReadFile(dir_.File("logs/worker_" + std::to_string(rank) + ".log"));
  }
};

TEST_F(ProgressTest, AHangIsStoppedAndTheReportNamesTheOddOneOutAndItsFunction) {
  const auto started = steady_clock::now();
  auto job = Run({"--worker_num", "4", "--local_worker_num", "4", "--hang_timeout", "2",
                  "--log_dir", "logs", "python3", Script("train.py", kHangingJob)});
  const auto status = RunToEnd(job);
  const double took = std::chrono::duration<double>(steady_clock::now() - started).count();
  const std::string err = job.Stderr();
  EXPECT_EQ(status.code, 5) << err;
  EXPECT_NE(err.find("job hung"), std::string::npos) << err;
  EXPECT_NE(err.find("3 ranks (0-1,3) in all_reduce_wait (train.py:"), std::string::npos) << err;
  // The headline leads with where to look.
  EXPECT_NE(err.find("job hung. rank 2 on "), std::string::npos) << err;
  EXPECT_NE(err.find(" is the odd one out, in load_batch (train.py:"), std::string::npos) << err;
  EXPECT_NE(err.find("root cause: rank 2"), std::string::npos) << err;
  // Every rank's stack is in its log.
  EXPECT_NE(Log(2).find("in load_batch"), std::string::npos) << Log(2);
  EXPECT_NE(Log(0).find("in all_reduce_wait"), std::string::npos) << Log(0);
  // Stopped within the bound plus a few seconds (Python's start included).
  EXPECT_LT(took, 2 + 10.0);
}

// A hang at the same place in two generations in a row is not restarted again: the second
// stops the job as a hang, saying it is the same one.
TEST_F(ProgressTest, AHangAtTheSamePlaceTwiceStopsTheJob) {
  auto job = Run({"--worker_num", "4", "--local_worker_num", "4", "--hang_timeout", "2",
                  "--max_restarts", "5", "--restart_backoff", "0.05", "--log_dir", "logs",
                  "python3", Script("train.py", kHangingJob)});
  const auto status = RunToEnd(job);
  const std::string err = job.Stderr();
  EXPECT_EQ(status.code, 5) << err;
  EXPECT_NE(err.find("not restarted: the same failure in 2 generations in a row, with no "
                     "progress: a hang at load_batch (train.py:"),
            std::string::npos)
      << err;
  EXPECT_EQ(err.find("generation 3"), std::string::npos) << err;
}

TEST_F(ProgressTest, ASectionHasItsOwnBound) {
  auto job = Run({"--worker_num", "1", "--local_worker_num", "1", "--hang_timeout", "600",
                  "--section_timeout", "checkpoint=1", "python3", Script("ckpt.py", R"PY(
import os, socket, time
sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
for text in ("step 1", "begin checkpoint"):
    sock.sendto(text.encode(), os.environ["GANGRUN_PROGRESS"])
time.sleep(3600)
)PY")});
  EXPECT_EQ(RunToEnd(job).code, 5) << job.Stderr();
  EXPECT_NE(job.Stderr().find("in section 'checkpoint' (--section_timeout checkpoint=1)"),
            std::string::npos)
      << job.Stderr();
}

// Debian's interpreter, not PATH's python3: that one may be pyenv's shim, a shell script that
// took over 1 s to start Python on a loaded machine (ASan's tests two at a time), which made
// its ranks report later than --hang_timeout and be named as silent.
TEST_F(ProgressTest, AHealthyJobWithAShortBoundIsNotStopped) {
  auto job = Run({"--worker_num", "2", "--local_worker_num", "2", "--hang_timeout", "1",
                  "--hang_timeout_initial", "20", "/usr/bin/python3", Script("ok.py", R"PY(
import os, socket, time
sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
for step in range(30):
    sock.sendto(b"step %d" % step, os.environ["GANGRUN_PROGRESS"])
    time.sleep(0.1)
)PY")});
  EXPECT_EQ(RunToEnd(job).code, 0) << job.Stderr();
  EXPECT_EQ(job.Stderr().find("hung"), std::string::npos) << job.Stderr();
  EXPECT_EQ(job.Stderr().find("sent no progress report"), std::string::npos) << job.Stderr();
}

TEST_F(ProgressTest, AShellWorkerReportsWithTheProgressCommand) {
  const std::string gangrun = GangrunBinary();
  auto job = Run({"--worker_num", "1", "--local_worker_num", "1", "--hang_timeout", "5",
                  "--hang_timeout_initial", "20", "/bin/sh", "-c",
                  "set -e; for i in 1 2 3; do '" + gangrun + "' progress step $i; done; '" +
                      gangrun + "' progress begin save; '" + gangrun + "' progress end save"});
  EXPECT_EQ(RunToEnd(job).code, 0) << job.Stderr();
  // Bad usage is 2; outside a worker there is nowhere to report to (2 as well).
  EXPECT_EQ(Command({"progress", "stride", "3"}).first, 2);
  auto outside = Command({"progress", "step", "3"});
  EXPECT_EQ(outside.first, 2);
  EXPECT_NE(outside.second.find("GANGRUN_PROGRESS is not set"), std::string::npos)
      << outside.second;
  EXPECT_EQ(Command({"progress", "step"}, {"GANGRUN_PROGRESS=" + dir_.File("nobody")}).first, 3);
}

TEST_F(ProgressTest, TorchFileTimerCodeIsEnforcedUnchanged) {
  // Debian's python3-torch is for Debian's own interpreter.
  ASSERT_EQ(system("/usr/bin/python3 -c 'import torch.distributed.elastic.timer' 2>/dev/null"), 0)
      << "python3-torch is not installed (deploy/install-deps.sh installs it)";
  auto job = Run(
      {"--worker_num", "2", "--local_worker_num", "2", "/usr/bin/python3", Script("timer.py", R"PY(
import os, time
import torch.distributed.elastic.timer as timer
timer.configure(timer.FileTimerClient(os.environ["TORCHELASTIC_TIMER_FILE"]))
with timer.expires(after=5, scope="fast_step"):
    time.sleep(0.01)
with timer.expires(after=1, scope="data_load"):
    time.sleep(3600 if os.environ["RANK"] == "1" else 0.01)
)PY")});
  EXPECT_EQ(RunToEnd(job).code, 5) << job.Stderr();
  EXPECT_NE(job.Stderr().find("the torch timer 'data_load' of rank 1"), std::string::npos)
      << job.Stderr();
}

TEST_F(ProgressTest, ANativeWorkersStackComesFromEuStack) {
  ASSERT_EQ(system("command -v eu-stack >/dev/null"), 0)
      << "elfutils is not installed (deploy/install-deps.sh installs it)";
  // ptrace may be forbidden here (a container without it): then there is nothing to test. A
  // probe can catch its process between fork and exec, so it has three tries.
  if (system("for i in 1 2 3; do sleep 5 & p=$!; eu-stack -p $p >/dev/null 2>&1; r=$?; "
             "kill $p; [ $r = 0 ] && exit 0; done; exit 1") != 0) {
    GTEST_SKIP() << "eu-stack cannot attach to processes here";
  }
  Launched job = Start({"--worker_num", "1", "--local_worker_num", "1", "--hang_timeout_initial",
                        "1", "--log_dir", "logs"},
                       {"--hang"});
  EXPECT_EQ(RunToEnd(job).code, 5) << job.Stderr();
  EXPECT_NE(job.Stderr().find("made no first progress report"), std::string::npos) << job.Stderr();
  EXPECT_NE(Log(0).find("native stack"), std::string::npos) << Log(0);
  EXPECT_NE(Log(0).find("TID "), std::string::npos) << Log(0);
  // test_worker is built with -g: the frame has its file and line.
  EXPECT_NE(job.Stderr().find("rank 0 in main (test_worker.cc:"), std::string::npos)
      << job.Stderr();
}

TEST_F(ProgressTest, AFloodOfReportsCostsBoundedCpuAndStatusShowsTheSteps) {
  const std::string port = FreePort();
  const std::string go = dir_.File("go");
  ASSERT_EQ(mkfifo(go.c_str(), 0600), 0);
  // Floods for 2 s without blocking, says how much it sent, waits for the test, reports a
  // last step with a number the test looks for, and waits to be stopped.
  auto job = Run({"--worker_num", "1", "--local_worker_num", "1", "--master_port", port, "python3",
                  Script("flood.py", R"PY(
import os, socket, time
sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
sock.setblocking(False)
path = os.environ["GANGRUN_PROGRESS"]
sent = attempted = 0
end = time.monotonic() + 2
while time.monotonic() < end:
    for _ in range(1000):
        attempted += 1
        try:
            sock.sendto(b"step", path)
            sent += 1
        except BlockingIOError:
            pass
with open(os.environ["GANGRUN_TEST_READY"], "w") as fifo:
    fifo.write("flooded %d %d\n" % (attempted, sent))
open(os.environ["GO"]).read()
sock.setblocking(True)
sock.sendto(b"step 424242", path)
time.sleep(3600)
)PY")},
                 {"GO=" + go});
  auto line = fifo_.ReadLine(seconds(30));
  ASSERT_TRUE(line.has_value()) << job.Stderr();
  auto fields = Split(*line, ' ');
  ASSERT_EQ(fields.size(), 3u) << *line;
  const long attempted = std::stol(fields[1]);
  // The launcher's CPU time so far (utime + stime, fields 14 and 15 of /proc/pid/stat).
  std::string stat = ReadFile("/proc/" + std::to_string(job.pid) + "/stat");
  auto after = Split(stat.substr(stat.rfind(')') + 2), ' ');
  const double cpu = (std::stod(after[11]) + std::stod(after[12])) / sysconf(_SC_CLK_TCK);
  std::ofstream(go) << "go\n";  // unblocks the worker
  // The node read at most its budget (10,000 a second per rank) whatever was sent.
  int64_t reports = 0;
  const auto deadline = std::chrono::steady_clock::now() + seconds(20);
  while (reports == 0 && std::chrono::steady_clock::now() < deadline) {
    auto [code, json_text] = Command({"status", "--master", "127.0.0.1:" + port, "--json"});
    if (code != 0) continue;
    auto json = nlohmann::json::parse(json_text.substr(0, json_text.rfind('}') + 1));
    const auto& worker = json["nodes"][0]["workers"][0];
    if (worker.value("step", int64_t{0}) == 424242) {
      reports = worker["reports"].get<int64_t>();
    }
  }
  EXPECT_GT(reports, 0) << "the last step never showed in status";
  EXPECT_LE(reports, 3 * 10000 + 1);
  EXPECT_GT(attempted, 3 * 10000) << "the worker did not flood";
  if (kCpuIsMeasurable) {
    EXPECT_LT(cpu, 1.0) << "launcher CPU seconds during a 2 s flood";
  }
  kill(job.pid, SIGTERM);
  EXPECT_EQ(RunToEnd(job).code, 128 + SIGTERM);
}

// The ledger against the workers' own clock: two ranks that start up for 1 s, then step for
// 1 s; rank 1 fails in generation 1, the job restarts after a 1 s backoff and succeeds. Each
// phase within 0.5 s of what the workers did, every second in one phase.
TEST_F(ProgressTest, TheLedgerPutsEverySecondOfAJobWithARestartWhereItWent) {
  auto job = Run({"--worker_num", "2", "--local_worker_num", "2", "--max_restarts", "1",
                  "--restart_backoff", "1", "--heartbeat_interval", "0.05", "--event_log",
                  dir_.File("events.jsonl"), "/usr/bin/python3", Script("job.py", R"PY(
import os, socket, sys, time
sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
time.sleep(1.0)  # start-up: imports, init_process_group, loading a checkpoint
for step in range(10):
    sock.sendto(b"step %d" % step, os.environ["GANGRUN_PROGRESS"])
    time.sleep(0.1)
if os.environ["GANGRUN_GENERATION"] == "1" and os.environ["RANK"] == "1":
    sys.exit(3)
)PY")});
  EXPECT_EQ(RunToEnd(job).code, 0) << job.Stderr();
  EXPECT_NE(job.Stderr().find("gangrun: the job's time: "), std::string::npos) << job.Stderr();
  const nlohmann::json ledger = FinishedLedger(dir_.File("events.jsonl"));
  ASSERT_TRUE(ledger.is_object()) << "no job_finished event with a ledger";
  auto phase = [&](const char* name) {
    return ledger["seconds"].contains(name) ? ledger["seconds"][name].get<double>() : 0.0;
  };
  double sum = 0;
  for (const auto& [name, value] : ledger["seconds"].items()) sum += value.get<double>();
  const double wall = ledger["wall_seconds"];
  EXPECT_NEAR(sum, wall, wall * 0.01) << ledger.dump();
  // 1 s per generation, and the interpreter's own start: within the issue's 1 s (a loaded
  // machine starts python3 slowly; 2.89 s was seen under a concurrent build).
  EXPECT_NEAR(phase("starting"), 2.0, 1.0) << ledger.dump();
  EXPECT_NEAR(phase("training"), 2.0, 0.5) << ledger.dump();  // 10 steps of 0.1 s, twice
  EXPECT_NEAR(phase("backoff"), 1.0, 0.5) << ledger.dump();
  // No checkpoint: generation 2 did generation 1's steps again, all of its training is lost.
  const double lost = ledger["lost_work_seconds"];
  EXPECT_NEAR(lost, 1.0, 0.4) << ledger.dump();
  EXPECT_EQ(ledger["checkpoint_step"], -1) << ledger.dump();
  EXPECT_NEAR(ledger["ettr"].get<double>(), (phase("training") - lost) / wall, 1e-6);
}

// A checkpoint after step 4 (its datagram form, as `gangrun progress checkpoint 4` sends it):
// only generation 1's steps after it are done again, and the ledger counts that training as
// lost work, against the workers' own clock.
TEST_F(ProgressTest, TrainingAfterTheLastCheckpointIsLostWorkWhenTheJobRestarts) {
  auto job = Run({"--worker_num", "2", "--local_worker_num", "2", "--max_restarts", "1",
                  "--restart_backoff", "0.2", "--heartbeat_interval", "0.05", "--event_log",
                  dir_.File("events.jsonl"), "/usr/bin/python3", Script("job.py", R"PY(
import os, socket, sys, time
sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
first = os.environ["GANGRUN_GENERATION"] == "1"
for step in range(10):
    sock.sendto(b"step %d" % step, os.environ["GANGRUN_PROGRESS"])
    if step == 4 and os.environ["RANK"] == "0":
        sock.sendto(b"checkpoint 4", os.environ["GANGRUN_PROGRESS"])
        if first:
            with open(sys.argv[1], "w") as truth:
                truth.write("%f" % time.time())
    time.sleep(0.1)
if first and os.environ["RANK"] == "1":
    with open(sys.argv[2], "w") as truth:
        truth.write("%f" % time.time())
    sys.exit(3)
)PY"),
                  dir_.File("checkpointed_at"), dir_.File("failed_at")});
  EXPECT_EQ(RunToEnd(job).code, 0) << job.Stderr();
  EXPECT_NE(job.Stderr().find("training redone after restarts"), std::string::npos) << job.Stderr();
  EXPECT_NE(job.Stderr().find("last checkpoint: step 4"), std::string::npos) << job.Stderr();
  const nlohmann::json ledger = FinishedLedger(dir_.File("events.jsonl"));
  ASSERT_TRUE(ledger.is_object()) << "no job_finished event with a ledger";
  auto truth = [&](const char* name) {
    std::ifstream in(dir_.File(name));
    double at = 0;
    in >> at;
    return at;
  };
  const double truly_lost = truth("failed_at") - truth("checkpointed_at");  // about 0.5 s
  EXPECT_NEAR(ledger["lost_work_seconds"].get<double>(), truly_lost, 0.3) << ledger.dump();
  EXPECT_EQ(ledger["checkpoint_step"], 4) << ledger.dump();
  const double training = ledger["seconds"]["training"];
  EXPECT_NEAR(
      ledger["ettr"].get<double>(),
      (training - ledger["lost_work_seconds"].get<double>()) / ledger["wall_seconds"].get<double>(),
      1e-6);
}

// `gangrun progress` lives until its report is read: the node checks whose report it is by the
// sender's pid when it reads it, and a sender already gone would be taken for a forgery.
TEST_F(ProgressTest, TheProgressCommandWaitsUntilItsReportIsRead) {
  const std::string path = dir_.File("node.sock");
  const int node = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
  ASSERT_EQ(bind(node, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  auto reporter = Launch({GangrunBinary(), "progress", "step", "7"}, {"GANGRUN_PROGRESS=" + path},
                         dir_.path(), dir_.path());
  pollfd arrived{node, POLLIN, 0};
  ASSERT_EQ(poll(&arrived, 1, 30000), 1);
  // Sent and not read: the command does not end (it would in a few milliseconds without its
  // wait; it waits up to 2 s).
  const int exited = static_cast<int>(syscall(SYS_pidfd_open, reporter.pid, 0));
  ASSERT_GE(exited, 0);
  pollfd gone{exited, POLLIN, 0};
  EXPECT_EQ(poll(&gone, 1, 500), 0) << "the command ended before its report was read";
  close(exited);
  char report[64] = {};
  ASSERT_GT(recv(node, report, sizeof(report) - 1, 0), 0);
  EXPECT_STREQ(report, "step 7");
  EXPECT_EQ(RunToEnd(reporter).code, 0) << reporter.Stderr();
  close(node);
}

}  // namespace
}  // namespace gangrun::testing
