// Who outside the job holds the accelerators (node/device_holders.h): a process holding a
// "device" (a file standing for /dev/nvidia0) is named; the job's own process groups are not.

#include "node/device_holders.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include "tests/testing/test_util.h"

namespace gangrun::node {
namespace {

void ReapHolder(pid_t pid) {
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

TEST(DeviceHoldersTest, AProcessOutsideTheJobHoldingADeviceIsNamed) {
  testing::TempDir dir;
  const std::string device = dir.File("nvidia0");
  std::ofstream(device) << "";
  std::ofstream(dir.File("other")) << "";
  ASSERT_EQ(DeviceFiles({dir.File("nvidia[0-9]*"), dir.File("davinci[0-9]*")}),
            std::vector<std::string>{device});
  const pid_t holder = testing::HoldFileOpen(device);
  ASSERT_GT(holder, 0);
  const pid_t bystander = testing::HoldFileOpen(dir.File("other"));
  ASSERT_GT(bystander, 0);
  const std::vector<std::string> holders = DeviceHolders({device}, {});
  ReapHolder(holder);
  ReapHolder(bystander);
  ASSERT_EQ(holders.size(), 1u);
  EXPECT_EQ(holders[0].rfind("pid " + std::to_string(holder) + " (", 0), 0u) << holders[0];
  EXPECT_NE(holders[0].find(", uid " + std::to_string(getuid()) + ") holds " + device),
            std::string::npos)
      << holders[0];
}

TEST(DeviceHoldersTest, TheJobsOwnGroupsAndAbsentDevicesNameNobody) {
  testing::TempDir dir;
  const std::string device = dir.File("nvidia0");
  std::ofstream(device) << "";
  const pid_t worker = testing::HoldFileOpen(device);
  ASSERT_GT(worker, 0);
  EXPECT_TRUE(DeviceHolders({device}, {worker}).empty()) << "its group is the job's";
  EXPECT_TRUE(DeviceHolders({dir.File("nvidia9")}, {}).empty()) << "no such device";
  EXPECT_TRUE(DeviceHolders({}, {}).empty());
  EXPECT_TRUE(DeviceFiles({dir.File("davinci[0-9]*")}).empty());
  ReapHolder(worker);
}

}  // namespace
}  // namespace gangrun::node
