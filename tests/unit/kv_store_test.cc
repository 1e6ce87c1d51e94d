#include "scheduler/kv_store.h"

#include <gtest/gtest.h>

#include "common/fake_clock.h"

namespace gangrun::scheduler {
namespace {

using std::chrono::seconds;

TEST(KvStoreTest, PutThenGet) {
  common::FakeClock clock;
  KvStore store(clock);
  ASSERT_TRUE(store.Put("k", "v").ok());
  absl::StatusOr<std::string> got;
  store.Get("k", common::Duration::zero(), [&](absl::StatusOr<std::string> v) { got = v; });
  EXPECT_EQ(*got, "v");
  store.Get("missing", common::Duration::zero(), [&](absl::StatusOr<std::string> v) { got = v; });
  EXPECT_EQ(got.status().code(), absl::StatusCode::kNotFound);
}

TEST(KvStoreTest, WaitingGetCompletesOnPutOrTimesOut) {
  common::FakeClock clock;
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
  common::FakeClock clock;
  KvStore store(clock);
  EXPECT_EQ(*store.Add("n", 2), 2);
  EXPECT_EQ(*store.Add("n", -5), -3);
  ASSERT_TRUE(store.Put("s", "text").ok());
  EXPECT_EQ(store.Add("s", 1).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(KvStoreTest, DeleteReportsWhetherTheKeyExisted) {
  common::FakeClock clock;
  KvStore store(clock);
  ASSERT_TRUE(store.Put("k", "v").ok());
  EXPECT_TRUE(store.Delete("k"));
  EXPECT_FALSE(store.Delete("k"));
}

TEST(KvStoreTest, BarrierReleasesEveryoneAtTheCount) {
  common::FakeClock clock;
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
  common::FakeClock clock;
  KvStore store(clock);
  EXPECT_EQ(store.Put("", "v").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.Put(std::string(KvStore::kMaxKeyBytes + 1, 'k'), "v").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.Put("k", std::string(KvStore::kMaxValueBytes + 1, 'v')).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(KvStoreTest, CancelAllEndsPendingWaits) {
  common::FakeClock clock;
  KvStore store(clock);
  absl::Status status;
  store.Get("never", common::Duration(-1),
            [&](absl::StatusOr<std::string> v) { status = v.status(); });
  store.CancelAll();
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled);
}

}  // namespace
}  // namespace gangrun::scheduler
