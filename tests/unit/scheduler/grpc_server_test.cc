// The scheduler's gRPC server against real clients on 127.0.0.1: tokens, hostile sizes.

#include "scheduler/grpc_server.h"

#include <gtest/gtest.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <future>
#include <thread>

#include "common/clock.h"
#include "gangrun/v1/call.grpc.pb.h"
#include "gangrun/v1/kv.grpc.pb.h"
#include "gangrun/v1/session.grpc.pb.h"
#include "node/grpc_link.h"
#include "rpc/call_auth.h"
#include "tests/testing/scheduler_server_fixture.h"
#include "tests/testing/session_client.h"

namespace gangrun::scheduler {
namespace {

class GrpcServerTest : public testing::SchedulerServerFixture {
 protected:
  void SetUp() override {
    SchedulerServerFixture::SetUp();
    auto channel = Channel("s3cret");
    kv_ = v1::KeyValue::NewStub(channel);
    status_ = v1::Scheduler::NewStub(channel);
  }
  // A channel whose calls prove `token` ("" = none).
  std::shared_ptr<grpc::Channel> Channel(const std::string& token) {
    return rpc::MakeChannel(Target(), nullptr, token, "", std::chrono::seconds(30));
  }

  std::unique_ptr<v1::KeyValue::Stub> kv_;       // with the token
  std::unique_ptr<v1::Scheduler::Stub> status_;  // with the token
};

TEST_F(GrpcServerTest, CallsWithoutTheTokenAreRefused) {
  v1::PutRequest put;
  put.set_key("k");
  put.set_value("v");
  v1::PutResponse response;
  grpc::ClientContext none;
  EXPECT_EQ(v1::KeyValue::NewStub(Channel(""))->Put(&none, put, &response).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  grpc::ClientContext wrong;
  EXPECT_EQ(v1::KeyValue::NewStub(Channel("guess"))->Put(&wrong, put, &response).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  grpc::ClientContext right;
  EXPECT_TRUE(kv_->Put(&right, put, &response).ok());
  grpc::ClientContext status_context;
  v1::GetStatusResponse status;
  EXPECT_EQ(
      v1::Scheduler::NewStub(Channel(""))->GetStatus(&status_context, {}, &status).error_code(),
      grpc::StatusCode::UNAUTHENTICATED);
}

TEST_F(GrpcServerTest, ARecordedCallIsRefusedAndTheTokenIsNotInIt) {
  // What a wire tap sees of a call: its credential, which is not the token and proves it only
  // for this server's challenge, that call number, that method and that request.
  grpc::ClientContext asking;
  v1::ChallengeReply challenge;
  ASSERT_TRUE(v1::CallAuth::NewStub(Channel(""))->Challenge(&asking, {}, &challenge).ok());
  v1::PutRequest put;
  put.set_key("k");
  put.set_value("v");
  const std::string put_bytes = rpc::RequestBytes(put);
  const std::string credential = rpc::CallCredential(
      "s3cret", challenge.challenge(), 1, rpc::MethodPath<v1::KeyValue>("Put"), &put_bytes);
  EXPECT_EQ(credential.find("s3cret"), std::string::npos);
  auto plain = v1::KeyValue::NewStub(Channel(""));
  v1::PutResponse response;
  grpc::ClientContext first;
  first.AddMetadata("authorization", credential);
  EXPECT_TRUE(plain->Put(&first, put, &response).ok());
  grpc::ClientContext replayed;
  replayed.AddMetadata("authorization", credential);
  grpc::Status again = plain->Put(&replayed, put, &response);
  EXPECT_EQ(again.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_NE(again.error_message().find("replays"), std::string::npos) << again.error_message();
  // The same credential with another request body proves nothing.
  v1::PutRequest forged = put;
  forged.set_value("attacker");
  grpc::ClientContext body;
  body.AddMetadata("authorization", credential);
  grpc::Status other_body = plain->Put(&body, forged, &response);
  EXPECT_EQ(other_body.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_NE(other_body.error_message().find("wrong or missing token"), std::string::npos)
      << other_body.error_message();
  // Nor for another method.
  grpc::ClientContext other;
  other.AddMetadata("authorization", credential);
  v1::DeleteResponse deleted;
  v1::DeleteRequest del;
  del.set_key("k");
  EXPECT_EQ(plain->Delete(&other, del, &deleted).error_code(), grpc::StatusCode::UNAUTHENTICATED);
}

// Two jobs with the same token (a daemon's jobs, or launchers given one token file): a call
// made for one is refused by the other, whatever its body.
TEST_F(GrpcServerTest, ACallMadeForOneJobIsRefusedByAnotherWithTheSameToken) {
  scheduler::Scheduler::Options options;
  options.world_size = 3;
  options.run_id = "job-b";
  scheduler::Scheduler other_scheduler(clock_, options);
  scheduler::KvStore other_store(clock_);
  auto other = scheduler::SchedulerServer::Start(io_, other_scheduler, other_store,
                                                 {"127.0.0.1:0", kToken, nullptr, "job-b", 64});
  ASSERT_TRUE(other.ok()) << other.status();
  grpc::ClientContext asking;
  v1::ChallengeReply challenge;
  ASSERT_TRUE(v1::CallAuth::NewStub(Channel(""))->Challenge(&asking, {}, &challenge).ok());
  v1::StopJobRequest stop;
  stop.set_reason("stopped by its owner");
  const std::string stop_bytes = rpc::RequestBytes(stop);
  const std::string credential = rpc::CallCredential(
      kToken, challenge.challenge(), 1, rpc::MethodPath<v1::Scheduler>("Stop"), &stop_bytes);
  auto other_channel = rpc::MakeChannel("127.0.0.1:" + std::to_string((*other)->port()), nullptr,
                                        "", "", std::chrono::seconds(30));
  for (const char* reason : {"stopped by its owner", "attacker"}) {
    v1::StopJobRequest replayed;
    replayed.set_reason(reason);
    replayed.set_signal(9);
    grpc::ClientContext context;
    context.AddMetadata("authorization", credential);
    v1::StopJobResponse response;
    const grpc::Status refused =
        v1::Scheduler::NewStub(other_channel)->Stop(&context, replayed, &response);
    EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAUTHENTICATED) << reason;
  }
  // The other job's own client (its channel asks it for a challenge) is served.
  grpc::ClientContext own;
  v1::GetStatusResponse status;
  EXPECT_TRUE(
      v1::Scheduler::NewStub(rpc::MakeChannel("127.0.0.1:" + std::to_string((*other)->port()),
                                              nullptr, kToken, "", std::chrono::seconds(30)))
          ->GetStatus(&own, {}, &status)
          .ok());
  EXPECT_EQ(status.world_size(), 3);  // the other job's
  std::promise<void> stopped;
  boost::asio::post(io_, [&] {
    other_store.CancelAll();
    (*other)->ShutdownAsync(io_, [&] { stopped.set_value(); });
  });
  stopped.get_future().wait();
}

TEST_F(GrpcServerTest, HugeMessagesAreRefusedWithoutHarm) {
  v1::PutRequest huge;
  huge.set_key("k");
  huge.set_value(std::string(9 << 20, 'x'));
  v1::PutResponse response;
  grpc::ClientContext context;
  EXPECT_EQ(kv_->Put(&context, huge, &response).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  v1::GetStatusResponse status;
  grpc::ClientContext after;
  ASSERT_TRUE(status_->GetStatus(&after, {}, &status).ok());
  EXPECT_EQ(status.phase(), v1::JOB_PHASE_FORMING);
  EXPECT_EQ(status.world_size(), 2);
}

TEST_F(GrpcServerTest, SessionWithoutTheTokenEndsUnauthenticated) {
  grpc::ClientContext context;
  auto stream = v1::Scheduler::NewStub(Channel(""))->Session(&context);
  v1::NodeEvent join;
  join.mutable_join()->set_node_name("intruder");
  join.mutable_join()->set_local_worker_num(1);
  stream->Write(join);
  v1::NodeCommand command;
  EXPECT_FALSE(stream->Read(&command));
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
}

TEST_F(GrpcServerTest, EventsBeforeJoinAndSecondJoinsAreRefused) {
  grpc::ClientContext context;
  auto stream = status_->Session(&context);
  v1::NodeEvent start;
  start.mutable_start();
  ASSERT_TRUE(stream->Write(start));
  v1::NodeCommand command;
  ASSERT_TRUE(stream->Read(&command));
  ASSERT_TRUE(command.has_opened()) << command.DebugString();
  EXPECT_NE(command.opened().session(), 0u);
  EXPECT_EQ(command.opened().key().size(), 32u);
  v1::NodeEvent early;
  early.set_seq(1);
  early.set_generation(7);
  early.mutable_worker_exited()->set_rank(0);
  early.mutable_worker_exited()->mutable_exit()->set_exit_code(1);
  ASSERT_TRUE(stream->Write(early));  // ignored: not a member
  v1::NodeEvent join = testing::TestJoin(0);
  join.set_seq(2);
  ASSERT_TRUE(stream->Write(join));
  join.set_seq(3);
  ASSERT_TRUE(stream->Write(join));  // a second join on the same stream
  ASSERT_TRUE(stream->Read(&command));
  EXPECT_TRUE(command.has_rejected());
  EXPECT_NE(command.rejected().reason().find("already"), std::string::npos)
      << command.rejected().reason();
  stream->WritesDone();
  while (stream->Read(&command)) {
  }
  stream->Finish();
}

TEST_F(GrpcServerTest, AStreamThatDoesNotStartASessionIsRefused) {
  grpc::ClientContext context;
  auto stream = status_->Session(&context);
  ASSERT_TRUE(stream->Write(testing::TestJoin(0)));
  v1::NodeCommand command;
  ASSERT_TRUE(stream->Read(&command));
  EXPECT_TRUE(command.has_refused()) << command.DebugString();
  while (stream->Read(&command)) {
  }
  stream->Finish();
  // Nor does a resume of a session that is not there, or one with the wrong key.
  grpc::ClientContext other;
  auto resume = status_->Session(&other);
  v1::NodeEvent start;
  start.mutable_start()->set_session(42);
  start.mutable_start()->set_key("guess");
  ASSERT_TRUE(resume->Write(start));
  ASSERT_TRUE(resume->Read(&command));
  ASSERT_TRUE(command.has_refused()) << command.DebugString();
  EXPECT_TRUE(command.refused().unknown_session());
  while (resume->Read(&command)) {
  }
  resume->Finish();
}

}  // namespace
}  // namespace gangrun::scheduler

namespace gangrun::rpc {
namespace {

using std::chrono::seconds;
using std::chrono::steady_clock;

constexpr std::string_view kMethod = "/gangrun.v1.Scheduler/Stop";

std::string Credential(std::string_view token, const std::string& challenge, uint64_t number,
                       const std::string& request = "body") {
  return CallCredential(token, challenge, number, kMethod, &request);
}

TEST(CallAuthenticatorTest, ACallPassesOnceOnTheServerItWasMadeFor) {
  CallAuthenticator auth("s3cret");
  const auto now = steady_clock::now();
  const std::string challenge = auth.NewChallenge(now);
  const std::string body = "body";
  EXPECT_TRUE(auth.CheckCredential(Credential("s3cret", challenge, 1), kMethod, &body, now).ok());
  EXPECT_FALSE(auth.CheckCredential(Credential("s3cret", challenge, 1), kMethod, &body, now).ok());
  EXPECT_FALSE(auth.CheckCredential(Credential("guess", challenge, 2), kMethod, &body, now).ok());
  EXPECT_FALSE(auth.CheckCredential("Bearer s3cret", kMethod, &body, now).ok());
  EXPECT_FALSE(auth.CheckCredential("", kMethod, &body, now).ok());
  // A stream's credential (no request) is not a unary call's, and the other way round.
  EXPECT_FALSE(
      auth.CheckCredential(Credential("s3cret", challenge, 3), kMethod, nullptr, now).ok());
  // Calls of one challenge may come out of order, each once.
  for (uint64_t number : {7, 5, 6, 4}) {
    EXPECT_TRUE(
        auth.CheckCredential(Credential("s3cret", challenge, number), kMethod, &body, now).ok())
        << number;
  }
  EXPECT_FALSE(auth.CheckCredential(Credential("s3cret", challenge, 5), kMethod, &body, now).ok());
  // Another server with the same token (another job, the daemon's successor) refuses it.
  CallAuthenticator other("s3cret");
  const absl::Status elsewhere =
      other.CheckCredential(Credential("s3cret", challenge, 8), kMethod, &body, now);
  EXPECT_EQ(elsewhere.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_NE(elsewhere.message().find("another server"), std::string::npos) << elsewhere;
  // A challenge is good for kChallengeLife.
  const absl::Status late = auth.CheckCredential(Credential("s3cret", challenge, 9), kMethod, &body,
                                                 now + kChallengeLife + seconds(1));
  EXPECT_EQ(late.code(), absl::StatusCode::kUnavailable) << late;
}

// One token holder spending challenges as fast as it can: memory stays bounded, and another
// caller's fresh challenge still passes.
TEST(CallAuthenticatorTest, ChallengesInUseAreBoundedAndNobodyIsLockedOut) {
  CallAuthenticator auth("s3cret");
  const auto now = steady_clock::now();
  const std::string body = "body";
  const std::string first = auth.NewChallenge(now);
  ASSERT_TRUE(auth.CheckCredential(Credential("s3cret", first, 1), kMethod, &body, now).ok());
  for (size_t i = 0; i < kMaxChallengesInUse + 100; ++i) {
    const std::string challenge = auth.NewChallenge(now);
    ASSERT_TRUE(auth.CheckCredential(Credential("s3cret", challenge, 1), kMethod, &body, now).ok());
  }
  EXPECT_LE(auth.ChallengesInUse(), kMaxChallengesInUse);
  // The oldest was forgotten: its next call is told to ask again, and never passes as new.
  const absl::Status forgotten =
      auth.CheckCredential(Credential("s3cret", first, 2), kMethod, &body, now);
  EXPECT_EQ(forgotten.code(), absl::StatusCode::kUnavailable) << forgotten;
  const std::string fresh = auth.NewChallenge(now);
  EXPECT_TRUE(auth.CheckCredential(Credential("s3cret", fresh, 1), kMethod, &body, now).ok());
}

TEST(CallAuthenticatorTest, AServerWithoutATokenRefusesACallThatHasOne) {
  CallAuthenticator auth("");
  const auto now = steady_clock::now();
  const std::string body = "body";
  EXPECT_TRUE(auth.CheckCredential("", kMethod, &body, now).ok());
  const absl::Status status =
      auth.CheckCredential(Credential("mine", auth.NewChallenge(now), 1), kMethod, &body, now);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("token mismatch"), std::string::npos) << status;
}

}  // namespace
}  // namespace gangrun::rpc
