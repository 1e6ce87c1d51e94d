// The progress hook with real torch workers and no progress code: a gloo DDP job across two
// launchers whose rank 3 stalls is stopped and the report names rank 3 by its collective
// count and its frame; the same job healthy with a short bound runs to its end, and so does one
// whose ranks wait in their rendezvous for longer than that bound; `gangrun
// stacks` shows every rank of a live job, which goes on; the hook is absent with
// --progress_hook False and with python -I (and the launcher says the rule cannot fire); the
// flight recorder's dump is triggered and kept (a stand-in for torch's reader of the pipe).

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/integration/launcher_fixture.h"

namespace gangrun::testing {
namespace {

using std::chrono::seconds;

// Debian's python3-torch is for Debian's own interpreter.
constexpr char kPython[] = "/usr/bin/python3";

// A plain DDP loop: nothing in it knows gangrun. Rank 0 saves a checkpoint with torch.save
// after SAVE_AT optimizer steps (to SAVE_TO); rank 1 exits 3 at the end of generation
// FAIL_GENERATION. LATE_RANK reaches init_process_group
// LATE_BY seconds late, the others waiting in it. STALL_RANK stalls in slow_loader before its
// step STALL_AT (writing the moment, CLOCK_MONOTONIC, to STALL_FILE); READY_AT: every rank
// says "ready" on GANGRUN_TEST_READY after that many steps and waits for GO.
constexpr char kTrain[] = R"PY(
import os, sys, time
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

if "LATE_RANK" in os.environ and os.environ.get("RANK") == os.environ["LATE_RANK"]:
    time.sleep(float(os.environ["LATE_BY"]))  # torch.distributed imported, rendezvous late
dist.init_process_group("gloo")
rank = dist.get_rank()
model = DDP(torch.nn.Linear(4, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
steps = int(os.environ.get("STEPS", "20"))
stall_rank = int(os.environ.get("STALL_RANK", "-1"))
ready_at = int(os.environ.get("READY_AT", "-1"))
save_at = int(os.environ.get("SAVE_AT", "-1"))
pause_rank = int(os.environ.get("PAUSE_RANK", "-1"))


def slow_loader(step):
    if rank == stall_rank and step == int(os.environ.get("STALL_AT", "5")):
        with open(os.environ["STALL_FILE"], "w") as f:
            f.write("%f\n" % time.monotonic())
        time.sleep(3600)
    return torch.randn(8, 4)


def between_forward_and_backward(step):
    if rank == pause_rank and step == int(os.environ.get("STALL_AT", "5")):
        time.sleep(3600)


def wait_for_the_test():
    with open(os.environ["GANGRUN_TEST_READY"], "w") as fifo:
        fifo.write("ready %d %d 0\n" % (rank, os.getpid()))
    open(os.environ["GO"]).read()


for step in range(steps):
    if step == ready_at:
        wait_for_the_test()
    batch = slow_loader(step)
    loss = model(batch).sum()
    between_forward_and_backward(step)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    if step + 1 == save_at and rank == 0:
        import io
        torch.save(model.state_dict(), io.BytesIO())  # into memory: not a checkpoint
        torch.save(model.state_dict(), os.environ["SAVE_TO"])
    time.sleep(0.05)
if os.environ.get("FAIL_GENERATION") == os.environ["GANGRUN_GENERATION"] and rank == 1:
    sys.exit(3)
dist.destroy_process_group()
)PY";

class HookTest : public LauncherTest {
 protected:
  void SetUp() override {
    ASSERT_EQ(system("/usr/bin/python3 -c 'import torch.distributed' 2>/dev/null"), 0)
        << "python3-torch is not installed (deploy/install-deps.sh installs it)";
    std::ofstream(dir_.File("train.py")) << kTrain;
  }
  std::vector<std::string> Args(const std::vector<std::string>& extra) {
    std::vector<std::string> argv = {GangrunBinary()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return argv;
  }
  Launched Run(const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
    std::vector<std::string> full_env = {"GANGRUN_TEST_READY=" + fifo_.path()};
    full_env.insert(full_env.end(), env.begin(), env.end());
    return Launch(Args(args), full_env, dir_.path(), dir_.path());
  }
  std::string Log(int rank) {
    return ReadFile(dir_.File("logs/worker_" + std::to_string(rank) + ".log"));
  }
};

double MonotonicNow() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

TEST_F(HookTest, AStalledRankOfAnUnchangedDdpJobIsNamedByItsCollectiveCountAndFrame) {
  const std::string port = FreePort();
  auto launcher = [&](const std::string& node_rank) {
    return Run({"--worker_num", "4", "--local_worker_num", "2", "--master_port", port,
                "--node_rank", node_rank, "--hang_timeout", "3", "--stack_timeout", "3",
                "--log_dir", "logs", kPython, "train.py"},
               {"STALL_RANK=3", "STEPS=1000", "STALL_FILE=" + dir_.File("stalled")});
  };
  auto a = launcher("0");
  auto b = launcher("1");
  EXPECT_EQ(RunToEnd(a).code, 5) << a.Stderr();
  EXPECT_EQ(RunToEnd(b).code, 5) << b.Stderr();
  const double ended = MonotonicNow();
  const std::string stalled = ReadFile(dir_.File("stalled"));
  ASSERT_FALSE(stalled.empty()) << "rank 3 never stalled\n" << a.Stderr();
  // Within --hang_timeout + --stack_timeout + 2 s of the stall.
  std::printf("both launchers exited %.2f s after rank 3 stalled\n", ended - std::stod(stalled));
  EXPECT_LT(ended - std::stod(stalled), 3 + 3 + 2.0) << a.Stderr();
  const std::string err = a.Stderr();
  // Rank 3 is behind by one collective (the others wait in DDP's gradient all-reduce).
  EXPECT_NE(err.find("rank 3 on "), std::string::npos) << err;
  EXPECT_NE(err.find(" is behind the others, at collective #5, in slow_loader (train.py:"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("ranks 0-2: collective #6, in <module> (train.py:"), std::string::npos) << err;
  EXPECT_NE(err.find("root cause: rank 3"), std::string::npos) << err;
  EXPECT_NE(Log(3).find("in slow_loader"), std::string::npos) << Log(3);
}

// The hook sees torch.save of a file (not of a buffer) as a checkpoint holding the optimizer
// steps so far: after a restart the ledger counts only the training after it as lost work.
TEST_F(HookTest, ACheckpointSavedWithTorchSaveBoundsTheLostWorkOfARestart) {
  auto job =
      Run({"--worker_num", "2", "--local_worker_num", "2", "--max_restarts", "1",
           "--restart_backoff", "0.2", "--heartbeat_interval", "0.1", "--event_log",
           dir_.File("events.jsonl"), kPython, "train.py"},
          {"STEPS=30", "SAVE_AT=10", "SAVE_TO=" + dir_.File("model.pt"), "FAIL_GENERATION=1"});
  EXPECT_EQ(RunToEnd(job).code, 0) << job.Stderr();
  EXPECT_NE(job.Stderr().find("last checkpoint: step 10"), std::string::npos) << job.Stderr();
  const nlohmann::json ledger = FinishedLedger(dir_.File("events.jsonl"));
  ASSERT_TRUE(ledger.is_object());
  EXPECT_EQ(ledger["checkpoint_step"], 10) << ledger.dump();
  // 20 of generation 1's 30 steps came after the checkpoint: more than nothing, less than all
  // of its training (half of the job's).
  const double lost = ledger["lost_work_seconds"];
  const double training = ledger["seconds"]["training"];
  EXPECT_GT(lost, 0.2) << ledger.dump();
  EXPECT_LT(lost, training / 2) << ledger.dump();
}

// DDP's gradient all-reduce is counted when the backward starts, not at the forward: a rank
// stopped between the two is one collective behind the ranks waiting in the all-reduce, and
// named for it (when both were counted at the forward, all had the same count and only the
// stacks' fallback could name it).
TEST_F(HookTest, ARankStoppedBetweenItsForwardAndBackwardIsBehindByOneCollective) {
  auto job = Run({"--worker_num", "4", "--local_worker_num", "4", "--hang_timeout", "3",
                  "--stack_timeout", "3", "--log_dir", "logs", kPython, "train.py"},
                 {"PAUSE_RANK=2", "STEPS=1000"});
  EXPECT_EQ(RunToEnd(job).code, 5) << job.Stderr();
  const std::string err = job.Stderr();
  EXPECT_NE(err.find(" is behind the others, at collective #5, in between_forward_and_backward "
                     "(train.py:"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("root cause: rank 2"), std::string::npos) << err;
}

TEST_F(HookTest, TheSameJobHealthyWithAShortBoundRunsToItsEnd) {
  for (int run = 0; run < 5; ++run) {
    auto job = Run({"--worker_num", "4", "--local_worker_num", "4", "--hang_timeout", "3",
                    "--hang_timeout_initial", "60", kPython, "train.py"},
                   {"STEPS=40"});
    EXPECT_EQ(RunToEnd(job).code, 0) << "run " << run << "\n" << job.Stderr();
    EXPECT_EQ(job.Stderr().find("hang"), std::string::npos) << job.Stderr();
    EXPECT_EQ(job.Stderr().find("no progress report yet"), std::string::npos) << job.Stderr();
  }
}

TEST_F(HookTest, RanksWaitingInTheirRendezvousLongerThanTheBoundAreNotHung) {
  // The hook's counts before the first collective are no report: the steady bound starts at
  // the first collective, whenever the slowest rank comes.
  auto job = Run(
      {"--worker_num", "4", "--local_worker_num", "4", "--hang_timeout", "3", kPython, "train.py"},
      {"STEPS=10", "LATE_RANK=3", "LATE_BY=5"});
  EXPECT_EQ(RunToEnd(job).code, 0) << job.Stderr();
  EXPECT_EQ(job.Stderr().find("no progress"), std::string::npos) << job.Stderr();
}

TEST_F(HookTest, StacksOfALiveJobNameEveryRankAndTheJobGoesOn) {
  const std::string port = FreePort();
  const std::string go = dir_.File("go");
  ASSERT_EQ(mkfifo(go.c_str(), 0600), 0);
  auto job = Run({"--worker_num", "4", "--local_worker_num", "4", "--master_port", port, "--token",
                  "s3cret", kPython, "train.py"},
                 {"STEPS=12", "READY_AT=8", "GO=" + go});
  WaitReady(4);
  const std::string master = "127.0.0.1:" + port;
  // The hook's counts reach the node within 100 ms, the scheduler at the next heartbeat.
  const auto counted = [&] {
    auto status = Launch(Args({"status", "--master", master, "--token", "s3cret", "--json"}), {},
                         dir_.path(), dir_.path());
    if (RunToEnd(status).code != 0) return false;
    auto json = nlohmann::json::parse(status.Stdout());
    int ranks = 0;
    // Steps (the optimizer's) and step times come from the hook too: stragglers need them.
    for (const auto& worker : json["nodes"][0]["workers"]) {
      ranks += worker.value("collectives", int64_t{0}) == 8 &&
               worker.value("step", int64_t{0}) == 8 && worker.value("step_seconds", 0.0) > 0;
    }
    return ranks == 4;
  };
  const auto deadline = std::chrono::steady_clock::now() + seconds(30);
  while (!counted()) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "no hook counts, steps, step times";
  }
  auto stacks = Launch(Args({"stacks", "--master", master, "--token", "s3cret"}), {}, dir_.path(),
                       dir_.path());
  ASSERT_EQ(RunToEnd(stacks).code, 0) << stacks.Stderr();
  const std::string out = stacks.Stdout();
  EXPECT_NE(out.find("generation 1: ranks 0-3: collective #8, in wait_for_the_test (train.py:"),
            std::string::npos)
      << out;
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_NE(out.find("--- rank " + std::to_string(rank) + " (pid "), std::string::npos) << out;
  }
  EXPECT_NE(out.find("in wait_for_the_test"), std::string::npos) << out;
  // One rank, as JSON; without the token, refused.
  auto one =
      Launch(Args({"stacks", "--master", master, "--token", "s3cret", "--rank", "2", "--json"}), {},
             dir_.path(), dir_.path());
  ASSERT_EQ(RunToEnd(one).code, 0) << one.Stderr();
  auto json = nlohmann::json::parse(one.Stdout());
  ASSERT_EQ(json["stacks"].size(), 1u) << one.Stdout();
  EXPECT_EQ(json["stacks"][0]["rank"], 2);
  EXPECT_EQ(json["stacks"][0]["collectives"], 8);  // a number, as every count
  EXPECT_EQ(json["stacks"][0]["kind"], "python");
  auto refused = Launch(Args({"stacks", "--master", master, "--token", "wrong"}), {}, dir_.path(),
                        dir_.path());
  EXPECT_NE(RunToEnd(refused).code, 0);
  auto bad = Launch(Args({"stacks", "--master", master, "--token", "s3cret", "--rank", "9"}), {},
                    dir_.path(), dir_.path());
  EXPECT_EQ(RunToEnd(bad).code, 2) << bad.Stderr();
  EXPECT_NE(bad.Stderr().find("there is no rank 9"), std::string::npos) << bad.Stderr();
  std::ofstream(go) << "go\n";  // every rank goes on
  EXPECT_EQ(RunToEnd(job).code, 0) << job.Stderr();
}

TEST_F(HookTest, TheHookIsAbsentWithProgressHookFalseAndWithPythonI) {
  std::ofstream(dir_.File("probe.py")) << R"PY(
import os, sys
import torch.distributed
hooked = "GANGRUN_HOOK_PID" in os.environ and getattr(torch.distributed.all_reduce, "_gangrun_counted", False)
print("hook present" if hooked else "hook absent", flush=True)
)PY";
  const auto probe = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"--worker_num", "1", "--local_worker_num", "1"});
    auto job = Run(args);
    EXPECT_EQ(RunToEnd(job).code, 0) << job.Stderr();
    return job.Stdout() + job.Stderr();
  };
  EXPECT_NE(probe({kPython, "probe.py"}).find("hook present"), std::string::npos);
  EXPECT_NE(probe({"--progress_hook", "False", kPython, "probe.py"}).find("hook absent"),
            std::string::npos);
  EXPECT_NE(probe({kPython, "-I", "probe.py"}).find("hook absent"), std::string::npos);
  // A rule that needs reports, a worker that never sends one: said, and nothing is stopped.
  std::ofstream(dir_.File("quiet.py")) << R"PY(
import os
with open(os.environ["GANGRUN_TEST_READY"], "w") as fifo:
    fifo.write("ready 0 %d 0\n" % os.getpid())
open(os.environ["GO"]).read()
)PY";
  const std::string go = dir_.File("go");
  ASSERT_EQ(mkfifo(go.c_str(), 0600), 0);
  auto job = Run({"--worker_num", "1", "--local_worker_num", "1", "--hang_timeout", "1",
                  "--progress_hook", "False", kPython, "quiet.py"},
                 {"GO=" + go});
  WaitReady(1);
  EXPECT_TRUE(WaitForStderr(job, "sent no progress report yet", std::chrono::seconds(20)))
      << job.Stderr();
  std::ofstream(go) << "go\n";
  EXPECT_EQ(RunToEnd(job).code, 0) << job.Stderr();
}

