// NUMA binding's rules (launcher/numa.h) on a sysfs tree of the test's own: two sockets of
// two NUMA nodes each, four CPUs per node, two L3 complexes per node, and GPUs on nodes 3
// and 0.

#include "launcher/numa.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "tests/testing/test_util.h"

namespace gangrun::launcher {
namespace {

void Write(const std::string& path, const std::string& text) {
  std::string dir = path.substr(0, path.rfind('/'));
  ASSERT_EQ(system(("mkdir -p '" + dir + "'").c_str()), 0);
  std::ofstream(path) << text << "\n";
}

class NumaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string root = dir_.path();
    for (int node = 0; node < 4; ++node) {
      const int first = node * 4;
      Write(root + "/devices/system/node/node" + std::to_string(node) + "/cpulist",
            std::to_string(first) + "-" + std::to_string(first + 3));
      for (int cpu = first; cpu < first + 4; ++cpu) {
        const std::string base = root + "/devices/system/cpu/cpu" + std::to_string(cpu);
        Write(base + "/topology/physical_package_id", std::to_string(node / 2));
        const int l3 = cpu - cpu % 2;  // two CPUs per complex
        Write(base + "/cache/index3/shared_cpu_list",
              std::to_string(l3) + "-" + std::to_string(l3 + 1));
      }
    }
    for (const auto& [address, node] : {std::pair{"0000:81:00.0", 3}, {"0000:01:00.0", 0}}) {
      const std::string base = root + "/bus/pci/devices/" + address;
      Write(base + "/vendor", "0x10de");
      Write(base + "/class", "0x030200");
      Write(base + "/numa_node", std::to_string(node));
    }
    topology_ = ReadNumaTopology(root);
  }
  testing::TempDir dir_;
  NumaTopology topology_;
};

TEST_F(NumaTest, TheTopologyIsReadFromSysfs) {
  ASSERT_EQ(topology_.node_cpus.size(), 4u);
  EXPECT_EQ(topology_.node_cpus.at(2), (std::vector<int>{8, 9, 10, 11}));
  EXPECT_EQ(topology_.cpu_package.at(9), 1);
  EXPECT_EQ(topology_.cpu_l3.at(9), 8);
  // GPUs in PCI order: 0000:01 (node 0) is GPU 0, 0000:81 (node 3) is GPU 1.
  EXPECT_EQ(topology_.gpu_nodes, (std::vector<int>{0, 3}));
}

TEST_F(NumaTest, ARankGoesToItsGpusNodeElseToItsShare) {
  auto gpu1 = NumaBindingFor(topology_, NumaMode::kNode, 1, 4);
  ASSERT_TRUE(gpu1.has_value());
  EXPECT_EQ(gpu1->cpus, (std::vector<int>{12, 13, 14, 15}));  // GPU 1 is on node 3
  EXPECT_EQ(gpu1->memory_nodes, std::vector<int>{3});
  // Local rank 2 has no GPU: its share of 4 nodes among 4 ranks is node 2.
  EXPECT_EQ(NumaBindingFor(topology_, NumaMode::kNode, 2, 4)->memory_nodes, std::vector<int>{2});
}

TEST_F(NumaTest, SocketExclusiveAndCoreComplexModes) {
  auto socket = NumaBindingFor(topology_, NumaMode::kSocket, 1, 4);  // node 3: socket 1
  EXPECT_EQ(socket->cpus, (std::vector<int>{8, 9, 10, 11, 12, 13, 14, 15}));
  EXPECT_EQ(socket->memory_nodes, (std::vector<int>{2, 3}));
  // Without GPUs, 8 ranks on 4 nodes: two per node, each with half of the node's CPUs.
  NumaTopology no_gpus = topology_;
  no_gpus.gpu_nodes.clear();
  EXPECT_EQ(NumaBindingFor(no_gpus, NumaMode::kExclusive, 0, 8)->cpus, (std::vector<int>{0, 1}));
  EXPECT_EQ(NumaBindingFor(no_gpus, NumaMode::kExclusive, 1, 8)->cpus, (std::vector<int>{2, 3}));
  EXPECT_EQ(NumaBindingFor(no_gpus, NumaMode::kCoreComplex, 1, 8)->cpus, (std::vector<int>{2, 3}));
  EXPECT_EQ(NumaBindingFor(no_gpus, NumaMode::kCoreComplex, 7, 8)->cpus,
            (std::vector<int>{14, 15}));
}

TEST_F(NumaTest, OneNodeOrNoModeBindsNothing) {
  NumaTopology one;
  one.node_cpus[0] = {0, 1};
  EXPECT_FALSE(NumaBindingFor(one, NumaMode::kNode, 0, 2).has_value());
  EXPECT_FALSE(NumaBindingFor(topology_, NumaMode::kNone, 0, 2).has_value());
  EXPECT_FALSE(ParseNumaMode("nodes").ok());
  EXPECT_EQ(*ParseNumaMode("core-complex"), NumaMode::kCoreComplex);
}

