// The torchrun personality, end to end: the same binary under the name torchrun, with
// torchrun's command lines (standalone, static and c10d rendezvous, elastic, restarts, -m,
// --no_python, the console options), a real PyTorch DDP job, and @record's exception in the
// root-cause report.

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "nlohmann/json.hpp"
#include "tests/integration/launcher_fixture.h"

namespace gangrun::testing {
namespace {

using std::chrono::seconds;

std::map<std::string, std::string> EnvOf(const std::string& text) {
  std::map<std::string, std::string> env;
  for (const auto& line : Split(text, '\n')) {
    const size_t eq = line.find('=');
    if (eq != std::string::npos) env[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return env;
}

class TorchrunTest : public LauncherTest {
 protected:
  // torchrun <args> in the test's directory; worker logs under it (TMPDIR).
  Launched Torchrun(const std::vector<std::string>& args,
                    const std::vector<std::string>& env = {}) {
    std::vector<std::string> argv = {TorchrunBinary()};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<std::string> full_env = {"GANGRUN_TEST_READY=" + fifo_.path(),
                                         "TMPDIR=" + dir_.path()};
    full_env.insert(full_env.end(), env.begin(), env.end());
    return Launch(argv, full_env, dir_.path(), dir_.path());
  }
  std::string Script(const std::string& name, const std::string& text) {
    std::ofstream(dir_.File(name)) << text;
    return dir_.File(name);
  }
  std::map<std::string, std::string> WorkerEnv(int rank, const std::string& file = "env") {
    return EnvOf(ReadFile(dir_.File(file + "." + std::to_string(rank))));
  }
};

TEST_F(TorchrunTest, StandaloneGivesTorchrunsWorkerEnvironment) {
  auto job = Torchrun({"--standalone", "--nproc-per-node=2", "--no-python", TestWorkerBinary(),
                       "--env", dir_.File("env")});
  EXPECT_EQ(RunToEnd(job).code, 0) << job.Stderr();
  std::set<std::string> run_ids;
  for (int rank = 0; rank < 2; ++rank) {
    auto env = WorkerEnv(rank);
    EXPECT_EQ(env["RANK"], std::to_string(rank));
    EXPECT_EQ(env["LOCAL_RANK"], std::to_string(rank));
    EXPECT_EQ(env["WORLD_SIZE"], "2");
    EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "2");
    EXPECT_EQ(env["GROUP_RANK"], "0");
    EXPECT_EQ(env["GROUP_WORLD_SIZE"], "1");
    EXPECT_EQ(env["ROLE_RANK"], std::to_string(rank));
    EXPECT_EQ(env["ROLE_WORLD_SIZE"], "2");
    EXPECT_EQ(env["ROLE_NAME"], "default");
    EXPECT_EQ(env["TORCHELASTIC_RESTART_COUNT"], "0");
    EXPECT_EQ(env["TORCHELASTIC_MAX_RESTARTS"], "0");
    EXPECT_EQ(env["TORCHELASTIC_USE_AGENT_STORE"], "False");
    EXPECT_EQ(env["OMP_NUM_THREADS"], "1");
    EXPECT_EQ(env["NCCL_ASYNC_ERROR_HANDLING"], "1");
    EXPECT_EQ(env["TORCH_NCCL_ASYNC_ERROR_HANDLING"], "1");
    EXPECT_EQ(env["MASTER_ADDR"], "127.0.0.1");
    EXPECT_NE(env["MASTER_PORT"], "");
    EXPECT_NE(env["TORCHELASTIC_ERROR_FILE"], "");
    run_ids.insert(env["TORCHELASTIC_RUN_ID"]);
  }
  EXPECT_EQ(run_ids.size(), 1u);  // one id for the whole job, made up as torchrun's uuid is
  EXPECT_NE(*run_ids.begin(), "none");
  EXPECT_NE(job.Stderr().find("setting OMP_NUM_THREADS environment variable"), std::string::npos);
  // The logs are in a torchelastic_* directory of their own, as torchrun's.
  EXPECT_NE(job.Stderr().find("worker logs in " + dir_.path() + "/torchelastic_"),
            std::string::npos)
      << job.Stderr();
}

TEST_F(TorchrunTest, StaticRendezvousOfTwoLaunchersFormsOneJob) {
  const std::string port = FreePort();
  std::vector<Launched> nodes;
  for (const char* node_rank : {"1", "0"}) {
    nodes.push_back(
        Torchrun({"--nnodes", "2", "--nproc_per_node", "2", "--node_rank", node_rank,
                  "--master_addr", "127.0.0.1", "--master_port", port, "--rdzv_id", "static-job",
                  "--no_python", TestWorkerBinary(), "--env", dir_.File("env")}));
  }
  for (auto& node : nodes) EXPECT_EQ(RunToEnd(node).code, 0) << node.Stderr();
  for (int rank = 0; rank < 4; ++rank) {
    auto env = WorkerEnv(rank);
    EXPECT_EQ(env["WORLD_SIZE"], "4");
    EXPECT_EQ(env["GROUP_RANK"], std::to_string(rank / 2));  // --node_rank decides
    EXPECT_EQ(env["GROUP_WORLD_SIZE"], "2");
    EXPECT_EQ(env["TORCHELASTIC_RUN_ID"], "static-job");
  }
}

TEST_F(TorchrunTest, C10dRendezvousOfTwoLaunchersFormsOneJob) {
  const std::string endpoint = "127.0.0.1:" + FreePort();
  std::vector<Launched> nodes;
  for (int i = 0; i < 2; ++i) {
    nodes.push_back(Torchrun({"--nnodes=2", "--nproc-per-node=2", "--rdzv-backend=c10d",
                              "--rdzv-endpoint=" + endpoint, "--rdzv-id=c10d-job", "--no-python",
                              TestWorkerBinary(), "--env", dir_.File("env")}));
  }
  for (auto& node : nodes) EXPECT_EQ(RunToEnd(node).code, 0) << node.Stderr();
  std::multiset<std::string> groups;
  for (int rank = 0; rank < 4; ++rank) {
    auto env = WorkerEnv(rank);
    EXPECT_EQ(env["WORLD_SIZE"], "4");
    EXPECT_EQ(env["TORCHELASTIC_RUN_ID"], "c10d-job");
    groups.insert(env["GROUP_RANK"]);
  }
  EXPECT_EQ(groups, (std::multiset<std::string>{"0", "0", "1", "1"}));
}

TEST_F(TorchrunTest, AnElasticJobFormsWithWhoeverCameBeforeTheLastCall) {
  const std::string endpoint = "127.0.0.1:" + FreePort();
  auto job = Torchrun({"--nnodes", "1:2", "--nproc_per_node", "2", "--rdzv_backend", "c10d",
                       "--rdzv_endpoint", endpoint, "--rdzv_conf", "last_call_timeout=0.2",
                       "--no_python", TestWorkerBinary(), "--env", dir_.File("env")});
  EXPECT_EQ(RunToEnd(job).code, 0) << job.Stderr();
  EXPECT_EQ(WorkerEnv(1)["WORLD_SIZE"], "2");
  EXPECT_NE(job.Stderr().find("2 of 2 to 4 workers present"), std::string::npos) << job.Stderr();
}

TEST_F(TorchrunTest, RestartsCountInTorchelasticRestartCount) {
  auto job = Torchrun({"--nproc_per_node", "2", "--max_restarts", "2", "--restart_backoff", "0",
                       "--no_python", TestWorkerBinary(), "--exit", "3", "--only-generation", "1",
                       "--env", dir_.File("env")});
  EXPECT_EQ(RunToEnd(job).code, 0) << job.Stderr();
  auto env = WorkerEnv(0);
  EXPECT_EQ(env["TORCHELASTIC_RESTART_COUNT"], "1");
  EXPECT_EQ(env["TORCHELASTIC_MAX_RESTARTS"], "2");
}

TEST_F(TorchrunTest, ModuleRunsUnderPythonWithItsArgumentsUntouched) {
  Script("envmod.py", R"PY(
import os, sys
with open("module.%s" % os.environ["RANK"], "w") as out:
    out.write(repr(sys.argv[1:]) + "\n" + repr(sys.stdout.write_through) + "\n")
)PY");
  auto job = Torchrun({"--nproc_per_node", "1", "-m", "envmod", "--nproc_per_node", "7", "x"});
  EXPECT_EQ(RunToEnd(job).code, 0) << job.Stderr();
  // python -u -m envmod: unbuffered, as torchrun runs it.
  EXPECT_EQ(ReadFile(dir_.File("module.0")), "['--nproc_per_node', '7', 'x']\nTrue\n");
}

TEST_F(TorchrunTest, ConsoleFollowsRedirectsTeeAndTheLocalRanksFilter) {
  auto redirected = Torchrun({"--nproc_per_node", "2", "-r", "3", "--log_dir", dir_.File("r"),
                              "--no_python", TestWorkerBinary(), "--lines", "2"});
  EXPECT_EQ(RunToEnd(redirected).code, 0) << redirected.Stderr();
  EXPECT_EQ(redirected.Stdout().find("line 0 of rank"), std::string::npos) << redirected.Stdout();
  // ... but every line is in the logs.
  EXPECT_NE(ReadFile(dir_.File("r/worker_1.log")).find("line 0 of rank 1"), std::string::npos);

  auto teed = Torchrun({"--nproc_per_node", "2", "--tee", "3", "--local-ranks-filter", "1",
                        "--no_python", TestWorkerBinary(), "--lines", "2"});
  EXPECT_EQ(RunToEnd(teed).code, 0) << teed.Stderr();
  EXPECT_NE(teed.Stdout().find("[default1]:line 0 of rank 1"), std::string::npos) << teed.Stdout();
  EXPECT_EQ(teed.Stdout().find("of rank 0"), std::string::npos) << teed.Stdout();
}

TEST_F(TorchrunTest, DuplicateFiltersAndNumaBindingOfTorch29) {
  auto job =
      Torchrun({"--nproc_per_node", "2", "--log_dir", dir_.File("f"), "--duplicate-stdout-filters",
                "line 1 ,line 3", "--duplicate-stderr-filters", "rank 1", "--numa-binding", "node",
                "--no_python", TestWorkerBinary(), "--lines", "4"});
  EXPECT_EQ(RunToEnd(job).code, 0) << job.Stderr();
  // Matching lines also go to a file per rank and filter set.
  EXPECT_EQ(ReadFile(dir_.File("f/worker_0.filtered_stdout.log")),
            "line 1 of rank 0\nline 3 of rank 0\n");
  // The worker's lines of both streams, in the order they are in its log.
  const std::string rank1 = ReadFile(dir_.File("f/worker_1.filtered_stderr.log"));
  EXPECT_EQ(Split(rank1, '\n').size(), 4u) << rank1;
  for (int line = 0; line < 4; ++line) {
    EXPECT_NE(rank1.find("line " + std::to_string(line) + " of rank 1\n"), std::string::npos);
  }
  EXPECT_EQ(ReadFile(dir_.File("f/worker_0.filtered_stderr.log")), "");
  // This machine's NUMA nodes: one says so and binds nothing; more bind each rank.
  const int nodes =
      system("test $(ls -d /sys/devices/system/node/node* | wc -l) -gt 1") == 0 ? 2 : 1;
  if (nodes == 1) {
    EXPECT_NE(job.Stderr().find(
                  "--numa_binding node: this host has 1 NUMA node; nothing to bind to a node"),
              std::string::npos)
        << job.Stderr();
  }
}

TEST_F(TorchrunTest, SlurmVariablesDoNotChangeTorchrunsCommandLine) {
  // A one-node job on one node of a four-node allocation: torchrun reads no SLURM_* variable.
  auto job = Torchrun({"--nproc_per_node", "2", "--master_port", FreePort(), "--no_python",
                       TestWorkerBinary(), "--env", dir_.File("env")},
                      {"SLURM_JOB_ID=77", "SLURM_NODEID=2", "SLURM_JOB_NUM_NODES=4",
                       "SLURM_JOB_NODELIST=node[1-4]"});
  EXPECT_EQ(RunToEnd(job).code, 0) << job.Stderr();
  EXPECT_EQ(WorkerEnv(1)["WORLD_SIZE"], "2");
  EXPECT_EQ(WorkerEnv(1)["GROUP_RANK"], "0");
}

TEST_F(TorchrunTest, BadCommandLinesAreOneClearLine) {
  for (const auto& [args, message] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--rdzv_backend", "zookeeper", "--rdzv_endpoint", "h:1", "t.py"},
            "--rdzv_backend zookeeper is not supported"},
           {{"--nproc_per_node", "many", "t.py"}, "invalid value 'many' for --nproc_per_node"},
           {{"--no_python", "-m", "x"}, "don't use both"},
           {{"--nproc_per_node", "1", "missing.py"}, "training script missing.py does not exist"},
           {{"--local_addr", "999.1.1.1", "--no_python", "/bin/true"},
            "--local_addr '999.1.1.1' is not an IPv4 or IPv6 address"},
           {{"--rdzv_backend", "c10d", "--rdzv_endpoint", "127.0.0.1:29400:1", "--no_python",
             "/bin/true"},
            "invalid value '127.0.0.1:29400:1' for --rdzv_endpoint"},
       }) {
    auto job = Torchrun(args);
    EXPECT_EQ(RunToEnd(job).code, 2) << job.Stderr();
    EXPECT_NE(job.Stderr().find(message), std::string::npos) << job.Stderr();
    EXPECT_EQ(Split(job.Stderr(), '\n').size(), 1u) << job.Stderr();
  }
  // Refused before anything was made: no torchelastic_* directory is left behind.
  for (const auto& entry : std::filesystem::directory_iterator(dir_.path())) {
    EXPECT_EQ(entry.path().filename().string().rfind("torchelastic_", 0), std::string::npos)
        << entry.path();
  }
}

TEST_F(TorchrunTest, AnErrorFileShowsTheExceptionInTheReport) {
  // What torch's @record writes, written by a worker without torch.
  const std::string worker = Script("fail.sh", R"SH(#!/bin/sh
if [ "$RANK" = 1 ]; then
  printf '%s' '{"message": {"message": "ValueError: bad shard 7", "extraInfo": {"py_callstack": "Traceback (most recent call last):\n  File \"train.py\", line 12, in load_shard\n    raise ValueError(\"bad shard 7\")\nValueError: bad shard 7\n", "timestamp": "1"}}}' > "$TORCHELASTIC_ERROR_FILE"
  exit 1
fi
exec sleep 60
)SH");
  chmod(worker.c_str(), 0755);
  auto job = Torchrun({"--nproc_per_node", "2", "--no_python", worker});
  EXPECT_EQ(RunToEnd(job).code, 1) << job.Stderr();
  const std::string report = job.Stderr();
  EXPECT_NE(report.find("Root cause: rank 1"), std::string::npos) << report;
  EXPECT_NE(report.find("its exception (torch @record, TORCHELASTIC_ERROR_FILE): ValueError: bad "
                        "shard 7"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("    |   File \"train.py\", line 12, in load_shard"), std::string::npos)
      << report;
}

TEST_F(TorchrunTest, ARealDdpJobThroughTheTorchrunName) {
  ASSERT_TRUE(HasTorch()) << "python3-torch is not installed (deploy/install-deps.sh installs it)";
  Script("ddp.py", R"PY(
import os, torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.tensor([dist.get_rank() + 1.0])
dist.all_reduce(t)
print("rank %d of %d sum %.1f" % (dist.get_rank(), dist.get_world_size(), t.item()))
dist.destroy_process_group()
)PY");
  auto job = Torchrun({"--standalone", "--nproc_per_node", "3", "ddp.py"},
                      {"PYTHON_EXEC=/usr/bin/python3"});
  EXPECT_EQ(RunToEnd(job).code, 0) << job.Stderr();
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_NE(job.Stdout().find("rank " + std::to_string(rank) + " of 3 sum 6.0"),
              std::string::npos)
        << job.Stdout();
  }
}

TEST_F(TorchrunTest, RecordedExceptionOfARealTorchWorkerIsInTheReport) {
  ASSERT_TRUE(HasTorch()) << "python3-torch is not installed (deploy/install-deps.sh installs it)";
  Script("record.py", R"PY(
import os
from torch.distributed.elastic.multiprocessing.errors import record
def load_shard(n):
    raise ValueError("bad shard %d" % n)
@record
def main():
    if os.environ["RANK"] == "1":
        load_shard(7)
main()
)PY");
  auto job = Torchrun({"--nproc_per_node", "2", "record.py"}, {"PYTHON_EXEC=/usr/bin/python3"});
  EXPECT_EQ(RunToEnd(job).code, 1) << job.Stderr();
  const std::string report = job.Stderr();
  EXPECT_NE(report.find("its exception (torch @record, TORCHELASTIC_ERROR_FILE): ValueError: bad "
                        "shard 7"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("in load_shard"), std::string::npos) << report;
}

TEST_F(TorchrunTest, AnInvalidLaunchIsOneLineWithNoWarningBeforeIt) {
  // torchrun warns of OMP_NUM_THREADS for several processes per node, but only once the
  // launch is valid: a missing script is the one line.
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--nproc_per_node", "2", "missing.py"},
        std::vector<std::string>{"--nproc_per_node", "2"}}) {
    auto run = Torchrun(args);  // OMP_NUM_THREADS unset, as torchrun warns then
    EXPECT_EQ(RunToEnd(run).code, 2) << run.Stderr();
    const std::string err = run.Stderr();
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
    EXPECT_NE(err.find("training script"), std::string::npos) << err;
    EXPECT_EQ(err.find("OMP_NUM_THREADS"), std::string::npos) << err;
  }
}

