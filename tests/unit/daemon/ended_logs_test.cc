// An ended job's logs on its agents (daemon/ended_logs.h, agent/job_logs.h): the agents' files
// found by rank, the reader asking every agent first and opening its streams once they
// answered or its wait is over, and the one line that says why a rank has no log. No daemon,
// no agent process: a fake clock and the commands the reader sends.

#include "daemon/ended_logs.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/job_logs.h"
#include "tests/testing/fake_clock.h"
#include "tests/testing/test_util.h"

namespace gangrun::daemon {
namespace {

class Sink : public scheduler::LogsSink {
 public:
  void Write(v1::LogChunk chunk) override { chunks.push_back(std::move(chunk)); }
  void Finish(absl::Status done) override {
    finished = true;
    status = std::move(done);
  }
  std::vector<v1::LogChunk> chunks;
  bool finished = false;
  absl::Status status;
};

TEST(JobLogsTest, TheRanksLogsAreTheFilesNamedByRankAndNothingElse) {
  testing::TempDir dir;
  for (const char* name : {"worker_0.log", "worker_12.log", "worker_12.filtered_stdout.log",
                           "scheduler.log", "health_check.log", "node-a_3.log", "worker_x.log"}) {
    std::ofstream(dir.File(name)) << "x\n";
  }
  auto ranks = agent::FindRankLogs(dir.path());
  ASSERT_TRUE(ranks.ok()) << ranks.status();
  EXPECT_EQ(*ranks, (std::map<int, std::string>{{0, dir.File("worker_0.log")},
                                                {3, dir.File("node-a_3.log")},
                                                {12, dir.File("worker_12.log")}}));
  EXPECT_EQ(agent::FindRankLogs(dir.File("nosuch")).status().code(), absl::StatusCode::kNotFound);

  v1::JobLogPlace place;
  place.set_job_id("ab12-3");
  place.set_cwd("/home/u/run");
  EXPECT_EQ(*agent::JobLogDir(place, "/var/log/gangrun"), "/var/log/gangrun/ab12-3");
  EXPECT_EQ(*agent::JobLogDir(place, "gangrun-logs"), "/home/u/run/gangrun-logs/ab12-3")
      << "a relative log root is the launcher's, which ran in the job's directory";
  place.set_log_dir("logs");
  EXPECT_EQ(*agent::JobLogDir(place, "/var/log/gangrun"), "/home/u/run/logs");
  place.clear_log_dir();
  for (const char* bad : {"..", "a/../../etc", ""}) {
    place.set_job_id(bad);
    EXPECT_FALSE(agent::JobLogDir(place, "/var/log/gangrun").ok()) << bad;
  }
}

// --log_retention_days: a job's directory whose newest file is older than the bound goes,
// unless the job runs here; links and plain files are left alone.
TEST(JobLogsTest, RetentionRemovesOnlyOldJobDirectoriesOfJobsNotRunning) {
  testing::TempDir root;
  const auto aged = [](const std::string& path, int days) {
    const timespec at{time(nullptr) - days * 86400, 0};
    const timespec times[2] = {at, at};
    ASSERT_EQ(utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW), 0) << path;
  };
  for (const char* job : {"old", "new", "running", "target"}) {
    ASSERT_EQ(mkdir(root.File(job).c_str(), 0700), 0);
    std::ofstream(root.File(job) + "/worker_0.log") << "x\n";
  }
  for (const char* job : {"old", "running", "target"}) {
    aged(root.File(job) + "/worker_0.log", 10);
    aged(root.File(job), 10);
  }
  aged(root.File("new"), 10);  // an old directory with a fresh log: still written to lately
  ASSERT_EQ(symlink(root.File("target").c_str(), root.File("link").c_str()), 0);
  std::ofstream(root.File("plain")) << "x\n";
  aged(root.File("plain"), 10);

