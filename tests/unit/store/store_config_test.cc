// The --store URL (store/store_config.h) and the lease TTL a run gets.

#include "store/store_config.h"

#include <gtest/gtest.h>

#include "store/etcd_client.h"
#include "store/run_store.h"

namespace gangrun::store {
namespace {

TEST(StoreConfigTest, MembersAndPrefix) {
  auto one = ParseStoreUrl("etcd://127.0.0.1:2379");
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->endpoints, std::vector<std::string>{"127.0.0.1:2379"});
  EXPECT_EQ(one->prefix, "gangrun");
  auto three = ParseStoreUrl("etcd://h1:2379,[::1]:2380,10.0.0.3:2379/team/jobs/");
  ASSERT_TRUE(three.ok()) << three.status();
  EXPECT_EQ(three->endpoints, (std::vector<std::string>{"h1:2379", "[::1]:2380", "10.0.0.3:2379"}));
  EXPECT_EQ(three->prefix, "team/jobs");
}

TEST(StoreConfigTest, EveryWrongFormIsRefusedNamingTheForm) {
  for (const char* bad : {"", "127.0.0.1:2379", "http://h:1", "etcd://", "etcd://h", "etcd://h:0",
                          "etcd://h:1,", "etcd://h:1/", "etcd://h:1/a b", "etcd://h:70000"}) {
    auto parsed = ParseStoreUrl(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(parsed.status().message().find("expected etcd://HOST:PORT"), std::string::npos)
        << parsed.status();
  }
}

TEST(StoreConfigTest, PrefixEndCoversEveryKeyWithThePrefix) {
  EXPECT_EQ(PrefixEnd("/gangrun/runs/"), "/gangrun/runs0");
  EXPECT_EQ(PrefixEnd(std::string("a\xff", 2)), "b");
}

TEST(StoreConfigTest, TheLeaseIsTheNodeTimeoutInWholeSecondsAtLeastTwo) {
  EXPECT_EQ(LeaseSecondsFor(std::chrono::seconds(5)), 5);
  EXPECT_EQ(LeaseSecondsFor(std::chrono::milliseconds(5200)), 6);
  EXPECT_EQ(LeaseSecondsFor(std::chrono::milliseconds(500)), 2);
}

}  // namespace
}  // namespace gangrun::store
