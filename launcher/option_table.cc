#include "launcher/option_table.h"

#include "launcher/option_codecs.h"

namespace gangrun::launcher {
namespace {

using namespace codec;  // NOLINT: the rows read as a table

OptionRow Row(std::string name, std::string help, Codec codec, bool travels = true) {
  return {std::move(name), std::move(help), std::move(codec.set), std::move(codec.format), travels};
}

std::vector<OptionRow> MakeMsrunRows() {
  constexpr int kMaxRank = kMaxWorkers - 1;
  constexpr int kYear = 365 * 24 * 3600;
  return {
      Row("worker_num",
          "total number of workers in the job, or MIN:MAX for an elastic job (default 8)" +
              Range(1, kMaxWorkers),
          WorkerNum()),
      Row("local_worker_num", "workers on this host (default 8)" + Range(1, kMaxLocalWorkers),
          Int(&Options::local_worker_num, 1, kMaxLocalWorkers)),
      Row("master_addr", "scheduler address: IPv4, IPv6 or host name (default 127.0.0.1)",
          String(&Options::master_addr)),
      Row("master_port", "scheduler port (default 8118)" + Range(1, 65535),
          Int(&Options::master_port, 1, 65535)),
      Row("node_rank",
          "rank of this node, -1 = assigned at rendezvous (default -1)" + Range(-1, kMaxRank),
          Int(&Options::node_rank, -1, kMaxRank)),
      Row("log_dir", "directory for worker logs (default: current directory)",
          String(&Options::log_dir)),
      Row("join", "wait for the job and return its outcome (gangrun: True, msrun: False)",
          Bool(&Options::join)),
      Row("cluster_time_out",
          "seconds to wait for the cluster to form, <0 = forever (default 600)" + Range(-1, kYear),
          Int(&Options::cluster_time_out, 0, kYear, /*negative_means_forever=*/true)),
      Row("bind_core", "pin workers to CPUs: False, True or a JSON dict (default False)",
          BindCoreDict()),
      Row("bind_numa",
          "each worker's CPUs and memory on its NUMA node: False, True, or a JSON dict (or .json "
          "file) with bind_config, bind_cpu, bind_memory (default False)",
          BindNumaConfig()),
      Row("sim_level",
          "simulated compilation level, exported as MS_SIMULATION_LEVEL (default -1)" +
              Range(-1, 3),
          Int(&Options::sim_level, -1, 3)),
      Row("sim_rank_id", "rank of the single simulated process (default -1)" + Range(-1, kMaxRank),
          Int(&Options::sim_rank_id, -1, kMaxRank)),
      Row("rank_table_file", "rank table file, exported as RANK_TABLE_FILE",
          String(&Options::rank_table_file)),
      Row("worker_log_name", "worker log name prefix; {ip} and {hostname} are substituted",
          String(&Options::worker_log_name)),
      Row("tail_worker_log", "ranks whose logs are shown on the console, -1 = all (default -1)",
          TailRanks()),
  };
}

// README "Failures and recovery".
std::vector<OptionRow> MakeRecoveryRows() {
  return {
      Row("spare_nodes",
          "launchers beyond the job's size that join and wait, running nothing, to take a lost "
          "or excluded node's place at once (default 0)" +
              Range(0, 100000),
          Int(&Options::spare_nodes, 0, 100000)),
      Row("rejoin_window",
          "seconds a lost node's place is held for a launcher to come back (its host's, started "
          "again: it keeps the node rank and ranks) before a spare takes it (default 0: at once)" +
              Range(0.0, 3600.0),
          SecondsOption(&Options::rejoin_window, 0, 3600)),
      Row("topology_domain",
          "NAME: this host's segment or NVLink domain; a lost node's place goes to a spare of "
          "its domain first, else to any spare with as many workers ('' = none)",
          String(&Options::topology_domain), /*travels=*/false),
      Row("health_check",
          "a shell command every node runs before it joins and before each generation; non-zero "
          "or too slow excludes the node (exit 6) ('' = none)",
          String(&Options::health_check)),
      Row("health_check_timeout",
          "seconds the health check may take (default 60)" + Range(0.1, 86400.0),
          SecondsOption(&Options::health_check_timeout, 0.1, 86400)),
      Row("kernel_log",
          "PATH: this host's kernel log, read for a failed rank's evidence of a failing device "
          "(its lines since the generation started go to --restart_rules and the report): "
          "/dev/kmsg, a text file the kernel's log is appended to, or '' (none; default "
          "/dev/kmsg)",
          String(&Options::kernel_log), /*travels=*/false),
      Row("device_files",
          "GLOB[,GLOB...]: this host's accelerator device files; a failed rank's report names "
          "the processes outside the job that hold one open ('' = none; default "
          "/dev/nvidia[0-9]*,/dev/davinci[0-9]*,/dev/accel/accel[0-9]*)",
          String(&Options::device_files), /*travels=*/false),
      Row("exclude_after",
          "exclude a node that was the root cause of this many failed generations in a row "
          "(exit 6; default 0: never)" +
              Range(0, 1000000),
          Int(&Options::exclude_after, 0, 1000000)),
      Row("no_restart_exit_codes",
          "CODE[,CODE...]: a worker exiting with one of them ends the job at once with that code, "
          "whatever restarts are left ('' = none)",
          ExitCodes(&Options::no_restart_exit_codes)),
      Row("max_no_progress_restarts",
          "stop after this many failed generations in a row in which no rank reported a step "
          "beyond every earlier generation's (default 0: off)" +
              Range(0, 1000000),
          Int(&Options::max_no_progress_restarts, 0, 1000000)),
      Row("max_same_failures",
          "stop after this many failed generations in a row that failed the same way (the same "
          "exception at the same line, or the same exit and last log line) with no step gained "
          "(default 3; 0: off)" +
              Range(0, 1000000),
          Int(&Options::max_same_failures, 0, 1000000)),
      Row("restart_rules",
          "FILE: lines 'restart|stop|exclude PATTERN' (RE2) matched against a failing rank's "
          "exit, exception and last log lines; the first match decides, before gangrun's own "
          "hardware signatures (exclude: the node leaves, a spare takes its place, the restart "
          "is not counted) ('' = those only; read where the scheduler runs)",
          String(&Options::restart_rules)),
      Row("signals_to_forward",
          "SIG[,SIG...]: such a signal to any launcher reaches every worker of the job, which "
          "goes on (default SIGUSR1,SIGUSR2; '' = none)",
          Signals(&Options::signals_to_forward)),
      Row("time_limit",
          "seconds the job may run; then it stops and every launcher exits 7 (default 0: none)" +
              Range(0.0, kMaxTimeLimit),
          SecondsOption(&Options::time_limit, 0, kMaxTimeLimit)),
      Row("time_limit_signal",
          "SIG@S: send SIG to every worker S seconds before --time_limit ('' = none)",
          TimeLimitSignal()),
  };
}

// README "Progress, hangs and stragglers".
std::vector<OptionRow> MakeProgressRows() {
  return {
      Row("hang_timeout",
          "a rank that has reported progress (GANGRUN_PROGRESS) and then reports nothing for this "
          "many seconds is hung; 'auto' learns the bound per rank (default 0: off)" +
              Range(0.0, kMaxHangSeconds),
          HangTimeout()),
      Row("hang_timeout_initial",
          "seconds from a rank's start to its first progress report (default 0: off)" +
              Range(0.0, kMaxHangSeconds),
          SecondsOption(&Options::hang_timeout_initial, 0, kMaxHangSeconds)),
      Row("section_timeout",
          "NAME=S[,NAME=S...]: inside the named section only its bound applies ('' = none)",
          SectionTimeouts()),
      Row("stack_timeout",
          "seconds to capture every rank's stack when the job hangs (default 10)" +
              Range(0.1, 600.0),
          SecondsOption(&Options::stack_timeout, 0.1, 600)),
      Row("progress_hook",
          "Python workers get gangrun's hook: their stacks on demand, and torch.distributed's "
          "collectives and optimizer steps as progress, with no code (default True)",
          Bool(&Options::progress_hook)),
      Row("straggler_factor",
          "a rank slower per step than this multiple of the job's median is a straggler "
          "(default 1.5) [1..1000]",
          SecondsOption(&Options::straggler_factor, 1.0, 1000, "a factor")),
  };
}

// README "Bounds and safety" (the key-value store) and "Coming from torchrun" (torch's store).
std::vector<OptionRow> MakeKeyValueRows() {
  return {
      Row("kv_max_bytes",
          "total size of the job's key-value store (default 256MiB) [1MiB..1TiB; K/M/G/T "
          "suffixes]",
          KvMaxBytes()),
      Row("kv_max_waits",
          "gets and barrier arrivals that may wait in the key-value store at once (default "
          "65536)" +
              Range(16, 1 << 20),
          Int(&Options::kv_max_waits, 16, 1 << 20)),
      Row("agent_store",
          "the workers' torch store is served by gangrun's scheduler, as torchrun's agent "
          "store (TORCHELASTIC_USE_AGENT_STORE=True): it outlives a generation and is bounded "
          "by --kv_max_bytes (default False: rank 0 hosts it)",
          Bool(&Options::agent_store)),
      Row("store_wait_report",
          "with --agent_store True: ranks that wait this long in the store for keys no rank has "
          "set are named (the ranks that never set theirs), and with --hang_timeout the job "
          "stops as a hang at start-up; 0: never (default 60)" +
              Range(0.0, 86400.0),
          SecondsOption(&Options::store_wait_report, 0, 86400)),
  };
}

// README "A store of record".
std::vector<OptionRow> MakeStoreRows() {
  return {
      Row("store",
          "etcd://HOST:PORT[,HOST:PORT...][/PREFIX]: the job's store of record; any launcher "
          "of the run id may coordinate and takes over when the coordinating one is lost "
          "('' = none)",
          String(&Options::store)),
      Row("store_cacert", "CA bundle that verifies the store's members (TLS to etcd)",
          String(&Options::store_cacert)),
      Row("store_cert", "client certificate presented to the store", String(&Options::store_cert)),
      Row("store_key", "the client certificate's key", String(&Options::store_key)),
      Row("store_follow",
          "a daemon's job (set by gangrun scheduler): never coordinate; keep the workers while "
          "the job's scheduler moves and follow the one the store names",
          Bool(&Options::store_follow)),
  };
}

std::vector<OptionRow> MakeGangrunRows() {
  std::vector<OptionRow> rows = {
      Row("max_restarts", "restarts allowed after failures (default 0)" + Range(0, 1000000),
          Int(&Options::max_restarts, 0, 1000000)),
      Row("restart_backoff",
          "restart backoff INITIAL[,CAP] in seconds (default 1,30)" + Range(0.0, kMaxBackoff),
          Backoff()),
      Row("heartbeat_interval", "seconds between node heartbeats (default 1)" + Range(0.01, 60.0),
          SecondsOption(&Options::heartbeat_interval, 0.01, 60)),
      Row("node_timeout",
          "how long a node or the scheduler may be silent (cut off, paused) at no cost, seconds "
          "(default 5)" +
              Range(0.1, 86400.0),
          SecondsOption(&Options::node_timeout, 0.1, 86400)),
      Row("grace_period",
          "seconds between SIGTERM and SIGKILL when stopping (default 30)" + Range(0.0, 86400.0),
          SecondsOption(&Options::grace_period, 0, 86400)),
      Row("last_call",
          "elastic jobs: seconds to wait for late joiners once MIN workers joined (default 1)" +
              Range(0.0, 3600.0),
          SecondsOption(&Options::last_call, 0, 3600)),
      Row("run_id", "job id, exported as TORCHELASTIC_RUN_ID/GANGRUN_RUN_ID",
          String(&Options::run_id)),
      Row("dry_run", "print the rank/command/environment plan and exit", Bool(&Options::dry_run),
          /*travels=*/false),
      Row("virtual_local_rank",
          "every worker sees LOCAL_RANK=0 and only its own GPU (CUDA_VISIBLE_DEVICES), as "
          "torchrun --virtual-local-rank (default False)",
          Bool(&Options::virtual_local_rank)),
      Row("numa_binding",
          "each local rank's CPUs and memory on its accelerator's NUMA node (else its share of "
          "the nodes): node, socket, exclusive or core-complex, as torchrun --numa-binding "
          "('' = none)",
          NumaBindingMode()),
      Row("duplicate_stdout_filters",
          "F[,F...]: a rank's log lines containing one of them also go to "
          "<log>.filtered_stdout.log, as torchrun's (stdout and stderr share the log) ('' = "
          "none)",
          String(&Options::duplicate_stdout_filters)),
      Row("duplicate_stderr_filters",
          "F[,F...]: likewise, to <log>.filtered_stderr.log ('' = none)",
          String(&Options::duplicate_stderr_filters)),
      Row("log_prefix",
          "console prefix of worker lines; {host} {rank} {local_rank} (default "
          "'[{host}:{rank}] ')",
          String(&Options::log_prefix)),
      Row("metrics_port",
          "the scheduler serves Prometheus metrics on http://HOST:PORT/metrics and its status "
          "page on / (default -1: off, 0: any free port); with a token they ask for its page "
          "secret (gangrun generate page-secret)" +
              Range(-1, 65535),
          Int(&Options::metrics_port, -1, 65535)),
      Row("metrics_host",
          "the address --metrics_port listens on (default: the scheduler's own address; "
          "0.0.0.0 for every interface)",
          String(&Options::metrics_host)),
      Row("event_log", "the scheduler appends a JSON line per job event to this file",
          String(&Options::event_log)),
      Row("health_port",
          "serve the gRPC health service on 0.0.0.0:PORT: '' while alive, 'gangrun.v1.Node' "
          "once this node's workers run (default -1: off)" +
              Range(-1, 65535),
          Int(&Options::health_port, -1, 65535)),
  };
  for (OptionRow& row : MakeKeyValueRows()) rows.push_back(std::move(row));
  for (OptionRow& row : MakeProgressRows()) rows.push_back(std::move(row));
  for (OptionRow& row : MakeRecoveryRows()) rows.push_back(std::move(row));
  for (OptionRow& row : MakeStoreRows()) rows.push_back(std::move(row));
  // The access options come from their one list (rpc::AccessOptions); the token itself never
  // travels in a spec (its file does).
  for (const rpc::AccessOption& option : rpc::AccessOptions()) {
    rows.push_back(Row(option.name, option.help, AccessString(option.field),
                       /*travels=*/std::string(option.name) != "token"));
  }
  return rows;
}

}  // namespace

const std::vector<OptionRow>& MsrunOptionRows() {
  static const std::vector<OptionRow> rows = MakeMsrunRows();
  return rows;
}

const std::vector<OptionRow>& GangrunOptionRows() {
  static const std::vector<OptionRow> rows = MakeGangrunRows();
  return rows;
}

const std::vector<OptionRow>& OptionRows() {
  static const std::vector<OptionRow> rows = [] {
    std::vector<OptionRow> all = MsrunOptionRows();
    for (const auto& row : GangrunOptionRows()) all.push_back(row);
    return all;
  }();
  return rows;
}

const OptionRow* FindOptionRow(const std::string& name) {
  for (const auto& row : OptionRows()) {
    if (row.name == name) return &row;
  }
  return nullptr;
}

}  // namespace gangrun::launcher
