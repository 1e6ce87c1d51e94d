// The spare pool (scheduler/spare_pool.h): which spare takes a place, and the holes a later
// spare fills. No Scheduler.

#include "scheduler/spare_pool.h"

#include <gtest/gtest.h>

namespace gangrun::scheduler {
namespace {

TEST(SparePoolTest, TheFirstSpareWithAsManyWorkersTakesThePlace) {
  SparePool pool(2);
  EXPECT_FALSE(pool.full());
  pool.Admit(7, 8);
  pool.Admit(4, 4);
  pool.Admit(4, 4);  // once
  EXPECT_TRUE(pool.full());
  EXPECT_EQ(pool.size(), 2);
  EXPECT_EQ(pool.ids(), (std::vector<int>{4, 7})) << "in the order they connected";
  EXPECT_EQ(pool.For(4), 4);
  EXPECT_EQ(pool.For(8), 7);
  EXPECT_FALSE(pool.For(2).has_value()) << "no spare with 2 workers";
  pool.Remove(4);  // promoted
  EXPECT_FALSE(pool.Has(4));
  EXPECT_FALSE(pool.For(4).has_value());
  EXPECT_EQ(pool.admitted(), 2) << "every spare that ever joined";
  pool.Remove(99);  // no spare: nothing
  EXPECT_EQ(pool.size(), 1);
}

TEST(SparePoolTest, AHoleWaitsForASpareThatFitsOldestFirst) {
  SparePool pool(3);
  pool.Leave({{"a", "10.0.0.1", 0, 2}, {0, 0}, "a", "", std::nullopt});
  pool.Leave({{"b", "10.0.0.2", 1, 4}, {1, 2}, "b", "", std::nullopt});
  EXPECT_EQ(pool.holes(), 2u);
  std::vector<std::string> offered;
  auto take_four = [&](const SparePool::Hole& hole) {
    offered.push_back(hole.who);
    return hole.join.local_worker_num == 4;
  };
  EXPECT_TRUE(pool.Fill(take_four));
  EXPECT_EQ(offered, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(pool.holes(), 1u) << "a's 2-worker place still waits";
  EXPECT_FALSE(pool.Fill([](const SparePool::Hole&) { return false; }));
  pool.ClearHoles();
  EXPECT_EQ(pool.holes(), 0u);
}

TEST(SparePoolTest, ASpareOfThePlacesDomainIsChosenFirst) {
  SparePool pool(3);
  pool.Admit(1, 4, "rack1");
  pool.Admit(2, 4, "rack2");
  pool.Admit(3, 2, "rack2");
  EXPECT_EQ(pool.For(4, "rack2"), 2) << "its domain, though 1 came first";
  EXPECT_EQ(pool.For(4, "rack9"), 1) << "none of its domain: the first with as many workers";
  EXPECT_EQ(pool.For(4), 1);
  EXPECT_EQ(pool.For(2, "rack1"), 3) << "as many workers matters more than the domain";
}

TEST(SparePoolTest, TheNextHoldToEndIsTheEarliestStillAhead) {
  SparePool pool(1);
  const common::TimePoint now{std::chrono::seconds(100)};
  EXPECT_FALSE(pool.NextHeld(now).has_value()) << "no hole";
  pool.Leave({{"a", "10.0.0.1", 0, 1}, {0, 0}, "a", "", std::nullopt});
  EXPECT_FALSE(pool.NextHeld(now).has_value()) << "a hole nobody holds";
  pool.Leave({{"b", "10.0.0.2", 1, 1}, {1, 1}, "b", "", now + std::chrono::seconds(15)});
  pool.Leave({{"c", "10.0.0.3", 2, 1}, {2, 2}, "c", "", now + std::chrono::seconds(5)});
  pool.Leave({{"d", "10.0.0.4", 3, 1}, {3, 3}, "d", "", now - std::chrono::seconds(1)});
  EXPECT_EQ(pool.NextHeld(now), now + std::chrono::seconds(5));
  EXPECT_EQ(pool.NextHeld(now + std::chrono::seconds(5)), now + std::chrono::seconds(15))
      << "a hold that ends now is over";
  EXPECT_FALSE(pool.NextHeld(now + std::chrono::seconds(15)).has_value());
}

}  // namespace
}  // namespace gangrun::scheduler
