// The job's torch store: the protocol decoder alone, then the store on 127.0.0.1 against real
// torch 1.13 clients (Debian's python3-torch) and against raw bytes of torch 2.x's dialect and
// of hostile clients.

#include "scheduler/torch_store.h"

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <cerrno>
#include <cstring>
#include <functional>
#include <future>
#include <thread>

#include "common/clock.h"
#include "scheduler/torch_store_protocol.h"
#include "tests/testing/test_util.h"

namespace gangrun::scheduler {
namespace {

using torch_store::Decoded;
using torch_store::Dialect;
using torch_store::Op;

std::string U64(uint64_t value) {
  std::string out(8, '\0');
  std::memcpy(out.data(), &value, 8);
  return out;
}
std::string Str(const std::string& text) { return U64(text.size()) + text; }
std::string Validate() {
  std::string out(1, '\0');
  out.append(4, '\0');
  const uint32_t magic = torch_store::kValidationMagic;
  std::memcpy(out.data() + 1, &magic, 4);
  return out;
}

TEST(TorchStoreProtocolTest, ATorch1ConnectionHasNoOpeningAndItsOwnQueryTypes) {
  Dialect dialect = Dialect::kUnknown;
  const std::string add = std::string(1, '\3') + Str("init/") + U64(1);
  Decoded decoded = torch_store::Decode(add, dialect);
  ASSERT_EQ(decoded.kind, Decoded::Kind::kQuery);
  EXPECT_EQ(dialect, Dialect::kTorch1);
  EXPECT_EQ(decoded.query.op, Op::kAdd);
  EXPECT_EQ(decoded.query.keys[0], "init/");
  EXPECT_EQ(decoded.query.delta, 1);
  EXPECT_EQ(decoded.consumed, add.size());
  // 1.x's 1 is COMPARE_SET (2.x's SET); its 8 DELETE_KEY.
  decoded = torch_store::Decode(std::string(1, '\1') + Str("k") + Str("") + Str("v"), dialect);
  ASSERT_EQ(decoded.kind, Decoded::Kind::kQuery);
  EXPECT_EQ(decoded.query.op, Op::kCompareSet);
  EXPECT_EQ(decoded.query.values, (std::vector<std::string>{"", "v"}));
  decoded = torch_store::Decode(std::string(1, '\x09'), dialect);
  EXPECT_EQ(decoded.kind, Decoded::Kind::kRefused);
  EXPECT_EQ(decoded.refusal, "unknown query type 9 (torch 1.x protocol)");
}

TEST(TorchStoreProtocolTest, ATorch2ConnectionOpensWithTheMagicAndThenSpeaksItsOwnTypes) {
  Dialect dialect = Dialect::kUnknown;
  std::string bytes = Validate() + std::string(1, '\1') + Str("key") + Str("value");
  Decoded decoded = torch_store::Decode(bytes, dialect);
  ASSERT_EQ(decoded.kind, Decoded::Kind::kQuery);
  EXPECT_EQ(dialect, Dialect::kTorch2);
  EXPECT_EQ(decoded.query.op, Op::kSet);
  EXPECT_EQ(decoded.consumed, bytes.size());
  std::string ping(1, '\x0d');
  ping.append("\x78\x56\x34\x12", 4);
  decoded = torch_store::Decode(ping, dialect);
  ASSERT_EQ(decoded.kind, Decoded::Kind::kQuery);
  EXPECT_EQ(decoded.query.op, Op::kPing);
  EXPECT_EQ(decoded.query.nonce, 0x12345678u);
  decoded = torch_store::Decode(
      std::string(1, '\x0b') + U64(2) + Str("a") + Str("1") + Str("b") + Str("2"), dialect);
  ASSERT_EQ(decoded.kind, Decoded::Kind::kQuery);
  EXPECT_EQ(decoded.query.op, Op::kMultiSet);
  EXPECT_EQ(decoded.query.keys, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(decoded.query.values, (std::vector<std::string>{"1", "2"}));
  // A second opening is not a query.
  EXPECT_EQ(torch_store::Decode(Validate(), dialect).kind, Decoded::Kind::kRefused);
}

TEST(TorchStoreProtocolTest, APartialQueryNeedsMoreAndConsumesNothingButAnOpening) {
  const std::string whole = Validate() + std::string(1, '\6') + U64(2) + Str("a") + Str("bb");
  for (size_t n = 0; n < whole.size(); ++n) {
    Dialect dialect = Dialect::kUnknown;
    Decoded decoded = torch_store::Decode(whole.substr(0, n), dialect);
    ASSERT_EQ(decoded.kind, Decoded::Kind::kNeedMore) << n;
    EXPECT_EQ(decoded.consumed, n >= 5 ? 5u : 0u) << n;
  }
  Dialect dialect = Dialect::kUnknown;
  Decoded decoded = torch_store::Decode(whole, dialect);
  ASSERT_EQ(decoded.kind, Decoded::Kind::kQuery);
  EXPECT_EQ(decoded.query.op, Op::kWait);
  EXPECT_EQ(decoded.query.keys, (std::vector<std::string>{"a", "bb"}));
  // A large value's length says how much the query needs: its store decodes it again only
  // then, not once per piece.
  const std::string set = std::string(1, '\1') + Str("k") + U64(100000) + "partial";
  decoded = torch_store::Decode(set, dialect);
  ASSERT_EQ(decoded.kind, Decoded::Kind::kNeedMore);
  EXPECT_EQ(decoded.wanted, 1 + 8 + 1 + 8 + 100000u);
}

TEST(TorchStoreProtocolTest, LengthsPastTheBoundsAreRefusedBeforeTheyAreBuffered) {
  Dialect dialect = Dialect::kTorch1;
  Decoded key =
      torch_store::Decode(std::string(1, '\2') + U64(torch_store::kMaxKeyBytes + 1), dialect);
  ASSERT_EQ(key.kind, Decoded::Kind::kRefused);
  EXPECT_EQ(key.refusal, "get: a key of 4097 bytes (at most 4096)");
  Decoded value =
      torch_store::Decode(std::string(1, '\0') + Str("k") + U64(uint64_t{1} << 40), dialect);
  EXPECT_EQ(value.kind, Decoded::Kind::kRefused);
  Decoded count = torch_store::Decode(std::string(1, '\5') + U64(uint64_t{1} << 60), dialect);
  ASSERT_EQ(count.kind, Decoded::Kind::kRefused);
  EXPECT_EQ(count.refusal, "wait: wait of 1152921504606846976 keys (at most 131072)");
  // Many values each within bounds, together past the query's bound: refused once the bytes
  // needed pass it, not once they arrive.
  std::string many(1, '\x0b');
  many += U64(8) + Str("k") + U64(torch_store::kMaxValueBytes) +
          std::string(torch_store::kMaxValueBytes, 'x');
  for (int i = 0; i < 3; ++i) many += Str("k") + std::string(8, '\0');
  dialect = Dialect::kTorch2;
  Decoded multi = torch_store::Decode(many, dialect);
  EXPECT_EQ(multi.kind, Decoded::Kind::kNeedMore);
}

// The store on 127.0.0.1:0 with its io_context on a thread of the test.
class TorchStoreTest : public ::testing::Test {
 protected:
  virtual TorchStore::Options StoreOptions() const { return {"127.0.0.1"}; }
  void SetUp() override {
    auto server = TorchStore::Start(io_, clock_, store_, StoreOptions());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    thread_ = std::thread([this] { io_.run(); });
  }
  void TearDown() override {
    boost::asio::post(io_, [this] {
      server_.reset();
      store_.CancelAll();
      guard_.reset();
    });
    if (thread_.joinable()) thread_.join();
  }
  template <typename F>
  auto OnStore(F f) {
    std::packaged_task<decltype(f())()> task(std::move(f));
    auto result = task.get_future();
    boost::asio::post(io_, [&task] { task(); });
    return result.get();
  }
  // Runs `script` under Debian's torch with PORT set; its stdout.
  std::string Python(const std::string& script) {
    auto launched =
        testing::Launch({"/usr/bin/python3", "-c", script},
                        {"PORT=" + std::to_string(server_->port())}, dir_.path(), dir_.path());
    auto status = testing::WaitExit(launched.pid, std::chrono::seconds(120));
    EXPECT_TRUE(status.has_value() && status->success()) << launched.Stderr();
    return launched.Stdout();
  }
  // A raw connection to the store.
  int Connect() {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(server_->port()));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    timeval timeout{30, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    return fd;
  }
  static void Send(int fd, const std::string& bytes) {
    ASSERT_EQ(send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(bytes.size()));
  }
  // Exactly `n` bytes, or what came before the connection closed.
  static std::string Receive(int fd, size_t n) {
    std::string out;
    char buffer[4096];
    while (out.size() < n) {
      ssize_t got = recv(fd, buffer, std::min(sizeof(buffer), n - out.size()), 0);
      if (got <= 0) break;
      out.append(buffer, static_cast<size_t>(got));
    }
    return out;
  }
  // The peer closed: what it sent before, then the end (or a reset), within the receive timeout.
  static bool ClosedByPeer(int fd) {
    char buffer[65536];
    while (true) {
      ssize_t got = recv(fd, buffer, sizeof(buffer), 0);
      if (got == 0) return true;
      if (got < 0) return errno == ECONNRESET;
    }
  }
  // Polls `condition` on the store's thread until it holds (10 s at most).
  bool Eventually(std::function<bool()> condition) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      if (OnStore([&] { return condition(); })) return true;
      std::this_thread::yield();
    }
    return false;
  }

  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard_ =
      boost::asio::make_work_guard(io_);
  common::AsioClock clock_{io_.get_executor()};
  KvStore store_{clock_};
  std::unique_ptr<TorchStore> server_;
  std::thread thread_;
  testing::TempDir dir_;
};

TEST_F(TorchStoreTest, EveryOperationOfTorch113sClientWorks) {
  const std::string out = Python(R"(
import os, datetime, threading
import torch.distributed as dist
port = int(os.environ["PORT"])
s = dist.TCPStore("127.0.0.1", port, 2, False, datetime.timedelta(seconds=20))
s.set("a", "1")
print("get", s.get("a").decode())
print("add", s.add("n", 5), s.add("n", -2))
print("cas", s.compare_set("a", "1", "2").decode(), s.compare_set("a", "1", "3").decode(),
      s.compare_set("absent", "x", "y").decode())
print("num_keys", s.num_keys())
print("delete", s.delete_key("a"), s.delete_key("a"))
other = dist.TCPStore("127.0.0.1", port, 2, False, datetime.timedelta(seconds=20))
threading.Timer(0.5, lambda: other.set("late", "x")).start()
s.wait(["late"])
print("waited", s.get("late").decode())
s.set_timeout(datetime.timedelta(seconds=1))
try:
    s.wait(["never"])
    print("wait did not time out")
except RuntimeError as e:
    print("timed out", "Timeout" in str(e) or "timeout" in str(e))
p = dist.PrefixStore("/worker/attempt_0", other)
p.set("k", "v")
print("prefixed", p.get("k").decode())
)");
  EXPECT_NE(out.find("get 1\n"), std::string::npos) << out;
  EXPECT_NE(out.find("add 5 3\n"), std::string::npos) << out;
  EXPECT_NE(out.find("cas 2 2 x\n"), std::string::npos) << out;
  // "a", "n" and torch's "init/" (each client adds 1 to it at connection).
  EXPECT_NE(out.find("num_keys 3\n"), std::string::npos) << out;
  EXPECT_NE(out.find("delete True False\n"), std::string::npos) << out;
  EXPECT_NE(out.find("waited x\n"), std::string::npos) << out;
  EXPECT_NE(out.find("timed out True\n"), std::string::npos) << out;
  EXPECT_NE(out.find("prefixed v\n"), std::string::npos) << out;
  EXPECT_EQ(OnStore([this] { return store_.Present("//worker/attempt_0/k"); }), true);
  // The next generation's restart count drops the attempt's keys, nothing else.
  OnStore([this] {
    server_->ForgetAttemptsBefore(1);
    return 0;
  });
  EXPECT_FALSE(OnStore([this] { return store_.Present("//worker/attempt_0/k"); }));
  EXPECT_TRUE(OnStore([this] { return store_.Present("/late"); }));
}

std::string Op2(uint8_t type) { return std::string(1, static_cast<char>(type)); }

TEST_F(TorchStoreTest, Torch2sQueriesAreAnsweredAsItsServerAnswersThem) {
  const int fd = Connect();
  std::string ping = Op2(13);
  ping.append("\x04\x03\x02\x01", 4);
  Send(fd, Validate() + ping);
  EXPECT_EQ(Receive(fd, 4), std::string("\x04\x03\x02\x01", 4));
  // multi_set (no answer), multi_get (each value, the empty one for a missing key), append.
  Send(fd, Op2(11) + U64(2) + Str("a") + Str("1") + Str("b") + Str("2"));
  Send(fd, Op2(10) + U64(3) + Str("a") + Str("b") + Str("c"));
  EXPECT_EQ(Receive(fd, 3 * 8 + 2), Str("1") + Str("2") + Str(""));
  Send(fd, Op2(9) + Str("a") + Str("x") + Op2(3) + Str("a"));
  EXPECT_EQ(Receive(fd, 8 + 2), Str("1x"));
  // check: ready only when every key is (torch 1.13's Python API has no check; 2.x's does).
  Send(fd, Op2(5) + U64(2) + Str("a") + Str("b") + Op2(5) + U64(2) + Str("a") + Str("c"));
  EXPECT_EQ(Receive(fd, 2), std::string("\0\1", 2));
  // Queues: the length before the pop, then the item; an empty queue's pop is its length.
  Send(fd, Op2(14) + Str("q") + Str("i1") + Op2(16) + Str("q") + Op2(15) + Str("q") + Op2(15) +
               Str("q"));
  EXPECT_EQ(Receive(fd, 8 + 8 + 10 + 8), U64(1) + U64(1) + Str("i1") + U64(0));
  // A wait for two keys ends when the second is set; a cancelled wait never answers.
  const int other = Connect();
  Send(other, Validate());
  Send(fd, Op2(6) + U64(2) + Str("x") + Str("y"));
  Send(other, Op2(1) + Str("x") + Str("1") + Op2(13) + std::string(4, '\0'));
  EXPECT_EQ(Receive(other, 4), std::string(4, '\0'));  // x is set
  Send(other, Op2(1) + Str("y") + Str("1") + Op2(13) + std::string(4, '\0'));
  EXPECT_EQ(Receive(other, 4), std::string(4, '\0'));
  EXPECT_EQ(Receive(fd, 1), std::string(1, '\0'));  // STOP_WAITING
  Send(fd, Op2(6) + U64(1) + Str("z") + Op2(12));
  EXPECT_EQ(Receive(fd, 1), std::string(1, '\1'));  // WAIT_CANCELED
  Send(other, Op2(1) + Str("z") + Str("1") + Op2(13) + std::string(4, '\0'));
  EXPECT_EQ(Receive(other, 4), std::string(4, '\0'));
  Send(fd, ping);
  EXPECT_EQ(Receive(fd, 4), std::string("\x04\x03\x02\x01", 4));  // nothing in between
  EXPECT_EQ(OnStore([this] { return store_.pending_waits(); }), 0u);
  close(other);
  close(fd);
}

TEST_F(TorchStoreTest, HostileClientsAreClosedAloneAndTheirWaitsForgotten) {
  const int good = Connect();
  Send(good, Validate());
  const int garbage = Connect();
  Send(garbage, std::string("\xff\xfe\xfd\xfc", 4));
  EXPECT_TRUE(ClosedByPeer(garbage));
  const int huge = Connect();
  Send(huge, Validate() + Op2(1) + U64(uint64_t{1} << 40));
  EXPECT_TRUE(ClosedByPeer(huge));
  const int waiting = Connect();
  Send(waiting, Validate() + Op2(6) + U64(1) + Str("never") + Op2(13) + std::string(4, '\0'));
  EXPECT_EQ(Receive(waiting, 4), std::string(4, '\0'));  // the wait is registered
  const int partial = Connect();
  Send(partial, Validate() + Op2(1) + U64(100) + "half");
  Send(good, Op2(4) + Str("n") + U64(7));
  EXPECT_EQ(Receive(good, 8), U64(7));
  EXPECT_TRUE(Eventually([this] { return server_->connections() == 3; }));  // partial's too
  EXPECT_EQ(OnStore([this] { return store_.pending_waits(); }), 1u);
  close(waiting);
  // Its wait goes with it: the good client's next answer comes after the close was read.
  const int probe = Connect();
  Send(probe, Validate() + Op2(13) + std::string(4, '\0'));
  EXPECT_EQ(Receive(probe, 4), std::string(4, '\0'));
  EXPECT_TRUE(Eventually([this] { return store_.pending_waits() == 0; }));
  close(partial);
  close(probe);
  close(good);
}

class ReportingTorchStoreTest : public TorchStoreTest {
 protected:
  TorchStore::Options StoreOptions() const override {
    TorchStore::Options options{"127.0.0.1"};
    options.report_waits_after = std::chrono::milliseconds(200);
    return options;
  }
};

TEST_F(ReportingTorchStoreTest, WaitsPastTheBoundForKeysNobodySetAreReportedOnce) {
  std::promise<TorchStore::LongWait> first, second;
  int reports = 0;
  OnStore([&] {
    server_->SetOnLongWait([&](const TorchStore::LongWait& wait) {
      if (++reports == 1) first.set_value(wait);
      if (reports == 2) second.set_value(wait);
    });
    return 0;
  });
  // gloo's pattern: rank 0 sets its address and waits for rank 1's, which never comes; a key
  // set meanwhile by another is not reported.
  const std::string prefix = "//worker/attempt_0/default_pg/0/0/";
  const int rank0 = Connect();
  Send(rank0, Op2(0) + Str(prefix + "0") + Str("addr") + Op2(5) + U64(2) + Str(prefix + "1") +
                  Str(prefix + "late"));
  const int other = Connect();
  Send(other, Op2(0) + Str(prefix + "late") + Str("x") + Op2(3) + Str("n") + U64(1));
  EXPECT_EQ(Receive(other, 8), U64(1));
  auto report = first.get_future();
  ASSERT_EQ(report.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  const TorchStore::LongWait wait = report.get();
  EXPECT_EQ(wait.keys, std::vector<std::string>{prefix + "1"});
  EXPECT_EQ(wait.waits, 1u);
  EXPECT_GE(wait.waited, std::chrono::milliseconds(200));
  // Once: the checks in between (every 50 ms) found the same keys and said nothing; the next
  // report is the next stall's, with both.
  const int rank2 = Connect();
  Send(rank2, Op2(5) + U64(1) + Str(prefix + "2"));
  auto next = second.get_future();
  ASSERT_EQ(next.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  const TorchStore::LongWait both = next.get();
  EXPECT_EQ(both.keys, (std::vector<std::string>{prefix + "1", prefix + "2"}));
  EXPECT_EQ(both.waits, 2u);
  close(rank2);
  close(other);
  close(rank0);
}

class BoundedTorchStoreTest : public TorchStoreTest {
 protected:
  TorchStore::Options StoreOptions() const override {
    TorchStore::Options options{"127.0.0.1"};
    options.max_connections = 2;
    options.max_unread_reply_bytes = 1 << 20;
    return options;
  }
};

TEST_F(BoundedTorchStoreTest, AClientThatNeverReadsAndOneConnectionTooManyAreClosed) {
  const int reader = Connect();
  Send(reader, Validate() + Op2(1) + Str("big") + Str(std::string(512 << 10, 'x')) + Op2(13) +
                   std::string(4, '\0'));
  EXPECT_EQ(Receive(reader, 4), std::string(4, '\0'));  // the value is set
  const int never_reads = Connect();
  const int extra = Connect();
  EXPECT_TRUE(ClosedByPeer(extra));  // the third of at most 2
  std::string gets;
  for (int i = 0; i < 64; ++i) gets += Op2(3) + Str("big");
  Send(never_reads, Validate());
  // 32 MiB of answers, never read: past the bound (the kernel's buffers hold a few MiB).
  Send(never_reads, gets);
  EXPECT_TRUE(ClosedByPeer(never_reads));  // what the kernel held, then the end
  EXPECT_EQ(OnStore([this] { return server_->connections(); }), 1u);
  Send(reader, Op2(13) + std::string(4, '\0'));
  EXPECT_EQ(Receive(reader, 4), std::string(4, '\0'));
  close(never_reads);
  close(reader);
}

}  // namespace
}  // namespace gangrun::scheduler
