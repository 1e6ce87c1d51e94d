// The `gangrun logs` component (scheduler/logs.h) against a fake node directory: which ranks a
// stream reads, the window of reads ahead of a slow client, answers that are not the one
// asked for, nodes that go or do not answer, following, and the job's end. No Scheduler.

#include "scheduler/logs.h"

#include <gtest/gtest.h>

#include <tuple>

#include "tests/testing/fake_clock.h"
#include "tests/testing/fake_node_directory.h"

namespace gangrun::scheduler {
namespace {

using std::chrono::seconds;

class RecordingSink : public LogsSink {
 public:
  void Write(v1::LogChunk chunk) override { chunks.push_back(std::move(chunk)); }
  void Finish(absl::Status status) override {
    finished = true;
    this->status = std::move(status);
  }
  std::vector<v1::LogChunk> chunks;
  bool finished = false;
  absl::Status status;
};

class LogsPumpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    nodes_.AddNode(1, "h1", {0, 1});
    nodes_.AddNode(2, "h2", {2, 3});
  }
  v1::LogsRequest Request(std::vector<int> ranks, bool follow = false) {
    v1::LogsRequest request;
    for (int rank : ranks) request.add_ranks(rank);
    request.set_follow(follow);
    return request;
  }
  // The ReadLogs sent so far, as (node, rank, offset).
  std::vector<std::tuple<int, int, int64_t>> Reads() const {
    std::vector<std::tuple<int, int, int64_t>> reads;
    for (const auto& [node, command] : nodes_.sent) {
      if (command.has_read_log()) {
        reads.emplace_back(node, command.read_log().rank(), command.read_log().offset());
      }
    }
    return reads;
  }
  static v1::LogRead Answer(uint64_t stream, int rank, int64_t offset, const std::string& data,
                            bool at_end, bool running = false) {
    v1::LogRead read;
    read.set_request(stream);
    read.set_rank(rank);
    read.set_offset(offset);
    read.set_data(data);
    read.set_next_offset(offset < 0 ? static_cast<int64_t>(data.size()) : offset + data.size());
    read.set_at_end(at_end);
    read.set_running(running);
    return read;
  }

  testing::FakeClock clock_;
  testing::FakeNodeDirectory nodes_;
  std::shared_ptr<RecordingSink> sink_ = std::make_shared<RecordingSink>();
};

TEST_F(LogsPumpTest, AStreamReadsItsRanksAndEndsWhenEachLogHasEnded) {
  LogsPump logs(nodes_, clock_);
  auto id = logs.Open(Request({1, 2}), sink_);
  ASSERT_TRUE(id.ok()) << id.status();
  // One read per rank, each from its own node, from the start.
  EXPECT_EQ(Reads(), (std::vector<std::tuple<int, int, int64_t>>{{1, 1, -1}, {2, 2, -1}}));
  logs.OnLogRead(2, Answer(*id, 2, -1, "two\n", true));
  ASSERT_EQ(sink_->chunks.size(), 1u);
  EXPECT_EQ(sink_->chunks[0].data(), "two\n");
  EXPECT_EQ(sink_->chunks[0].host(), "h2");
  // The next chunk waits until the client has taken this one.
  logs.OnLogRead(1, Answer(*id, 1, -1, "one\n", true));
  EXPECT_EQ(sink_->chunks.size(), 1u);
  for (int i = 0; i < 3; ++i) logs.Written(*id);
  ASSERT_EQ(sink_->chunks.size(), 4u);  // rank 2's end, rank 1's data and end
  EXPECT_TRUE(sink_->chunks[1].end());
  EXPECT_EQ(sink_->chunks[2].data(), "one\n");
  logs.Written(*id);
  EXPECT_TRUE(sink_->finished);
  EXPECT_TRUE(sink_->status.ok()) << sink_->status;
}

TEST_F(LogsPumpTest, ReadsAheadOfASlowClientStayWithinTheWindow) {
  for (int node = 3; node < 10; ++node) nodes_.AddNode(node, "h", {node * 2, node * 2 + 1});
  LogsPump logs(nodes_, clock_);
  auto id = logs.Open(Request({}), sink_);
  ASSERT_TRUE(id.ok());
  const size_t window = LogsPump::kLogsInFlight;
  EXPECT_EQ(Reads().size(), window);
  // An answer handed to the client frees its place in the window (a read goes out at the
  // stream's next turn)...
  auto answer = [&](size_t read) {
    const auto [node, rank, offset] = Reads()[read];
    logs.OnLogRead(node, Answer(*id, rank, offset, "x", false, true));
  };
  const auto turn = std::chrono::milliseconds(250);
  answer(0);
  EXPECT_EQ(sink_->chunks.size(), 1u);
  clock_.Advance(turn);
  EXPECT_EQ(Reads().size(), window + 1);
  // ...but one the client has not taken keeps its place until it has.
  answer(1);
  clock_.Advance(turn);
  EXPECT_EQ(sink_->chunks.size(), 1u);
  EXPECT_EQ(Reads().size(), window + 1);
  logs.Written(*id);
  EXPECT_EQ(sink_->chunks.size(), 2u);
  clock_.Advance(turn);
  EXPECT_EQ(Reads().size(), window + 2);
}

