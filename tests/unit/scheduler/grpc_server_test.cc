// The scheduler's gRPC server against real clients on 127.0.0.1: tokens, hostile sizes.

#include "scheduler/grpc_server.h"

#include <gtest/gtest.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <thread>

#include "common/clock.h"
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
  // for that method, that moment and that nonce.
  const std::string credential =
      rpc::CallCredential("s3cret", rpc::MethodPath<v1::KeyValue>("Put"), rpc::UnixMillis());
  EXPECT_EQ(credential.find("s3cret"), std::string::npos);
  auto plain = v1::KeyValue::NewStub(Channel(""));
  v1::PutRequest put;
  put.set_key("k");
  v1::PutResponse response;
  grpc::ClientContext first;
  first.AddMetadata("authorization", credential);
  EXPECT_TRUE(plain->Put(&first, put, &response).ok());
  grpc::ClientContext replayed;
  replayed.AddMetadata("authorization", credential);
  grpc::Status again = plain->Put(&replayed, put, &response);
  EXPECT_EQ(again.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_NE(again.error_message().find("replays"), std::string::npos) << again.error_message();
  // The same credential for another method proves nothing.
  grpc::ClientContext other;
  other.AddMetadata("authorization", credential);
  v1::DeleteResponse deleted;
  v1::DeleteRequest del;
  del.set_key("k");
  EXPECT_EQ(plain->Delete(&other, del, &deleted).error_code(), grpc::StatusCode::UNAUTHENTICATED);
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

TEST(CallAuthenticatorTest, ACredentialPassesOnceWithinTheClockWindowOnly) {
  CallAuthenticator auth("s3cret");
  const int64_t now = 1'000'000'000'000;
  const std::string method = "/gangrun.v1.Scheduler/GetStatus";
  const std::string good = CallCredential("s3cret", method, now);
  EXPECT_TRUE(auth.CheckCredential(good, method, now).ok());
  EXPECT_FALSE(auth.CheckCredential(good, method, now).ok());  // replayed
  EXPECT_FALSE(auth.CheckCredential(CallCredential("guess", method, now), method, now).ok());
  EXPECT_FALSE(auth.CheckCredential("Bearer s3cret", method, now).ok());
  EXPECT_FALSE(auth.CheckCredential("", method, now).ok());
  const int64_t window = std::chrono::milliseconds(kMaxClockSkew).count();
  EXPECT_TRUE(
      auth.CheckCredential(CallCredential("s3cret", method, now - window + 1000), method, now)
          .ok());
  const absl::Status old =
      auth.CheckCredential(CallCredential("s3cret", method, now - window - 1000), method, now);
  EXPECT_FALSE(old.ok());
  EXPECT_NE(old.message().find("clocks differ"), std::string::npos) << old;
  EXPECT_FALSE(
      auth.CheckCredential(CallCredential("s3cret", method, now + window + 1000), method, now)
          .ok());
  // Remembered nonces expire with the window: memory does not grow for ever.
  EXPECT_TRUE(auth.CheckCredential(CallCredential("s3cret", method, now + 3 * window), method,
                                   now + 3 * window)
                  .ok());
}

TEST(CallAuthenticatorTest, AServerWithoutATokenRefusesACallThatHasOne) {
  CallAuthenticator auth("");
  const std::string method = "/gangrun.v1.KeyValue/Put";
  EXPECT_TRUE(auth.CheckCredential("", method, UnixMillis()).ok());
  const absl::Status status =
      auth.CheckCredential(CallCredential("mine", method, UnixMillis()), method, UnixMillis());
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("token mismatch"), std::string::npos) << status;
}

}  // namespace
}  // namespace gangrun::rpc