TEST_F(HookTest, AHangTriggersTheFlightRecorderDumpAndKeepsItBesideTheLog) {
  // A stand-in for torch's ProcessGroupNCCL: makes <trigger prefix><rank>.pipe, and when
  // something is written to it, writes <dump prefix><rank>. Then it never reports.
  std::ofstream(dir_.File("nccl.py")) << R"PY(
import os, threading, time
rank = os.environ["RANK"]
pipe = os.environ["TORCH_NCCL_DEBUG_INFO_PIPE_FILE"] + rank + ".pipe"
dump = os.environ["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"] + rank
assert os.environ["TORCH_NCCL_TRACE_BUFFER_SIZE"] == "2000"
os.mkfifo(pipe)
def watchdog():
    fd = os.open(pipe, os.O_RDWR)  # always a writer: a read waits for the trigger
    os.read(fd, 1)
    with open(dump, "w") as f:
        f.write("flight recorder of rank %s" % rank)
threading.Thread(target=watchdog, daemon=True).start()
def collective_stuck():
    time.sleep(3600)
collective_stuck()
)PY";
  auto job = Run({"--worker_num", "2", "--local_worker_num", "2", "--hang_timeout_initial", "2",
                  "--log_dir", "logs", kPython, "nccl.py"});
  EXPECT_EQ(RunToEnd(job).code, 5) << job.Stderr();
  EXPECT_NE(job.Stderr().find("NCCL flight recorder dumps of 2 rank(s), beside their logs"),
            std::string::npos)
      << job.Stderr();
  for (int rank = 0; rank < 2; ++rank) {
    const std::string kept =
        ReadFile(dir_.File("logs/worker_" + std::to_string(rank) + ".flight_recorder"));
    EXPECT_EQ(kept, "flight recorder of rank " + std::to_string(rank));
  }
}

