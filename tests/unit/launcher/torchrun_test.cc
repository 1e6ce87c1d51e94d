// The torchrun personality's command line (launcher/torchrun.h).

#include "launcher/torchrun.h"

#include <gtest/gtest.h>

#include <csignal>
#include <map>

#include "launcher/parse_command_line.h"

namespace gangrun::launcher {
namespace {

EnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

constexpr AcceleratorCounts kHost{/*cpus=*/6, /*gpus=*/0};

ParseResult Parse(std::vector<std::string> args, std::map<std::string, std::string> env = {},
                  AcceleratorCounts counts = kHost) {
  auto result = ParseTorchrunCommandLine(args, Env(env), counts);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *result : ParseResult{};
}

std::string Error(std::vector<std::string> args, std::map<std::string, std::string> env = {},
                  AcceleratorCounts counts = kHost) {
  auto result = ParseTorchrunCommandLine(args, Env(env), counts);
  EXPECT_FALSE(result.ok());
  return result.ok() ? "" : std::string(result.status().message());
}

std::string WorkerEnv(const Options& o, const std::string& key) {
  for (const auto& [name, value] : o.worker_env) {
    if (name == key) return value;
  }
  return "<unset>";
}

TEST(TorchrunOptionsTest, PersonalityFollowsArgv0) {
  EXPECT_EQ(PersonalityFromArgv0("/opt/gangrun/bin/torchrun"), Personality::kTorchrun);
  EXPECT_EQ(PersonalityFromArgv0("torchrun"), Personality::kTorchrun);
  EXPECT_EQ(PersonalityName(Personality::kTorchrun), "torchrun");
  // ParseCommandLine hands the torchrun personality to torchrun's parser.
  auto parsed =
      ParseCommandLine(Personality::kTorchrun, {"--nproc_per_node", "3", "t.py"}, Env({}));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->options.local_worker_num, 3);
}

TEST(TorchrunOptionsTest, DefaultsAreTorchruns) {
  const Options o = Parse({"train.py", "--lr", "0.1"}).options;
  EXPECT_EQ(o.personality, Personality::kTorchrun);
  EXPECT_EQ(o.worker_num, 1);
  EXPECT_EQ(o.local_worker_num, 1);
  EXPECT_EQ(o.worker_num_min, 0);
  EXPECT_EQ(o.node_rank, 0);  // static rendezvous
  EXPECT_EQ(o.master_addr, "127.0.0.1");
  EXPECT_EQ(o.master_port, 29500);
  EXPECT_EQ(o.run_id, "none");
  EXPECT_EQ(o.role, "default");
  EXPECT_EQ(o.max_restarts, 0);
  EXPECT_EQ(o.cluster_time_out, 600);
  EXPECT_DOUBLE_EQ(o.last_call, 30);
  EXPECT_TRUE(o.join);
  EXPECT_EQ(o.task_mode, TaskMode::kPython);
  EXPECT_EQ(o.log_prefix, "");
  EXPECT_TRUE(o.may_host_scheduler);
  EXPECT_EQ(o.task_script, "train.py");
  EXPECT_EQ(o.task_args, (std::vector<std::string>{"--lr", "0.1"}));
  // One process: OMP_NUM_THREADS is left alone; NCCL's async error handling is on.
  EXPECT_EQ(WorkerEnv(o, "OMP_NUM_THREADS"), "<unset>");
  EXPECT_EQ(WorkerEnv(o, "NCCL_ASYNC_ERROR_HANDLING"), "1");
  EXPECT_EQ(WorkerEnv(o, "TORCH_NCCL_ASYNC_ERROR_HANDLING"), "1");
}

TEST(TorchrunOptionsTest, Torch29sShutdownTimeoutVirtualLocalRankAndPlugins) {
  EXPECT_DOUBLE_EQ(Parse({"--shutdown-timeout", "7", "t.py"}).options.grace_period, 7);
  EXPECT_DOUBLE_EQ(Parse({"t.py"}, {{"TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "9"}}).options.grace_period,
                   9);
  EXPECT_DOUBLE_EQ(
      Parse({"--shutdown_timeout=3", "t.py"}, {{"TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "9"}})
          .options.grace_period,
      3);
  EXPECT_NE(Error({"--shutdown-timeout", "soon", "t.py"}).find("--shutdown_timeout"),
            std::string::npos);
  EXPECT_TRUE(Parse({"--virtual-local-rank", "t.py"}).options.virtual_local_rank);
  EXPECT_TRUE(Parse({"t.py"}, {{"PET_VIRTUAL_LOCAL_RANK", "1"}}).options.virtual_local_rank);
  EXPECT_FALSE(Parse({"t.py"}).options.virtual_local_rank);
  Parse({"--logs-specs", "default", "--event-log-handler", "null", "t.py"});
  EXPECT_NE(Error({"--logs-specs", "mine", "t.py"}).find("'mine' for --logs_specs"),
            std::string::npos);
  EXPECT_NE(Error({"--event-log-handler", "console", "t.py"}).find("'console'"), std::string::npos);
  // --numa-binding: torch's four modes.
  for (const char* mode : {"node", "socket", "exclusive", "core-complex"}) {
    EXPECT_EQ(Parse({"--numa-binding", mode, "t.py"}).options.numa_binding, mode);
  }
  EXPECT_NE(Error({"--numa-binding", "nodes", "t.py"}).find("'nodes' for --numa_binding"),
            std::string::npos);
}

TEST(TorchrunOptionsTest, AUniquePrefixIsItsOptionAndAnAmbiguousOneIsRefusedNamingThem) {
  const Options o =
      Parse({"--nproc", "2", "--max-re", "4", "--stand", "t.py", "--nproc", "9"}).options;
  EXPECT_EQ(o.local_worker_num, 2);
  EXPECT_EQ(o.max_restarts, 4);
  EXPECT_EQ(o.master_port, kTorchC10dPort);  // --standalone
  EXPECT_EQ(o.task_args, (std::vector<std::string>{"--nproc", "9"})) << "the script's own";
  EXPECT_EQ(Parse({"--nproc=3", "t.py"}).options.local_worker_num, 3);
  // A value that looks like an option is the option's value, not a prefix to expand.
  EXPECT_EQ(Parse({"--role", "--nproc", "t.py"}).options.role, "--nproc");
  const std::string ambiguous = Error({"--n", "2", "t.py"});
  EXPECT_NE(ambiguous.find("ambiguous option: --n could match --nnodes"), std::string::npos)
      << ambiguous;
  EXPECT_NE(ambiguous.find("--nproc-per-node"), std::string::npos) << ambiguous;
  EXPECT_EQ(ambiguous.find("--node_timeout"), std::string::npos) << "gangrun's own: full names";
}

TEST(TorchrunOptionsTest, TorchsOwnOptionsWinAPrefixAndGangrunsAreReachedByTheirFullNames) {
  // torch accepts these (--node_rank, --max_restarts); gangrun's --node_timeout and
  // --max_no_progress_restarts share the prefixes but never take them.
  const Options o = Parse({"--node", "1", "--max", "3", "--nnodes", "2", "--master_addr", "h0",
                           "--node_timeout", "7", "t.py"})
                        .options;
  EXPECT_EQ(o.node_rank, 1);
  EXPECT_EQ(o.max_restarts, 3);
  EXPECT_EQ(o.node_timeout, 7);
  EXPECT_NE(Error({"--node_time", "7", "t.py"}).find("--node_time"), std::string::npos);
}

TEST(TorchrunOptionsTest, SignalsToHandleStopOnStopSignalsAndForwardTheOthers) {
  EXPECT_EQ(Parse({"t.py"}).options.signals_to_forward, (std::vector<int>{SIGUSR1, SIGUSR2}));
  EXPECT_EQ(Parse({"--signals-to-handle", "SIGTERM,SIGINT,SIGHUP,SIGQUIT", "t.py"})
                .options.signals_to_forward,
            std::vector<int>{SIGQUIT});
  EXPECT_EQ(Parse({"t.py"}, {{"PET_SIGNALS_TO_HANDLE", "SIGUSR2"}}).options.signals_to_forward,
            std::vector<int>{SIGUSR2});
  EXPECT_NE(Error({"--signals-to-handle", "SIGKILL", "t.py"}).find("SIGKILL"), std::string::npos);
  EXPECT_NE(Error({"--signals-to-handle", "SIGUSR1,bogus", "t.py"}).find("signal names"),
            std::string::npos);
}

TEST(TorchrunOptionsTest, EverySpellingOfEveryValueOption) {
  const std::vector<std::pair<std::string, std::string>> spellings = {
      {"--nproc_per_node", "--nproc-per-node"},
      {"--rdzv_backend", "--rdzv-backend"},
      {"--rdzv_endpoint", "--rdzv-endpoint"},
      {"--rdzv_id", "--rdzv-id"},
      {"--rdzv_conf", "--rdzv-conf"},
      {"--max_restarts", "--max-restarts"},
      {"--monitor_interval", "--monitor-interval"},
      {"--start_method", "--start-method"},
      {"--log_dir", "--log-dir"},
      {"--local_addr", "--local-addr"},
      {"--local_ranks_filter", "--local-ranks-filter"},
      {"--signals_to_handle", "--signals-to-handle"}};
  const std::map<std::string, std::string> values = {{"nproc_per_node", "4"},
                                                     {"rdzv_backend", "c10d"},
                                                     {"rdzv_endpoint", "10.0.0.7:1234"},
                                                     {"rdzv_id", "job42"},
                                                     {"rdzv_conf", "join_timeout=77"},
                                                     {"max_restarts", "3"},
                                                     {"monitor_interval", "0.5"},
                                                     {"start_method", "fork"},
                                                     {"log_dir", "/tmp/logs"},
                                                     {"local_addr", "10.0.0.8"},
                                                     {"local_ranks_filter", "1"},
                                                     {"signals_to_handle", "SIGTERM,SIGUSR1"}};
  for (const auto& [underscore, dash] : spellings) {
    const std::string name = underscore.substr(2);
    for (const std::string& spelling : {underscore, dash}) {
      SCOPED_TRACE(spelling);
      // Every other option is needed by some of them (c10d needs an endpoint).
      std::vector<std::string> args = {"--rdzv_backend",   "c10d", "--rdzv_endpoint", "h:1",
                                       "--nproc_per_node", "2"};
      for (const auto& form : {std::vector<std::string>{spelling, values.at(name)},
                               std::vector<std::string>{spelling + "=" + values.at(name)}}) {
        std::vector<std::string> all = args;
        all.insert(all.end(), form.begin(), form.end());
        all.push_back("t.py");
        const Options o = Parse(all).options;
        if (name == "nproc_per_node") {
          EXPECT_EQ(o.local_worker_num, 4);
        }
        if (name == "rdzv_endpoint") {
          EXPECT_EQ(o.master_addr, "10.0.0.7");
          EXPECT_EQ(o.master_port, 1234);
        }
        if (name == "rdzv_id") {
          EXPECT_EQ(o.run_id, "job42");
        }
        if (name == "rdzv_conf") {
          EXPECT_EQ(o.cluster_time_out, 77);
        }
        if (name == "max_restarts") {
          EXPECT_EQ(o.max_restarts, 3);
        }
        if (name == "log_dir") {
          EXPECT_EQ(o.log_dir, "/tmp/logs");
        }
        if (name == "local_addr") {
          EXPECT_EQ(o.local_addr, "10.0.0.8");
        }
        if (name == "local_ranks_filter") {
          EXPECT_EQ(o.console_local_ranks, std::set<int>{1});
        }
        if (name == "signals_to_handle") {
          EXPECT_EQ(o.signals_to_forward, std::vector<int>{SIGUSR1});
        }
      }
    }
  }
}

TEST(TorchrunOptionsTest, NnodesAndNprocMakeTheSizes) {
  Options o = Parse({"--nnodes", "4", "--nproc_per_node", "8", "t.py"}).options;
  EXPECT_EQ(o.worker_num, 32);
  EXPECT_EQ(o.local_worker_num, 8);
  EXPECT_FALSE(o.elastic());
  // MIN:MAX is an elastic job whose node ranks follow who joined.
  o = Parse({"--nnodes=2:4", "--nproc-per-node=2", "--rdzv_backend=c10d", "--rdzv_endpoint=h:5",
             "t.py"})
          .options;
  EXPECT_EQ(o.worker_num, 8);
  EXPECT_EQ(o.worker_num_min, 4);
  EXPECT_TRUE(o.elastic());
  EXPECT_EQ(o.node_rank, -1);
  for (const char* bad : {"0", "3:2", "x", "1:2:3", ""}) {
    EXPECT_NE(Error({"--nnodes", bad, "t.py"}).find("for --nnodes: expected N or MIN:MAX"),
              std::string::npos)
        << bad;
  }
}

TEST(TorchrunOptionsTest, NprocAutoCpuAndGpuCountTheHost) {
  EXPECT_EQ(Parse({"--nproc_per_node", "cpu", "t.py"}).options.local_worker_num, 6);
  EXPECT_EQ(Parse({"--nproc_per_node", "auto", "t.py"}).options.local_worker_num, 6);
  EXPECT_EQ(Parse({"--nproc_per_node", "auto", "t.py"}, {}, {6, 2}).options.local_worker_num, 2);
  EXPECT_EQ(Parse({"--nproc_per_node", "gpu", "t.py"}, {}, {6, 2}).options.local_worker_num, 2);
  EXPECT_NE(Error({"--nproc_per_node", "gpu", "t.py"}).find("no CUDA device"), std::string::npos);
  EXPECT_NE(Error({"--nproc_per_node", "0", "t.py"}).find("auto, cpu, gpu or an integer"),
            std::string::npos);
}

TEST(TorchrunOptionsTest, StaticRendezvousTakesNodeRankAndMaster) {
  Options o = Parse({"--nnodes", "2", "--node_rank", "1", "--master_addr", "10.1.1.1",
                     "--master_port", "3456", "t.py"})
                  .options;
  EXPECT_EQ(o.node_rank, 1);
  EXPECT_EQ(o.master_addr, "10.1.1.1");
  EXPECT_EQ(o.master_port, 3456);
  // The endpoint, when given, is the master (with its port).
  o = Parse({"--rdzv_endpoint", "[::1]:4000", "t.py"}).options;
  EXPECT_EQ(o.master_addr, "::1");
  EXPECT_EQ(o.master_port, 4000);
  EXPECT_NE(Error({"--rdzv_endpoint", "host", "t.py"}).find("needs the port"), std::string::npos);
  EXPECT_NE(Error({"--nnodes", "2", "--node_rank", "2", "t.py"}).find("--nnodes is 2"),
            std::string::npos);
  EXPECT_NE(Error({"--master_port", "70000", "t.py"}).find("for --master_port"), std::string::npos);
}

TEST(TorchrunOptionsTest, C10dRendezvousHostsTheSchedulerAtTheEndpoint) {
  Options o = Parse({"--nnodes", "2", "--rdzv_backend", "c10d", "--rdzv_endpoint", "node0",
                     "--node_rank", "1", "--master_port", "1", "t.py"})
                  .options;
  EXPECT_EQ(o.master_addr, "node0");
  EXPECT_EQ(o.master_port, kTorchC10dPort);
  EXPECT_EQ(o.node_rank, -1);  // torchrun's c10d ignores --node_rank too
  o = Parse({"--rdzv_backend", "c10d", "--rdzv_endpoint", "localhost:29401", "t.py"}).options;
  EXPECT_EQ(o.master_addr, "127.0.0.1");
  EXPECT_EQ(o.master_port, 29401);
  // An IPv6 address alone is an address, not a name to look up; two colons otherwise are wrong.
  o = Parse({"--rdzv_backend", "c10d", "--rdzv_endpoint", "::1", "t.py"}).options;
  EXPECT_EQ(o.master_addr, "::1");
  EXPECT_EQ(o.master_port, kTorchC10dPort);
  o = Parse({"--rdzv_backend", "c10d", "--rdzv_endpoint", "[fd00::2]:7", "t.py"}).options;
  EXPECT_EQ(o.master_addr, "fd00::2");
  EXPECT_EQ(o.master_port, 7);
  for (const char* bad : {"127.0.0.1:29400:1", "[nope]:5", "a b:3", "h:0", "[::1]:x", ":5"}) {
    EXPECT_NE(
        Error({"--rdzv_backend", "c10d", "--rdzv_endpoint", bad, "t.py"}).find("invalid value"),
        std::string::npos)
        << bad;
  }
  EXPECT_NE(Error({"--rdzv_backend", "c10d", "t.py"}).find("needs --rdzv_endpoint"),
            std::string::npos);
  EXPECT_EQ(Error({"--rdzv_backend", "zookeeper", "--rdzv_endpoint", "h:1", "t.py"}),
            "--rdzv_backend zookeeper is not supported: gangrun's scheduler is the rendezvous; "
            "use static, c10d or etcd");
  // etcd (and etcd-v2) is the store of record (README "A store of record").
  for (const char* backend : {"etcd", "etcd-v2"}) {
    o = Parse({"--rdzv_backend", backend, "--rdzv_endpoint", "10.0.0.5:2379", "--rdzv_id", "j7",
               "t.py"})
            .options;
    EXPECT_EQ(o.store, "etcd://10.0.0.5:2379") << backend;
    EXPECT_EQ(o.run_id, "j7");
    EXPECT_EQ(o.node_rank, -1);
  }
  EXPECT_NE(Error({"--rdzv_backend", "etcd", "t.py"}).find("needs --rdzv_endpoint HOST:PORT"),
            std::string::npos);
  EXPECT_NE(Error({"--rdzv_backend", "etcd", "--rdzv_endpoint", "h:2379", "t.py"})
                .find("needs --rdzv_id"),
            std::string::npos);
  // torch's etcd backend's --rdzv_conf: TLS files and the key prefix.
  o = Parse({"--rdzv_backend", "etcd", "--rdzv_endpoint", "10.0.0.5:2379", "--rdzv_id", "j7",
             "--rdzv_conf",
             "protocol=https,cacert=/ca.pem,cert=/c.pem,key=/c.key,etcd_prefix=/te/p2p", "t.py"})
          .options;
  EXPECT_EQ(o.store, "etcd://10.0.0.5:2379/te/p2p");
  EXPECT_EQ(o.store_cacert, "/ca.pem");
  EXPECT_EQ(o.store_cert, "/c.pem");
  EXPECT_EQ(o.store_key, "/c.key");
  EXPECT_NE(Error({"--rdzv_backend", "c10d", "--rdzv_endpoint", "h:1", "--rdzv_conf",
                   "cacert=/ca.pem", "t.py"})
                .find("need --rdzv_backend etcd"),
            std::string::npos);
  EXPECT_NE(Error({"--rdzv_backend", "c10d", "--rdzv_endpoint", "h:port", "t.py"})
                .find("for --rdzv_endpoint"),
            std::string::npos);
}

TEST(TorchrunOptionsTest, StandaloneIsALocalC10dWithAnIdOfItsOwn) {
  const Options o =
      Parse({"--standalone", "--rdzv_id", "ignored", "--nproc_per_node", "2", "t.py"}).options;
  EXPECT_EQ(o.master_addr, "127.0.0.1");
  EXPECT_EQ(o.master_port, kTorchC10dPort);
  EXPECT_EQ(o.run_id, "");  // gangrun makes up the job's id
  EXPECT_EQ(o.node_rank, -1);
}

TEST(TorchrunOptionsTest, RdzvConfMapsWhatHasAMeaning) {
  auto parsed = Parse({"--rdzv_conf",
                       "join_timeout=900, last_call_timeout=2.5,is_host=false,"
                       "read_timeout=60,timeout=30,my_key=1",
                       "t.py"});
  EXPECT_EQ(parsed.options.cluster_time_out, 900);
  EXPECT_DOUBLE_EQ(parsed.options.last_call, 2.5);
  EXPECT_FALSE(parsed.options.may_host_scheduler);
  ASSERT_EQ(parsed.warnings.size(), 1u);
  EXPECT_EQ(parsed.warnings[0], "--rdzv_conf my_key has no meaning for gangrun; ignored");
  for (const char* bad : {"join_timeout", "=1", "a=", "join_timeout=x", "is_host=maybe"}) {
    EXPECT_NE(Error({"--rdzv_conf", bad, "t.py"}).find("for --rdzv_conf"), std::string::npos)
        << bad;
  }
}

TEST(TorchrunOptionsTest, AcceptedOptionsAreChecked) {
  EXPECT_EQ(Parse({"--monitor_interval", "0.1", "--start_method", "forkserver", "t.py"})
                .options.task_script,
            "t.py");
  EXPECT_NE(Error({"--monitor_interval", "-1", "t.py"}).find("for --monitor_interval"),
            std::string::npos);
  EXPECT_NE(Error({"--start_method", "thread", "t.py"}).find("spawn, fork or forkserver"),
            std::string::npos);
  EXPECT_NE(Error({"--max_restarts", "-1", "t.py"}).find("for --max_restarts"), std::string::npos);
  EXPECT_EQ(Error({"--bogus", "t.py"}), "unknown option --bogus (see torchrun --help)");
}

TEST(TorchrunOptionsTest, ModuleNoPythonAndRunPathChooseTheCommand) {
  EXPECT_EQ(Parse({"-m", "pkg.train", "--x"}).options.task_mode, TaskMode::kModule);
  EXPECT_EQ(Parse({"--module", "pkg.train"}).options.task_script, "pkg.train");
  EXPECT_EQ(Parse({"--no_python", "./run.sh"}).options.task_mode, TaskMode::kExec);
  EXPECT_EQ(Parse({"--no-python", "./run.sh"}).options.task_mode, TaskMode::kExec);
  EXPECT_EQ(Parse({"--run_path", "--no_python", "/abs/t.py"}).options.task_mode, TaskMode::kPython);
  EXPECT_NE(Error({"-m", "--no_python", "x"}).find("don't use both"), std::string::npos);
  EXPECT_EQ(Parse({"t.py"}, {{"PYTHON_EXEC", "/venv/bin/python"}}).options.python_exec,
            "/venv/bin/python");
}

TEST(TorchrunOptionsTest, ScriptArgumentsAreUntouched) {
  const Options o = Parse({"--nproc_per_node", "2", "t.py", "--nproc_per_node", "9", "-m",
                           "--standalone", "--", "x"})
                        .options;
  EXPECT_EQ(o.local_worker_num, 2);
  EXPECT_EQ(o.task_args,
            (std::vector<std::string>{"--nproc_per_node", "9", "-m", "--standalone", "--", "x"}));
}

TEST(TorchrunOptionsTest, RedirectsTeeAndFilterChooseTheConsole) {
  auto console = [](std::vector<std::string> args) {
    args.insert(args.begin(), {"--nproc_per_node", "3"});
    args.push_back("t.py");
    return Parse(args).options;
  };
  EXPECT_EQ(console({}).console_local_ranks, (std::set<int>{0, 1, 2}));
  Options o = console({"-r", "3"});
  EXPECT_TRUE(o.console_local_ranks.empty());
  EXPECT_TRUE(o.tail_worker_log.empty());  // nothing on the console
  o = console({"--redirects=0:3,2:3", "--tee", "2:3"});
  EXPECT_EQ(o.console_local_ranks, (std::set<int>{1, 2}));
  EXPECT_EQ(o.log_prefix, "[default{local_rank}]:");
  o = console({"-t3", "--role", "trainer"});
  EXPECT_EQ(o.log_prefix, "[trainer{local_rank}]:");
  EXPECT_EQ(console({"-r", "1"}).console_local_ranks, (std::set<int>{0, 1, 2}));  // stdout only
  EXPECT_EQ(console({"--local-ranks-filter", "0,2"}).console_local_ranks, (std::set<int>{0, 2}));
  EXPECT_NE(Error({"-r", "4", "t.py"}).find("for --redirects"), std::string::npos);
  EXPECT_NE(Error({"--tee", "0:x", "t.py"}).find("for --tee"), std::string::npos);
}

TEST(TorchrunOptionsTest, PetVariablesAreReadAsTorchrunReadsThem) {
  Options o = Parse({"t.py"}, {{"PET_NPROC_PER_NODE", "4"},
                               {"PET_NNODES", "2"},
                               {"PET_NODE_RANK", "1"},
                               {"PET_MASTER_ADDR", "10.2.2.2"},
                               {"PET_MASTER_PORT", "2222"},
                               {"PET_RDZV_ID", "petjob"},
                               {"PET_MAX_RESTARTS", "5"},
                               {"PET_ROLE", "worker"}})
                  .options;
  EXPECT_EQ(o.local_worker_num, 4);
  EXPECT_EQ(o.worker_num, 8);
  EXPECT_EQ(o.node_rank, 1);
  EXPECT_EQ(o.master_addr, "10.2.2.2");
  EXPECT_EQ(o.master_port, 2222);
  EXPECT_EQ(o.run_id, "petjob");
  EXPECT_EQ(o.max_restarts, 5);
  EXPECT_EQ(o.role, "worker");
  // A flag wins over its variable.
  EXPECT_EQ(Parse({"--nproc_per_node", "2", "t.py"}, {{"PET_NPROC_PER_NODE", "4"}})
                .options.local_worker_num,
            2);
  // Flags: set when the variable is a non-zero integer.
  EXPECT_EQ(Parse({"t.py"}, {{"PET_STANDALONE", "1"}}).options.master_port, kTorchC10dPort);
  EXPECT_EQ(Parse({"t.py"}, {{"PET_STANDALONE", "0"}}).options.master_port, 29500);
  EXPECT_EQ(Parse({"x"}, {{"PET_NO_PYTHON", "1"}}).options.task_mode, TaskMode::kExec);
  EXPECT_EQ(Parse({"x"}, {{"PET_MODULE", "1"}}).options.task_mode, TaskMode::kModule);
  EXPECT_EQ(Error({"t.py"}, {{"PET_STANDALONE", "yes"}}),
            "invalid value 'yes' for PET_STANDALONE: expected an integer (0 or 1)");
  EXPECT_EQ(Error({"t.py"}, {{"PET_NNODES", "x"}}),
            "invalid value 'x' for PET_NNODES: expected N or MIN:MAX with 1 <= MIN <= MAX");
}

TEST(TorchrunOptionsTest, GangrunsOwnOptionsWorkToo) {
  const Options o = Parse({"--grace_period", "5", "--hang-timeout=3", "--metrics_port", "0",
                           "--log_prefix", "[{rank}] ", "--last_call", "0.5", "t.py"},
                          {{"GANGRUN_STACK_TIMEOUT", "2"}})
                        .options;
  EXPECT_DOUBLE_EQ(o.grace_period, 5);
  EXPECT_DOUBLE_EQ(o.hang_timeout, 3);
  EXPECT_EQ(o.metrics_port, 0);
  EXPECT_EQ(o.log_prefix, "[{rank}] ");  // gangrun's own option wins over torchrun's default
  EXPECT_DOUBLE_EQ(o.last_call, 0.5);
  EXPECT_DOUBLE_EQ(o.stack_timeout, 2);
  EXPECT_EQ(Error({"--grace_period", "x", "t.py"}).rfind("invalid value 'x' for --grace_period", 0),
            0u);
  // --rdzv_id wins over gangrun's --run_id.
  EXPECT_EQ(Parse({"--run_id", "a", "--rdzv_id", "b", "t.py"}).options.run_id, "b");
  EXPECT_EQ(Parse({"--run_id", "a", "t.py"}).options.run_id, "a");
}

TEST(TorchrunOptionsTest, OmpNumThreadsIsOneForSeveralProcessesUnlessSet) {
  auto parsed = Parse({"--nproc_per_node", "2", "t.py"});
  EXPECT_EQ(WorkerEnv(parsed.options, "OMP_NUM_THREADS"), "1");
  ASSERT_EQ(parsed.warnings.size(), 1u);
  EXPECT_NE(parsed.warnings[0].find("OMP_NUM_THREADS"), std::string::npos);
  parsed = Parse({"--nproc_per_node", "2", "t.py"},
                 {{"OMP_NUM_THREADS", "4"}, {"NCCL_ASYNC_ERROR_HANDLING", "0"}});
  EXPECT_EQ(WorkerEnv(parsed.options, "OMP_NUM_THREADS"), "<unset>");  // theirs, inherited
  EXPECT_EQ(WorkerEnv(parsed.options, "NCCL_ASYNC_ERROR_HANDLING"), "<unset>");
  EXPECT_TRUE(parsed.warnings.empty());
}

TEST(TorchrunOptionsTest, HelpListsTorchrunsOptions) {
  auto parsed = Parse({"--help"});
  EXPECT_NE(parsed.help.find("--nproc_per_node"), std::string::npos);
  EXPECT_NE(parsed.help.find("--rdzv-endpoint"), std::string::npos);
  EXPECT_NE(parsed.help.find("--hang_timeout"), std::string::npos);
}

TEST(TorchrunOptionsTest, CudaVisibleDevicesCountsGpus) {
  EXPECT_EQ(CountAccelerators(Env({{"CUDA_VISIBLE_DEVICES", "0,1,3"}})).gpus, 3);
  EXPECT_EQ(CountAccelerators(Env({{"CUDA_VISIBLE_DEVICES", ""}})).gpus, 0);
  EXPECT_EQ(CountAccelerators(Env({{"CUDA_VISIBLE_DEVICES", "0,-1,2"}})).gpus, 1);
  EXPECT_GE(CountAccelerators(Env({})).cpus, 1);
}

}  // namespace
}  // namespace gangrun::launcher