  std::string error;
  const auto removed = agent::PruneJobLogs(
      root.path(), std::chrono::system_clock::now() - std::chrono::hours(24 * 5),
      {"running", "target"}, &error);
  EXPECT_EQ(removed, std::vector<std::string>{"old"});
  EXPECT_EQ(error, "");
  struct stat st {};
  EXPECT_NE(stat(root.File("old").c_str(), &st), 0);
  for (const char* kept : {"new", "running", "link", "plain", "target/worker_0.log"}) {
    EXPECT_EQ(lstat(root.File(kept).c_str(), &st), 0) << kept;
  }
}

// The agent's answers: the ranks it holds, and a piece of one; a link, or (with --run_as) a file
// the job's user does not own, is refused.
TEST(JobLogsTest, TheAgentReadsOnlyTheJobUsersOwnFiles) {
  testing::TempDir root;
  ASSERT_EQ(mkdir(root.File("j-2").c_str(), 0700), 0);
  std::ofstream(root.File("j-2/worker_0.log")) << "zero\n";
  std::ofstream(root.File("secret")) << "not the job's\n";
  ASSERT_EQ(symlink(root.File("secret").c_str(), root.File("j-2/worker_1.log").c_str()), 0);
  v1::ReadJobLog read;
  read.mutable_place()->set_job_id("j-2");
  read.mutable_place()->set_reader(3);
  read.mutable_read()->set_offset(-1);
  read.mutable_read()->set_max_bytes(1024);

  agent::JobLogServer mine(root.path(), std::nullopt);
  const v1::JobLogsFound found = mine.Find(read.place());
  EXPECT_EQ(found.reader(), 3u);
  EXPECT_EQ(std::vector<int>(found.ranks().begin(), found.ranks().end()), (std::vector<int>{0, 1}));
  v1::JobLogRead piece = mine.Read(read);
  EXPECT_EQ(piece.read().data(), "zero\n");
  EXPECT_TRUE(piece.read().at_end());
  EXPECT_FALSE(piece.read().running());
  read.mutable_read()->set_rank(1);
  piece = mine.Read(read);
  EXPECT_EQ(piece.read().data(), "");
  EXPECT_NE(piece.read().error().find("is not a file of the job's user"), std::string::npos);
  read.mutable_read()->set_rank(2);
  EXPECT_EQ(mine.Read(read).read().error(), "this agent has no log of rank 2");

  agent::JobLogServer theirs(root.path(), geteuid() + 1);  // another user's job
  read.mutable_read()->set_rank(0);
  piece = theirs.Read(read);
  EXPECT_EQ(piece.read().data(), "");
  EXPECT_NE(piece.read().error().find("is not a file of the job's user"), std::string::npos);
}

class EndedJobLogsTest : public ::testing::Test {
 protected:
  std::unique_ptr<EndedJobLogs> Make(std::vector<EndedJobLogs::Agent> agents,
                                     std::vector<std::string> missing = {}) {
    v1::JobLogPlace place;
    place.set_job_id("j-1");
    place.set_reader(7);
    return std::make_unique<EndedJobLogs>(
        clock, place, /*world_size=*/4, std::move(agents), std::move(missing),
        EndedJobLogs::Daemon{
            [this](int agent, v1::AgentCommand command) { sent[agent].push_back(command); },
            [this](int agent) { return connected.count(agent) > 0; }});
  }
  static v1::JobLogsFound Found(std::vector<int> ranks, const std::string& error = "") {
    v1::JobLogsFound found;
    found.set_reader(7);
    found.set_job_id("j-1");
    for (int rank : ranks) found.add_ranks(rank);
    found.set_error(error);
    return found;
  }
  static v1::LogsRequest Ranks(std::vector<int> ranks) {
    v1::LogsRequest request;
    for (int rank : ranks) request.add_ranks(rank);
    return request;
  }

  testing::FakeClock clock;
  std::map<int, std::vector<v1::AgentCommand>> sent;
  std::set<int> connected = {1, 2};
};

TEST_F(EndedJobLogsTest, EveryAgentIsAskedFirstAndTheStreamsOpenOnceTheyAnswered) {
  auto logs = Make({{1, "agent-a"}, {2, "agent-b"}});
  ASSERT_EQ(sent[1].size(), 1u);
  EXPECT_EQ(sent[1][0].find_logs().place().job_id(), "j-1");
  EXPECT_EQ(sent[1][0].find_logs().place().reader(), 7u);
  auto sink = std::make_shared<Sink>();
  ASSERT_TRUE(logs->OpenLogs(Ranks({2}), sink).ok());
  logs->OnFound(1, Found({0, 1}));
  EXPECT_EQ(sent[2].size(), 1u) << "nothing is read before every agent answered";
  logs->OnFound(2, Found({1, 2, 3, 9}));  // rank 1: agent-a named it first; 9: not the job's
  ASSERT_EQ(sent[2].size(), 2u);
  const v1::ReadJobLog& read = sent[2][1].read_log();
  EXPECT_EQ(read.place().job_id(), "j-1");
  EXPECT_EQ(read.place().reader(), 7u);
  EXPECT_EQ(read.read().rank(), 2);

  v1::LogRead piece;
  piece.set_request(read.read().request());
  piece.set_rank(2);
  piece.set_offset(read.read().offset());
  piece.set_data("hello\n");
  piece.set_next_offset(6);
  piece.set_at_end(true);
  logs->OnLogRead(2, piece);
  ASSERT_FALSE(sink->chunks.empty());
  EXPECT_EQ(sink->chunks[0].host(), "agent-b");
  EXPECT_EQ(sink->chunks[0].data(), "hello\n");
}

TEST_F(EndedJobLogsTest, AnAgentThatDoesNotAnswerIsPassedOverAndARanksMissingLogIsSaid) {
  auto logs = Make({{1, "agent-a"}, {2, "agent-b"}}, {"agent-c"});
  auto sink = std::make_shared<Sink>();
  ASSERT_TRUE(logs->OpenLogs(Ranks({3}), sink).ok());
  logs->OnFound(1, Found({}, "gangrun-logs/j-1: No such file or directory"));
  EXPECT_FALSE(sink->finished);
  clock.Advance(EndedJobLogs::kFindTimeout);  // agent-b never answers
  ASSERT_TRUE(sink->finished);
  EXPECT_EQ(sink->status.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(std::string(sink->status.message()),
            "no agent holds the log of rank 3 of job j-1; asked: agent-a (gangrun-logs/j-1: No "
            "such file or directory), agent-b; not connected: agent-c");
  EXPECT_EQ(std::string(logs->OpenLogs(Ranks({4}), std::make_shared<Sink>()).status().message()),
            "there is no rank 4 in job j-1 (ranks 0-3)");
}

TEST_F(EndedJobLogsTest, StreamsStillWaitingAreFinishedWhenTheReaderGoes) {
  auto logs = Make({{1, "agent-a"}});
  auto sink = std::make_shared<Sink>();
  ASSERT_TRUE(logs->OpenLogs(Ranks({}), sink).ok());
  logs.reset();
  EXPECT_TRUE(sink->finished);
  EXPECT_EQ(sink->status.code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace gangrun::daemon