TEST_F(NumaTest, MsrunsBindNumaTrueADictOrAFile) {
  EXPECT_EQ(ParseBindNuma("False")->mode, BindNuma::Mode::kOff);
  auto auto_bind = ParseBindNuma("True");
  ASSERT_TRUE(auto_bind.ok());
  EXPECT_EQ(BindNumaFor(*auto_bind, topology_, 1, 4)->memory_nodes, std::vector<int>{3});
  // CPUs from bind_cpu, memory from bind_memory or the device's node.
  auto dict = ParseBindNuma(
      R"({"bind_config": {"bind_cpu_mode": "cpu", "bind_memory_mode": "numa"},
          "bind_cpu": {"device0": ["4-5", 7]}, "bind_memory": {"device1": [2]}})");
  ASSERT_TRUE(dict.ok()) << dict.status();
  EXPECT_EQ(BindNumaFor(*dict, topology_, 0, 2)->cpus, (std::vector<int>{4, 5, 7}));
  EXPECT_EQ(BindNumaFor(*dict, topology_, 0, 2)->memory_nodes, std::vector<int>{0});
  EXPECT_EQ(BindNumaFor(*dict, topology_, 1, 2)->memory_nodes, std::vector<int>{2});
  EXPECT_TRUE(BindNumaFor(*dict, topology_, 1, 2)->cpus.empty());
  // A file, which the workers get as MSRUN_BIND_FILE.
  const std::string file = dir_.File("bind.json");
  std::ofstream(file)
      << R"({"bind_config": {"bind_cpu_mode": "none", "bind_memory_mode": "none"}})";
  auto from_file = ParseBindNuma(file);
  ASSERT_TRUE(from_file.ok()) << from_file.status();
  EXPECT_EQ(from_file->file, file);
  EXPECT_FALSE(BindNumaFor(*from_file, topology_, 0, 2).has_value());
  // Each mistake is named.
  EXPECT_NE(
      std::string(ParseBindNuma(R"({"bind_config": {"bind_cpu_mode": "x"}})").status().message())
          .find("bind_cpu_mode numa, cpu or none"),
      std::string::npos);
  EXPECT_FALSE(ParseBindNuma(R"({"bind_cpu": {"device0": "0-3"}})").ok());
  EXPECT_FALSE(ParseBindNuma(dir_.File("missing.json")).ok());
  EXPECT_FALSE(ParseBindNuma("maybe").ok());
}

// Hostile --bind_numa (issue #47): each refused in one line, nothing crashes, hangs or
// allocates what the text asks.
TEST_F(NumaTest, HostileBindNumaIsRefusedWithinItsBounds) {
  auto refused = [](const std::string& text) {
    auto parsed = ParseBindNuma(text);
    EXPECT_FALSE(parsed.ok()) << text.substr(0, 80);
    return parsed.ok() ? std::string() : std::string(parsed.status().message());
  };
  // A field of the wrong type.
  EXPECT_NE(refused(R"({"bind_config": {"bind_cpu_mode": 7}})").find("bind_cpu_mode as a string"),
            std::string::npos);
  // 100,000 nested lists.
  EXPECT_NE(refused("{\"bind_cpu\": {\"d\": " + std::string(100000, '[') +
                    std::string(100000, ']') + "}}")
                .find("nested at most"),
            std::string::npos);
  // 20 MB of ranges.
  std::string ranges = "{\"bind_cpu\": {\"d\": [\"";
  while (ranges.size() < (20 << 20)) ranges += "0-4095,";
  EXPECT_NE(refused(ranges + "\"]}}").find("at most 1 MiB"), std::string::npos);
  // Ranges that expand past the bound within 1 MiB.
  std::string many = "{\"bind_cpu\": {\"d\": [\"";
  while (many.size() < (1 << 19)) many += "0-4095,";
  EXPECT_NE(refused(many + "\"]}}").find("at most 65536 ids"), std::string::npos);
  // CPU id 2^40, not CPU 0; a negative one.
  EXPECT_NE(refused(R"({"bind_cpu": {"d": [1099511627776]}})").find("0..65535"), std::string::npos);
  EXPECT_NE(refused(R"({"bind_cpu": {"d": [-1]}})").find("0..65535"), std::string::npos);
  // Files that are not regular files: a device, a FIFO, a directory, a link to a device.
  const std::string fifo = dir_.File("fifo.json"), directory = dir_.File("dir.json"),
                    link = dir_.File("zero.json");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  ASSERT_EQ(mkdir(directory.c_str(), 0700), 0);
  ASSERT_EQ(symlink("/dev/zero", link.c_str()), 0);
  for (const std::string& path : {fifo, directory, link}) {
    EXPECT_NE(refused(path).find("regular file"), std::string::npos) << path;
  }
}

}  // namespace
}  // namespace gangrun::launcher
