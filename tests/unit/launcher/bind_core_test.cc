#include "launcher/bind_core.h"

#include <gtest/gtest.h>

namespace gangrun::launcher {
namespace {

TEST(BindCoreTest, OffBindsNothing) {
  EXPECT_TRUE(WorkerCpus(BindCore{}, 0, 2, 8, std::nullopt).cpus.empty());
}

TEST(BindCoreTest, AutoGivesEqualContiguousSlices) {
  BindCore bind{BindCore::Mode::kAuto, {}};
  EXPECT_EQ(WorkerCpus(bind, 0, 3, 8, std::nullopt).cpus, (std::vector<int>{0, 1}));
  EXPECT_EQ(WorkerCpus(bind, 2, 3, 8, std::nullopt).cpus, (std::vector<int>{4, 5}));
}

TEST(BindCoreTest, AutoWithMoreWorkersThanCpusWarnsAndSkips) {
  BindCore bind{BindCore::Mode::kAuto, {}};
  CpuBinding b = WorkerCpus(bind, 1, 4, 2, std::nullopt);
  EXPECT_TRUE(b.cpus.empty());
  EXPECT_FALSE(b.warning.empty());
}

TEST(BindCoreTest, DictEntriesGoToWorkersInOrderSkippingTheScheduler) {
  BindCore bind{BindCore::Mode::kDict,
                {{"scheduler", {"0"}}, {"device0", {"1-2"}}, {"device1", {"3", "5-6"}}}};
  EXPECT_EQ(WorkerCpus(bind, 0, 2, 8, std::nullopt).cpus, (std::vector<int>{1, 2}));
  EXPECT_EQ(WorkerCpus(bind, 1, 2, 8, std::nullopt).cpus, (std::vector<int>{3, 5, 6}));
  EXPECT_EQ(SchedulerCpus(bind).cpus, std::vector<int>{0});
}

TEST(BindCoreTest, DictEntryForAnotherDeviceIsNotApplied) {
  BindCore bind{BindCore::Mode::kDict, {{"device6", {"1"}}, {"device7", {"2"}}}};
  CpuBinding b = WorkerCpus(bind, 0, 2, 8, std::nullopt);
  EXPECT_TRUE(b.cpus.empty());
  EXPECT_NE(b.warning.find("device6"), std::string::npos);
  // With ASCEND_RT_VISIBLE_DEVICES=6,7 the physical ids match.
  EXPECT_EQ(WorkerCpus(bind, 1, 2, 8, std::string("6,7")).cpus, std::vector<int>{2});
}

TEST(BindCoreTest, PythonListMatchesPythonStr) {
  EXPECT_EQ(PythonList({0, 1, 2}), "[0, 1, 2]");
  EXPECT_EQ(PythonList({}), "[]");
}

}  // namespace
}  // namespace gangrun::launcher
