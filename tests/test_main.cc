// Test main: the test process is a child subreaper, so any descendant that outlives the
// launcher under test is re-parented here and caught by ProcessTest::TearDown. The binary
// also serves as the process keeper for KeeperClient tests (`<test> __keeper FD`).

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "common/descendants.h"
#include "node/keeper.h"

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "__keeper") {
    return gangrun::node::RunKeeper(std::atoi(argv[2]));
  }
  if (!gangrun::common::BecomeChildSubreaper().ok()) return 1;
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