TEST_F(LogsPumpTest, OnlyTheAnswerToTheReadThatIsOutCounts) {
  LogsPump logs(nodes_, clock_);
  auto id = logs.Open(Request({0}), sink_);
  ASSERT_TRUE(id.ok());
  logs.OnLogRead(2, Answer(*id, 0, -1, "from the wrong node", true));
  logs.OnLogRead(1, Answer(*id, 0, 99, "at another offset", true));
  logs.OnLogRead(1, Answer(*id + 1, 0, -1, "of another stream", true));
  v1::LogRead huge = Answer(*id, 0, -1, std::string(3 * LogsPump::kLogPieceBytes, 'x'), true);
  logs.OnLogRead(1, huge);
  EXPECT_TRUE(sink_->chunks.empty());
  logs.OnLogRead(1, Answer(*id, 0, -1, "zero", true));
  ASSERT_EQ(sink_->chunks.size(), 1u);
  EXPECT_EQ(sink_->chunks[0].data(), "zero");
}

TEST_F(LogsPumpTest, ARankWhoseNodeGoesOrNeverAnswersEndsNamingWhy) {
  LogsPump logs(nodes_, clock_);
  auto id = logs.Open(Request({0, 2}), sink_);
  ASSERT_TRUE(id.ok());
  nodes_.RemoveNode(2);
  clock_.Advance(seconds(1));
  ASSERT_FALSE(sink_->chunks.empty());
  EXPECT_EQ(sink_->chunks[0].rank(), 2);
  EXPECT_EQ(sink_->chunks[0].error(), "its node is gone");
  logs.Written(*id);
  // Node 1 never answers: asked again every 5 s, 5 times, then the rank ends.
  clock_.Advance(seconds(40));
  EXPECT_EQ(Reads().size(), 2u + 5u);
  ASSERT_EQ(sink_->chunks.size(), 2u);
  EXPECT_EQ(sink_->chunks[1].error(), "its node did not answer");
  logs.Written(*id);
  EXPECT_TRUE(sink_->finished);
}

TEST_F(LogsPumpTest, AFollowedRankIsReadAgainUntilItExitsOrTheJobEnds) {
  LogsPump logs(nodes_, clock_);
  auto id = logs.Open(Request({0}, true), sink_);
  ASSERT_TRUE(id.ok());
  logs.OnLogRead(1, Answer(*id, 0, -1, "a", true, true));
  logs.Written(*id);
  clock_.Advance(std::chrono::milliseconds(500));
  ASSERT_EQ(Reads().size(), 2u);
  EXPECT_EQ(std::get<2>(Reads()[1]), 1);  // from where the last piece ended
  // The rank exited: read at once; the job ends: nothing is followed any more.
  logs.OnLogRead(1, Answer(*id, 0, 1, "", true, true));
  logs.ReadRestOf(0);
  EXPECT_EQ(Reads().size(), 3u);
  logs.EndFollowing();
  logs.OnLogRead(1, Answer(*id, 0, 1, "b", true, true));
  logs.Written(*id);
  logs.Written(*id);
  EXPECT_TRUE(sink_->finished);
}

TEST_F(LogsPumpTest, RequestsItCannotServeAreRefusedAndOpenStreamsEndWithIt) {
  {
    LogsPump logs(nodes_, clock_);
    EXPECT_EQ(logs.Open(Request({7}), sink_).status().code(), absl::StatusCode::kInvalidArgument);
    std::vector<std::shared_ptr<RecordingSink>> sinks;
    for (int i = 0; i < LogsPump::kMaxLogStreams; ++i) {
      sinks.push_back(std::make_shared<RecordingSink>());
      ASSERT_TRUE(logs.Open(Request({0}), sinks.back()).ok());
    }
    EXPECT_EQ(logs.Open(Request({0}), sink_).status().code(), absl::StatusCode::kUnavailable);
    logs.Close(1);
    ASSERT_TRUE(logs.Open(Request({0}), sink_).ok());
  }
  EXPECT_TRUE(sink_->finished);
  EXPECT_EQ(sink_->status.code(), absl::StatusCode::kUnavailable);
  testing::FakeNodeDirectory empty;
  empty.job_state = JobState::kForming;
  LogsPump logs(empty, clock_);
  auto refused = logs.Open(Request({}), sink_);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("the job is forming"), std::string::npos)
      << refused.status();
}

}  // namespace
}  // namespace gangrun::scheduler