// Looking never hurts (issue #47): `gangrun stacks` while every rank is blocked in torch's
// TCPStore connect (a store that is not there yet) takes each rank's stack, and the ranks go on
// and connect once the store is there. The capture's signal used to fail that connect with
// "Interrupted system call" (its handler is faulthandler's, without SA_RESTART, and connect
// with a timeout is never restarted anyway): now a thread of the hook's own takes it.
TEST_F(HookTest, StacksOfRanksBlockedInTorchsStoreConnectDoNotBreakIt) {
  const std::string master = "127.0.0.1:" + FreePort(), store_port = FreePort();
  std::ofstream(dir_.File("client.py"))
      << "import datetime, os, sys\n"
         "import torch.distributed as dist\n"
         "with open(os.environ['GANGRUN_TEST_READY'], 'w') as fifo:\n"
         "    fifo.write('ready %s %d 0\\n' % (os.environ['RANK'], os.getpid()))\n"
         "store = dist.TCPStore('127.0.0.1', int(sys.argv[1]), 3, False,\n"
         "                      timeout=datetime.timedelta(seconds=60))\n"
         "store.add('arrived', 1)\n"
         "print('connected', flush=True)\n";
  auto job = Run({"--worker_num", "2", "--local_worker_num", "2", "--master_port",
                  master.substr(master.rfind(':') + 1), "--log_dir", "logs", kPython, "client.py",
                  store_port});
  ASSERT_EQ(WaitReady(2).size(), 2u) << job.Stderr();
  // Until both stacks show the rank inside the TCPStore call (the signal lands mid-connect).
  const auto deadline = std::chrono::steady_clock::now() + seconds(30);
  for (;;) {
    auto stacks = Launch(Args({"stacks", "--master", master}), {}, dir_.path(), dir_.path());
    ASSERT_EQ(RunToEnd(stacks).code, 0) << stacks.Stderr();
    const std::string out = stacks.Stdout();
    size_t inside = 0;
    for (size_t at = out.find("client.py\", line 5"); at != std::string::npos;
         at = out.find("client.py\", line 5", at + 1)) {
      ++inside;
    }
    if (inside >= 2) break;
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << out;
  }
  auto store = Launch({kPython, "-c",
                       "import datetime, sys, torch.distributed as dist\n"
                       "s = dist.TCPStore('127.0.0.1', int(sys.argv[1]), 3, True,\n"
                       "                  timeout=datetime.timedelta(seconds=60))\n"
                       "s.add('arrived', 1)\n"
                       "s.wait(['done'])\n",
                       store_port},
                      {}, dir_.path(), dir_.path());
  EXPECT_EQ(RunToEnd(job).code, 0) << job.Stderr() << Log(0) << Log(1);
  EXPECT_NE(Log(0).find("connected"), std::string::npos) << Log(0);
  EXPECT_NE(Log(1).find("connected"), std::string::npos) << Log(1);
  kill(store.pid, SIGKILL);
  RunToEnd(store);
}

}  // namespace
}  // namespace gangrun::testing
