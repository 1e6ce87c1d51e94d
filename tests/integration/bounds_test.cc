// What users, workers and the console throw at a launcher: a console closed or never read,
// a worker that writes as fast as it can, a line without end. The job's outcome must not
// change, and the launcher's memory must stay flat.

#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <regex>
#include <thread>

#include "common/net.h"
#include "gangrun/v1/kv.grpc.pb.h"
#include "tests/integration/launcher_fixture.h"
#include "tests/testing/http.h"

namespace gangrun::testing {
namespace {

using std::chrono::seconds;

class BoundsTest : public LauncherTest {
 protected:
  // gangrun <launcher_args> test_worker <worker_args>, its stdout the write end of `pipe_fds`.
  Launched StartPiped(const std::vector<std::string>& launcher_args,
                      const std::vector<std::string>& worker_args, int stdout_fd) {
    std::vector<std::string> argv = {GangrunBinary()};
    argv.insert(argv.end(), launcher_args.begin(), launcher_args.end());
    argv.push_back(TestWorkerBinary());
    argv.insert(argv.end(), worker_args.begin(), worker_args.end());
    return Launch(argv, {"GANGRUN_TEST_READY=" + fifo_.path()}, dir_.path(), dir_.path(),
                  stdout_fd);
  }

  // Everything left in the pipe until every writer has closed it.
  static std::string ReadToEnd(int fd) {
    std::string out;
    char buffer[65536];
    ssize_t n;
    while ((n = read(fd, buffer, sizeof(buffer))) > 0) out.append(buffer, static_cast<size_t>(n));
    return out;
  }

  static long PeakKiB(const std::string& stderr_text) {
    std::smatch match;
    static const std::regex kPeak("peak resident memory (\\d+) KiB");
    if (!std::regex_search(stderr_text, match, kPeak)) return -1;
    return std::stol(match[1]);
  }

