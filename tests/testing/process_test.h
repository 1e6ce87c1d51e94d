#pragma once
// Base fixture for tests that create processes: after each test, no child process (or
// zombie) may be left.

#include <gtest/gtest.h>

#include "tests/testing/test_util.h"

namespace gangrun::testing {

class ProcessTest : public ::testing::Test {
 protected:
  void TearDown() override {
    auto left = ReapChildren(milliseconds(3000));
    EXPECT_TRUE(left.empty()) << left.size() << " process(es) outlived the test, first pid "
                              << (left.empty() ? 0 : left.front());
  }
};

}  // namespace gangrun::testing
