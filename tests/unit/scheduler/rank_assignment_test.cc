#include "scheduler/rank_assignment.h"

#include <gtest/gtest.h>

namespace gangrun::scheduler {
namespace {

TEST(RankAssignmentTest, ExplicitNodeRanksGiveMsrunRanks) {
  auto slots = AssignRanks({{"b", "10.0.0.2", 1, 4}, {"a", "10.0.0.1", 0, 4}}, 8);
  ASSERT_TRUE(slots.ok()) << slots.status();
  EXPECT_EQ((*slots)[0].node_rank, 1);
  EXPECT_EQ((*slots)[0].first_rank, 4);
  EXPECT_EQ((*slots)[1].node_rank, 0);
  EXPECT_EQ((*slots)[1].first_rank, 0);
}

TEST(RankAssignmentTest, AutomaticNodesAreOrderedByAddressThenName) {
  auto slots = AssignRanks(
      {{"n2", "10.0.0.2", -1, 2}, {"n1b", "10.0.0.1", -1, 2}, {"n1a", "10.0.0.1", -1, 2}}, 6);
  ASSERT_TRUE(slots.ok());
  EXPECT_EQ((*slots)[2].node_rank, 0);  // n1a
  EXPECT_EQ((*slots)[1].node_rank, 1);  // n1b
  EXPECT_EQ((*slots)[0].node_rank, 2);  // n2
  EXPECT_EQ((*slots)[0].first_rank, 4);
}

TEST(RankAssignmentTest, ExplicitAndAutomaticNodesMixWithUnevenSizes) {
  auto slots = AssignRanks({{"x", "10.0.0.9", -1, 3}, {"y", "10.0.0.1", 1, 1}}, 4);
  ASSERT_TRUE(slots.ok());
  EXPECT_EQ((*slots)[0].node_rank, 0);
  EXPECT_EQ((*slots)[0].first_rank, 0);
  EXPECT_EQ((*slots)[1].node_rank, 1);
  EXPECT_EQ((*slots)[1].first_rank, 3);
}

TEST(RankAssignmentTest, DuplicateAndOutOfRangeNodeRanksAreNamed) {
  auto dup = AssignRanks({{"a", "1", 0, 1}, {"b", "2", 0, 1}}, 2);
  EXPECT_FALSE(dup.ok());
  EXPECT_NE(std::string(dup.status().message()).find("duplicate node rank 0"), std::string::npos);
  auto range = AssignRanks({{"a", "1", 0, 1}, {"b", "2", 5, 1}}, 2);
  EXPECT_FALSE(range.ok());
  EXPECT_NE(std::string(range.status().message()).find("node 'b'"), std::string::npos);
}

TEST(RankAssignmentTest, CheckJoinRefusesExtraNodesAndDuplicates) {
  Membership joined;
  joined.Add({"a", "1", 0, 2});
  EXPECT_TRUE(CheckJoin(joined, {"b", "2", 1, 2}, 4).ok());
  auto extra = CheckJoin(joined, {"c", "3", -1, 4}, 4);
  EXPECT_NE(std::string(extra.message()).find("extra node: node 'c'"), std::string::npos);
  auto dup = CheckJoin(joined, {"d", "4", 0, 1}, 4);
  EXPECT_NE(std::string(dup.message()).find("duplicate node rank 0"), std::string::npos);
}

}  // namespace
}  // namespace gangrun::scheduler