  static off_t FileSize(const std::string& path) {
    struct stat st;
    return stat(path.c_str(), &st) == 0 ? st.st_size : -1;
  }
};

TEST_F(BoundsTest, ConsoleClosedMidJobDoesNotStopTheJob) {
  int fds[2];
  ASSERT_EQ(pipe2(fds, O_CLOEXEC), 0);
  auto launched =
      StartPiped({"--worker_num", "1", "--local_worker_num", "1"}, {"--flood", "4000000"}, fds[1]);
  close(fds[1]);
  char first[16];
  ASSERT_GT(read(fds[0], first, sizeof(first)), 0);  // like `| head -c 16`
  close(fds[0]);
  auto status = RunToEnd(launched);
  EXPECT_FALSE(status.signaled) << "killed by signal " << status.signal << launched.Stderr();
  EXPECT_EQ(status.code, 0) << launched.Stderr();
  EXPECT_NE(launched.Stderr().find("stdout is gone (Broken pipe)"), std::string::npos)
      << launched.Stderr();
  // The log is the record: every byte the worker wrote.
  EXPECT_EQ(FileSize(dir_.File("worker_0.log")), 4000000);
}

TEST_F(BoundsTest, ConsoleNobodyReadsDoesNotLoseANode) {
  const std::string port = FreePort();
  int a_pipe[2], b_pipe[2];
  ASSERT_EQ(pipe2(a_pipe, O_CLOEXEC), 0);
  ASSERT_EQ(pipe2(b_pipe, O_CLOEXEC), 0);
  auto node = [&](const std::string& rank, int fd) {
    return StartPiped(
        {"--worker_num", "2", "--local_worker_num", "1", "--node_rank", rank, "--master_port", port,
         "--heartbeat_interval", "0.1", "--node_timeout", "0.5"},
        {"--flood", "30000000"}, fd);
  };
  auto a = node("0", a_pipe[1]);
  auto b = node("1", b_pipe[1]);
  close(a_pipe[1]);
  close(b_pipe[1]);
  // Nobody reads either console until both launchers say the job is over.
  ASSERT_TRUE(WaitForStderr(a, "job succeeded", seconds(60))) << a.Stderr();
  ASSERT_TRUE(WaitForStderr(b, "job succeeded", seconds(60))) << b.Stderr();
  std::string a_console = ReadToEnd(a_pipe[0]);
  std::string b_console = ReadToEnd(b_pipe[0]);
  close(a_pipe[0]);
  close(b_pipe[0]);
  EXPECT_EQ(RunToEnd(a).code, 0) << a.Stderr();
  EXPECT_EQ(RunToEnd(b).code, 0) << b.Stderr();
  EXPECT_EQ((a.Stderr() + b.Stderr()).find("was lost"), std::string::npos);
  // What the console could not take is said, with a count, once it caught up.
  EXPECT_NE(a_console.find("line(s) were not shown on stdout"), std::string::npos);
  EXPECT_NE(b_console.find("line(s) were not shown on stdout"), std::string::npos);
  EXPECT_EQ(FileSize(dir_.File("worker_0.log")), 30000000);
  EXPECT_EQ(FileSize(dir_.File("worker_1.log")), 30000000);
}

TEST_F(BoundsTest, ChattyWorkerLeavesTheLauncherMemoryFlat) {
  auto launched =
      Launch({GangrunBinary(), "--worker_num", "1", "--local_worker_num", "1", "--log_prefix",
              "[{rank}] ", TestWorkerBinary(), "--flood", "200000000", "--long-line", "20000000"},
             {"GANGRUN_LOG_LEVEL=debug"}, dir_.path(), dir_.path());
  EXPECT_EQ(RunToEnd(launched).code, 0) << launched.Stderr();
  const long peak = PeakKiB(launched.Stderr());
  EXPECT_GT(peak, 0) << launched.Stderr().substr(0, 2000);
  if (kMemoryIsMeasurable) {
    EXPECT_LE(peak, 64 * 1024) << "launcher peak RSS " << peak << " KiB";
  }
  EXPECT_EQ(FileSize(dir_.File("worker_0.log")), 200000000 + 20000001);
  // The console (a file: it keeps up) got every line, the endless one in 1221 pieces of at
  // most 16 KiB, each with the 4-byte prefix "[0] ".
  EXPECT_EQ(FileSize(launched.stdout_path), 200000000 + 2000000 * 4 + 20000000 + 1221 * (1 + 4));
}

TEST_F(BoundsTest, AFullLogDirectoryIsReportedAndNoEventLineIsTorn) {
  // Two small file systems of our own (a private mount namespace): one for the worker's log,
  // which the worker fills, and one for the event log, full but for the end of its last page,
  // so that the first event fits only in part.
  const std::string logs = dir_.File("logs"), events = dir_.File("events");
  ASSERT_EQ(mkdir(logs.c_str(), 0700), 0);
  ASSERT_EQ(mkdir(events.c_str(), 0700), 0);
  if (system("unshare -m true 2>/dev/null") != 0) GTEST_SKIP() << "no mount namespaces here";
  const std::string filler = "{\"filler\":\"" + std::string(4096 - 50 - 14, 'x') + "\"}\n";
  std::ofstream(dir_.File("filler")) << filler;
  const std::string script = "mount -t tmpfs -o size=256k gangrun-test " + logs + " || exit 99; " +
                             "mount -t tmpfs -o size=64k gangrun-test " + events + " || exit 99; " +
                             "cp " + dir_.File("filler") + " " + events + "/events.jsonl; " +
                             "dd if=/dev/zero of=" + events + "/fill bs=4096 2>/dev/null; " +
                             GangrunBinary() + " --worker_num 1 --local_worker_num 1 --log_dir " +
                             logs + " --event_log " + events + "/events.jsonl " +
                             TestWorkerBinary() + " --flood 2000000; code=$?; cp " + events +
                             "/events.jsonl " + dir_.File("events.copy") + "; exit $code";
  auto launched = Launch({"unshare", "-m", "sh", "-c", script}, {}, dir_.path(), dir_.path());
  auto status = RunToEnd(launched);
  if (status.code == 99) GTEST_SKIP() << "cannot mount a tmpfs here";
  EXPECT_EQ(status.code, 0) << launched.Stderr();  // the worker itself succeeded
  EXPECT_NE(launched.Stderr().find("gangrun: warning: worker log output may be incomplete on "
                                   "node"),
            std::string::npos)
      << launched.Stderr();
  EXPECT_NE(launched.Stderr().find("/logs is full"), std::string::npos);
  EXPECT_NE(launched.Stderr().find("cannot write (No space left on device); events are being "
                                   "lost"),
            std::string::npos)
      << launched.Stderr();
  // The event that fitted only in part was cut back off: the file is its old whole line.
  EXPECT_EQ(ReadFile(dir_.File("events.copy")), filler);
}

std::string EnvVar(const std::string& env, const std::string& name) {
  size_t at = env.find("\n" + name + "=");
  if (at == std::string::npos) return "";
  at += name.size() + 2;
  return env.substr(at, env.find('\n', at) - at);
}

class KvFloodTest : public BoundsTest {
 protected:
  // A one-host job whose worker hangs; returns the launcher and its scheduler's address.
  std::pair<Launched, std::string> StartJob(const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"--worker_num", "1", "--local_worker_num", "1"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto launched = Start(args, {"--env", dir_.File("env"), "--hang"});
    WaitReady(1);
    return {launched, EnvVar("\n" + ReadFile(dir_.File("env.0")), "GANGRUN_SCHEDULER")};
  }
};

TEST_F(KvFloodTest, FloodIsRefusedPastTheBoundAndDeletedKeysGiveMemoryBack) {
  auto [launched, target] = StartJob({"--kv_max_bytes", "64MiB"});
  ASSERT_FALSE(target.empty());
  auto stub =
      v1::KeyValue::NewStub(grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  const long before = ProcStatusKiB(launched.pid, "VmRSS");
  const std::string mib(1 << 20, 'v');
  int stored = 0;
  grpc::Status refused;
  for (int i = 0; i < 3000; ++i) {
    grpc::ClientContext context;
    v1::PutRequest put;
    put.set_key("k" + std::to_string(i));
    put.set_value(mib);
    v1::PutResponse response;
    refused = stub->Put(&context, put, &response);
    if (!refused.ok()) break;
    ++stored;
  }
  EXPECT_EQ(stored, 63);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(refused.error_message().find("--kv_max_bytes"), std::string::npos);
  const long full = ProcStatusKiB(launched.pid, "VmRSS");
  for (int i = 0; i < stored; ++i) {
    grpc::ClientContext context;
    v1::DeleteRequest del;
    del.set_key("k" + std::to_string(i));
    v1::DeleteResponse response;
    ASSERT_TRUE(stub->Delete(&context, del, &response).ok());
  }
  const long after = ProcStatusKiB(launched.pid, "VmRSS");
  std::fprintf(stderr, "launcher VmRSS: %ld KiB before, %ld KiB full, %ld KiB after deleting\n",
               before, full, after);
  if (kMemoryIsMeasurable) {
    EXPECT_GT(full - before, 50 * 1024);
    EXPECT_LT(after - before, 16 * 1024) << "deleted keys did not give their memory back";
  }
  kill(launched.pid, SIGTERM);
  EXPECT_EQ(RunToEnd(launched).code, 128 + SIGTERM);
}

TEST_F(KvFloodTest, CancelledWaitsDoNotCountAgainstTheBound) {
  const std::string metrics = FreePort();
  auto [launched, target] = StartJob({"--kv_max_waits", "16", "--metrics_port", metrics});
  ASSERT_FALSE(target.empty());
  auto stub =
      v1::KeyValue::NewStub(grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  // The cancels reach the store asynchronously (the client gives up by itself at its
  // deadline): the store's own count says when they all have.
  const auto pending_waits = [&] {
    double pending = -1;
    for (int i = 0; i < 1000 && pending != 0; ++i) {
      const std::string text = "\n" + HttpGet(metrics, "/metrics").second;
      const size_t at = text.find("\ngangrun_kv_pending_waits{");
      if (at == std::string::npos) continue;
      pending = std::stod(text.substr(text.find(' ', at) + 1));
    }
    return pending;
  };
  // 40 callers, one after the other, give up on a key that never comes: each wait is
  // forgotten as soon as the store hears of the cancel, so none is refused by the bound of 16
  // (a wait that stayed would fill it after 16). Every 8 callers the test waits for the store
  // to have heard of the cancels, so that a loaded machine's late cancels (ThreadSanitizer's,
  // with builds beside it) cannot add up to the bound.
  for (int i = 0; i < 40; ++i) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(20));
    v1::GetRequest get;
    get.set_key("never");
    get.set_wait_ms(-1);
    v1::GetResponse response;
    EXPECT_EQ(stub->Get(&context, get, &response).error_code(),
              grpc::StatusCode::DEADLINE_EXCEEDED);
    if (i % 8 == 7) ASSERT_EQ(pending_waits(), 0) << "cancelled waits were never forgotten";
  }
  // Had they stayed, the bound would have refused the later ones. 20 at once now: exactly 16
  // wait (whatever their order), 4 are refused naming the bound, and a put answers the 16.
  grpc::CompletionQueue queue;
  constexpr int kCalls = 20;
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<grpc::Status> statuses(kCalls);
  std::vector<v1::GetResponse> responses(kCalls);
  std::vector<std::unique_ptr<grpc::ClientAsyncResponseReader<v1::GetResponse>>> calls;
  for (int i = 0; i < kCalls; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    v1::GetRequest get;
    get.set_key("late");
    get.set_wait_ms(-1);
    calls.push_back(stub->AsyncGet(contexts.back().get(), get, &queue));
    calls.back()->Finish(&responses[i], &statuses[i], reinterpret_cast<void*>(i + 1));
  }
  auto next = [&queue]() {
    void* tag = nullptr;
    bool ok = false;
    EXPECT_TRUE(queue.Next(&tag, &ok));
    return reinterpret_cast<size_t>(tag) - 1;
  };
  for (int i = 0; i < kCalls - 16; ++i) {
    const size_t index = next();
    EXPECT_EQ(statuses[index].error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
    EXPECT_NE(statuses[index].error_message().find("pending waits"), std::string::npos);
  }
  {
    grpc::ClientContext context;
    v1::PutRequest put;
    put.set_key("late");
    put.set_value("here");
    v1::PutResponse response;
    ASSERT_TRUE(stub->Put(&context, put, &response).ok());
  }
  for (int i = 0; i < 16; ++i) {
    const size_t index = next();
    EXPECT_TRUE(statuses[index].ok()) << statuses[index].error_message();
    EXPECT_EQ(responses[index].value(), "here");
  }
  queue.Shutdown();
  kill(launched.pid, SIGTERM);
  EXPECT_EQ(RunToEnd(launched).code, 128 + SIGTERM);
}

}  // namespace
}  // namespace gangrun::testing