TEST_F(TorchrunTest, TheDefaultRunIdIsTorchsButThePagesAndMetricsGetAUniqueJobLabel) {
  const std::string port = FreePort();
  auto job = Torchrun({"--nnodes", "1", "--nproc-per-node=1", "--rdzv-backend=c10d",
                       "--rdzv-endpoint=127.0.0.1:" + port, "--no-python", TestWorkerBinary(),
                       "--env", dir_.File("env"), "--wait-file", dir_.File("go")});
  ASSERT_EQ(WaitReady(1).size(), 1u) << job.Stderr();
  auto status = Launch({GangrunBinary(), "status", "--master", "127.0.0.1:" + port, "--json"}, {},
                       dir_.path(), dir_.path());
  ASSERT_EQ(RunToEnd(status).code, 0) << status.Stderr();
  const auto json = nlohmann::json::parse(status.Stdout());
  const std::string label = json.value("job_id", "");
  EXPECT_EQ(label.rfind("torchrun-", 0), 0u) << status.Stdout();
  EXPECT_GT(label.size(), std::string("torchrun-").size());
  std::ofstream(dir_.File("go")) << "go\n";
  EXPECT_EQ(RunToEnd(job).code, 0) << job.Stderr();
  // The workers keep torch's default, as under torchrun.
  EXPECT_NE(ReadFile(dir_.File("env.0")).find("\nTORCHELASTIC_RUN_ID=none\n"), std::string::npos);
}

}  // namespace
}  // namespace gangrun::testing
