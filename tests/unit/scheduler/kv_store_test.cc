#include "scheduler/kv_store.h"

#include <gtest/gtest.h>

#include "tests/testing/fake_clock.h"

namespace gangrun::scheduler {
namespace {

using std::chrono::seconds;

TEST(KvStoreTest, PutThenGet) {
  testing::FakeClock clock;
  KvStore store(clock);
  ASSERT_TRUE(store.Put("k", "v").ok());
  absl::StatusOr<std::string> got;
  store.Get("k", common::Duration::zero(), [&](absl::StatusOr<std::string> v) { got = v; });
  EXPECT_EQ(*got, "v");
  store.Get("missing", common::Duration::zero(), [&](absl::StatusOr<std::string> v) { got = v; });
  EXPECT_EQ(got.status().code(), absl::StatusCode::kNotFound);
}

TEST(KvStoreTest, WaitingGetCompletesOnPutOrTimesOut) {
  testing::FakeClock clock;
  KvStore store(clock);
  std::optional<absl::StatusOr<std::string>> first, second;
  store.Get("uid", seconds(10), [&](absl::StatusOr<std::string> v) { first = v; });
  store.Get("late", seconds(10), [&](absl::StatusOr<std::string> v) { second = v; });
  EXPECT_FALSE(first.has_value());
  ASSERT_TRUE(store.Put("uid", "abc").ok());
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(**first, "abc");
  clock.Advance(seconds(10));
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->status().code(), absl::StatusCode::kDeadlineExceeded);
}

TEST(KvStoreTest, AddIsAtomicAndRefusesNonIntegers) {
  testing::FakeClock clock;
  KvStore store(clock);
  EXPECT_EQ(*store.Add("n", 2), 2);
  EXPECT_EQ(*store.Add("n", -5), -3);
  ASSERT_TRUE(store.Put("s", "text").ok());
  EXPECT_EQ(store.Add("s", 1).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(KvStoreTest, DeleteReportsWhetherTheKeyExisted) {
  testing::FakeClock clock;
  KvStore store(clock);
  ASSERT_TRUE(store.Put("k", "v").ok());
  EXPECT_TRUE(store.Delete("k"));
  EXPECT_FALSE(store.Delete("k"));
}

TEST(KvStoreTest, BarrierReleasesEveryoneAtTheCount) {
  testing::FakeClock clock;
  KvStore store(clock);
  int released = 0;
  store.Barrier("b", 3, seconds(5), [&](absl::Status s) { released += s.ok(); });
  store.Barrier("b", 3, seconds(5), [&](absl::Status s) { released += s.ok(); });
  EXPECT_EQ(released, 0);
  store.Barrier("b", 3, seconds(5), [&](absl::Status s) { released += s.ok(); });
  EXPECT_EQ(released, 3);
  absl::Status mismatch;
  store.Barrier("c", 2, seconds(5), [](absl::Status) {});
  store.Barrier("c", 4, seconds(5), [&](absl::Status s) { mismatch = s; });
  EXPECT_EQ(mismatch.code(), absl::StatusCode::kInvalidArgument);
  store.CancelAll();
}

TEST(KvStoreTest, HostileSizesAreRefused) {
  testing::FakeClock clock;
  KvStore store(clock);
  EXPECT_EQ(store.Put("", "v").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.Put(std::string(KvStore::kMaxKeyBytes + 1, 'k'), "v").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.Put("k", std::string(KvStore::kMaxValueBytes + 1, 'v')).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(KvStoreTest, CancelAllEndsPendingWaits) {
  testing::FakeClock clock;
  KvStore store(clock);
  absl::Status status;
  store.Get("never", common::Duration(-1),
            [&](absl::StatusOr<std::string> v) { status = v.status(); });
  store.CancelAll();
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled);
}

TEST(KvStoreTest, TotalSizeIsBoundedAndDeletingGivesRoomBack) {
  testing::FakeClock clock;
  KvLimits limits;
  limits.max_bytes = 10 * (1 << 20);
  KvStore store(clock, limits);
  const std::string mib(1 << 20, 'v');
  int stored = 0;
  absl::Status refused;
  for (int i = 0; i < 100 && refused.ok(); ++i) {
    refused = store.Put("k" + std::to_string(i), mib);
    stored += refused.ok();
  }
  EXPECT_EQ(stored, 9);  // the tenth would pass 10 MiB with keys and overheads
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.message().find("--kv_max_bytes"), std::string::npos) << refused;
  EXPECT_LE(store.bytes(), limits.max_bytes);
  // Replacing a value counts only the difference; deleting gives the room back.
  EXPECT_TRUE(store.Put("k0", "small").ok());
  EXPECT_TRUE(store.Put("k9", mib).ok());
  for (int i = 0; i < 10; ++i) store.Delete("k" + std::to_string(i));
  EXPECT_EQ(store.bytes(), 0u);
  EXPECT_TRUE(store.Put("again", mib).ok());
}

TEST(KvStoreTest, PendingWaitsAreBounded) {
  testing::FakeClock clock;
  KvLimits limits;
  limits.max_pending_waits = 3;
  KvStore store(clock, limits);
  int answered = 0;
  for (int i = 0; i < 2; ++i) {
    store.Get("k", seconds(5), [&](absl::StatusOr<std::string>) { ++answered; });
  }
  store.Barrier("b", 4, seconds(5), [&](absl::Status) { ++answered; });
  EXPECT_EQ(store.pending_waits(), 3u);
  absl::Status get_refused, barrier_refused;
  store.Get("k", seconds(5), [&](absl::StatusOr<std::string> v) { get_refused = v.status(); });
  store.Barrier("b", 4, seconds(5), [&](absl::Status s) { barrier_refused = s; });
  EXPECT_EQ(get_refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(barrier_refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(get_refused.message().find("pending waits"), std::string::npos);
  EXPECT_EQ(answered, 0);
  // A value that is there needs no waiting, whatever the bound.
  ASSERT_TRUE(store.Put("k", "v").ok());
  EXPECT_EQ(answered, 2);
  std::string value;
  store.Get("k", seconds(5), [&](absl::StatusOr<std::string> v) { value = *v; });
  EXPECT_EQ(value, "v");
  store.CancelAll();
}

TEST(KvStoreTest, CancelledWaitsAreForgottenAtOnce) {
  testing::FakeClock clock;
  KvStore store(clock);
  bool called = false;
  KvStore::WaitId get =
      store.Get("k", seconds(5), [&](absl::StatusOr<std::string>) { called = true; });
  KvStore::WaitId barrier =
      store.Barrier("b", 2, common::Duration(-1), [&](absl::Status) { called = true; });
  EXPECT_NE(get, 0u);
  EXPECT_NE(barrier, 0u);
  EXPECT_EQ(clock.pending_timers(), 1u);
  store.CancelWait(get);
  store.CancelWait(barrier);
  EXPECT_EQ(store.pending_waits(), 0u);
  EXPECT_EQ(clock.pending_timers(), 0u);
  // The barrier starts afresh: a cancelled arrival does not count.
  int released = 0;
  store.Barrier("b", 2, seconds(5), [&](absl::Status s) { released += s.ok(); });
  EXPECT_EQ(released, 0);
  store.Barrier("b", 2, seconds(5), [&](absl::Status s) { released += s.ok(); });
  EXPECT_EQ(released, 2);
  ASSERT_TRUE(store.Put("k", "v").ok());
  clock.Advance(seconds(10));
  EXPECT_FALSE(called);
  store.CancelWait(get);  // twice, or after the end: nothing happens
}

TEST(KvStoreTest, AddRefusesToOverflow) {
  testing::FakeClock clock;
  KvStore store(clock);
  ASSERT_TRUE(store.Put("n", std::to_string(INT64_MAX)).ok());
  EXPECT_EQ(store.Add("n", 1).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(*store.Add("n", -1), INT64_MAX - 1);
}

// What torch's store adds: compare_set, append, presence waits, queues, an attempt's keys.
TEST(KvStoreTest, TorchsOperationsKeepTheirMeaningAndTheByteCount) {
  testing::FakeClock clock;
  KvStore store(clock);
  EXPECT_EQ(*store.CompareSet("k", "", "first"), "first");  // absent, expected empty: set
  EXPECT_EQ(*store.CompareSet("k", "other", "second"), "first");
  EXPECT_EQ(*store.CompareSet("absent", "x", "y"), "x");  // absent: the expected value
  EXPECT_FALSE(store.Present("absent"));
  ASSERT_TRUE(store.Append("k", "+tail").ok());
  std::string value;
  store.Get("k", common::Duration::zero(), [&](absl::StatusOr<std::string> v) { value = *v; });
  EXPECT_EQ(value, "first+tail");
  // A presence wait ends on a set or on a queue's first item (one waiter per item).
  std::optional<absl::Status> on_set, on_push_a, on_push_b, timed_out;
  store.Await("s", seconds(-1), [&](absl::Status s) { on_set = s; });
  store.Await("q", seconds(-1), [&](absl::Status s) { on_push_a = s; });
  store.Await("q", seconds(-1), [&](absl::Status s) { on_push_b = s; });
  store.Await("never", seconds(5), [&](absl::Status s) { timed_out = s; });
  ASSERT_TRUE(store.Put("s", "").ok());
  EXPECT_TRUE(on_set.has_value() && on_set->ok());
  const uint64_t before = store.bytes();
  ASSERT_TRUE(store.QueuePush("q", "item").ok());
  EXPECT_TRUE(on_push_a.has_value() && on_push_a->ok());
  EXPECT_FALSE(on_push_b.has_value());
  EXPECT_EQ(store.QueueLength("q"), 1u);
  EXPECT_GT(store.bytes(), before);
  EXPECT_EQ(*store.QueuePop("q"), "item");
  EXPECT_FALSE(store.QueuePop("q").has_value());
  EXPECT_EQ(store.bytes(), before);
  clock.Advance(seconds(5));
  EXPECT_EQ(timed_out->code(), absl::StatusCode::kDeadlineExceeded);
  // An attempt's keys and queues go together; others stay; the bytes come back.
  ASSERT_TRUE(store.Put("//worker/attempt_0/a", "1").ok());
  ASSERT_TRUE(store.QueuePush("//worker/attempt_0/q", "2").ok());
  ASSERT_TRUE(store.Put("//worker/attempt_1/a", "3").ok());
  const uint64_t with_attempts = store.bytes();
  EXPECT_EQ(store.DeletePrefix("//worker/attempt_0/"), 2u);
  EXPECT_LT(store.bytes(), with_attempts);
  EXPECT_TRUE(store.Present("//worker/attempt_1/a"));
  EXPECT_EQ(store.keys(), 3u);  // k, s and attempt 1's
  store.CancelAll();
  EXPECT_EQ(on_push_b->code(), absl::StatusCode::kCancelled);
}

TEST(KvStoreTest, TorchsAdditionsAreBounded) {
  testing::FakeClock clock;
  KvStore store(clock, {/*max_bytes=*/1024, /*max_pending_waits=*/1});
  EXPECT_EQ(store.QueuePush("q", std::string(2048, 'x')).code(),
            absl::StatusCode::kResourceExhausted);
  ASSERT_TRUE(store.Put("k", std::string(KvStore::kMaxValueBytes - 1, 'x')).code() ==
              absl::StatusCode::kResourceExhausted);
  KvStore big(clock);
  ASSERT_TRUE(big.Put("k", std::string(KvStore::kMaxValueBytes - 1, 'x')).ok());
  EXPECT_EQ(big.Append("k", "yy").code(), absl::StatusCode::kInvalidArgument);
  std::optional<absl::Status> second;
  store.Await("a", seconds(-1), [](absl::Status) {});
  store.Await("b", seconds(-1), [&](absl::Status s) { second = s; });
  EXPECT_EQ(second->code(), absl::StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace gangrun::scheduler
