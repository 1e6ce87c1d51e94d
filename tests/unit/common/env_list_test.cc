#include "common/env_list.h"

#include <gtest/gtest.h>

namespace gangrun::common {
namespace {

TEST(EnvListTest, AnEntrySetsOnlyTheVariableNamedUpToItsEqualsSign) {
  EXPECT_TRUE(SetsVariable("RANK=3", "RANK"));
  EXPECT_TRUE(SetsVariable("RANK=", "RANK"));
  EXPECT_FALSE(SetsVariable("RANK_ID=3", "RANK"));
  EXPECT_FALSE(SetsVariable("RAN=3", "RANK"));
  EXPECT_FALSE(SetsVariable("RANK", "RANK"));
}

TEST(EnvListTest, SetReplacesEveryEntryOfTheNameWithOneAtTheEnd) {
  std::vector<std::string> env = {"A=1", "RANK=1", "B=2", "RANK=2", "RANK_ID=5"};
  SetVariable(env, "RANK", "7");
  EXPECT_EQ(env, (std::vector<std::string>{"A=1", "B=2", "RANK_ID=5", "RANK=7"}));
  EXPECT_EQ(LastValueOf(env, "RANK"), "7");
  UnsetVariable(env, "RANK");
  EXPECT_EQ(env, (std::vector<std::string>{"A=1", "B=2", "RANK_ID=5"}));
  EXPECT_FALSE(LastValueOf(env, "RANK").has_value());
}

TEST(EnvListTest, TheLastEntryOfANameGivesItsValue) {
  const std::vector<std::string> env = {"X=first", "Y=", "X=second=with=equals"};
  EXPECT_EQ(LastValueOf(env, "X"), "second=with=equals");
  EXPECT_EQ(LastValueOf(env, "Y"), "");
  EXPECT_FALSE(LastValueOf(env, "Z").has_value());
}

}  // namespace
}  // namespace gangrun::common
