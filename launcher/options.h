#pragma once
// The command line: msrun's options with msrun's names, defaults and spelling rules, and
// gangrun's own (README "Use" and "Bounds and safety"). Every option can also come from the
// environment as GANGRUN_<OPTION_UPPERCASE>; a flag wins over the variable.

#include <csignal>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "launcher/numa.h"
#include "rpc/credentials.h"

namespace gangrun::launcher {

enum class Personality { kGangrun, kMsrun, kTorchrun };

// How the task script becomes the workers' command (launcher/task_command.h).
enum class TaskMode {
  kInfer,   // gangrun and msrun: a .py file runs under Python, anything else as is
  kPython,  // torchrun: python -u SCRIPT ARGS...
  kModule,  // torchrun -m: python -u -m MODULE ARGS...
  kExec,    // torchrun --no_python: SCRIPT ARGS...
};

// --bind_core: off, msrun's equal split (True), or an explicit device -> CPU ranges dict.
struct BindCore {
  enum class Mode { kOff, kAuto, kDict } mode = Mode::kOff;
  // kDict: "device<N>" / "scheduler" -> CPU ranges such as "0-9"; in the order given.
  std::vector<std::pair<std::string, std::vector<std::string>>> dict;
};

// Documented bounds (README "Options and their ranges"). A job larger than this is larger than
// any machine built so far; a host with more local workers than this is a mistake.
inline constexpr int kMaxWorkers = 1 << 20;
inline constexpr int kMaxLocalWorkers = 4096;

struct Options {
  Personality personality = Personality::kGangrun;
  // msrun's options.
  int worker_num = 8;      // the job's size; with MIN:MAX, the maximum
  int worker_num_min = 0;  // MIN of --worker_num MIN:MAX; 0 = a fixed size (= worker_num)
  int local_worker_num = 8;
  std::string master_addr = "127.0.0.1";
  int master_port = 8118;
  int node_rank = -1;
  std::string log_dir;
  bool join = true;  // msrun: False
  int cluster_time_out = 600;
  BindCore bind_core;
  std::string numa_binding;
  BindNuma bind_numa;  // msrun's --bind_numa (launcher/numa.h)
  // torchrun's --duplicate-stdout-filters / --duplicate-stderr-filters (launcher/log_filters.h).
  std::string duplicate_stdout_filters;
  std::string
      duplicate_stderr_filters;  // --numa_binding (torchrun --numa-binding): "" = none, node, ...
  int sim_level = -1;
  int sim_rank_id = -1;
  std::string rank_table_file;
  std::string worker_log_name;
  std::vector<int> tail_worker_log = {-1};  // -1 = every local rank
  // gangrun's own.
  int max_restarts = 0;
  double restart_backoff_initial = 1.0;
  double restart_backoff_cap = 30.0;
  double heartbeat_interval = 1.0;
  double node_timeout = 5.0;
  double grace_period = 30.0;
  double last_call = 1.0;  // elastic jobs: how long to wait for late joiners once MIN is met
  rpc::Access access;      // --token, --token_file, --tls_cert, --tls_key, --tls_ca
  std::string run_id;
  // A store of record (README "A store of record"): etcd://HOST:PORT[,...][/PREFIX], and TLS
  // to it. "" = none: the scheduler is in the master's launcher and nowhere else.
  std::string store;
  std::string store_cacert, store_cert, store_key;
  // A daemon's job on a store (set by gangrun scheduler): this launcher never coordinates; it
  // keeps its workers while the job's scheduler moves and follows the one the store names.
  bool store_follow = false;
  bool dry_run = false;
  bool agent_store = false;         // the job's torch store is gangrun's (scheduler/torch_store.h)
  double store_wait_report = 60;    // its waits for keys nobody set name the ranks after this
  bool virtual_local_rank = false;  // every worker: LOCAL_RANK=0 and only its own GPU
  std::string log_prefix = "[{host}:{rank}] ";
  int metrics_port = -1;     // the scheduler's Prometheus endpoint; -1 = none, 0 = any free port
  std::string metrics_host;  // where it listens; "" = the scheduler's own address
  std::string event_log;     // the scheduler's JSON-lines event log
  int health_port = -1;      // this launcher's gRPC health service (probes); -1 = none
  int64_t kv_max_bytes = int64_t{256} << 20;  // the key-value store's total size bound
  int kv_max_waits = 65536;                   // its pending gets and barrier arrivals
  // Progress supervision (README "Progress, hangs and stragglers"); 0 = off.
  double hang_timeout = 0;
  bool hang_timeout_auto = false;  // --hang_timeout auto: learned per rank
  double hang_timeout_initial = 0;
  std::map<std::string, double> section_timeouts;  // --section_timeout NAME=S,...
  double stack_timeout = 10;                       // the time to capture every rank's stack
  bool progress_hook = true;  // Python workers: the stack and torch progress hook
  double straggler_factor = 1.5;
  // Recovery (README "Failures and recovery").
  int spare_nodes = 0;       // launchers beyond the job's size that join and wait as spares
  double rejoin_window = 0;  // seconds a lost node's place waits for its launcher before a spare
  // This host's segment or NVLink domain: a lost node's place goes to a spare of its domain
  // first ("" = none).
  std::string topology_domain;
  std::string health_check;  // a shell command every node runs before it joins and each generation
  double health_check_timeout = 60;
  std::string kernel_log = "/dev/kmsg";  // read for a failed rank's device errors ('' = none)
  // The accelerators' device files, comma-separated shell globs ('' = none).
  std::string device_files = "/dev/nvidia[0-9]*,/dev/davinci[0-9]*,/dev/accel/accel[0-9]*";
  int exclude_after = 0;  // a node that caused this many failed generations in a row goes; 0 = off
  std::set<int> no_restart_exit_codes;  // a worker exit code that ends the job at once
  int max_no_progress_restarts = 0;     // failed generations in a row without progress; 0 = off
  int max_same_failures = 3;            // failed generations in a row failing the same way; 0 = off
  std::string restart_rules;            // a file of signatures (scheduler/restart_rules.h)
  std::vector<int> signals_to_forward = {SIGUSR1, SIGUSR2};  // to every worker of the job
  double time_limit = 0;                                     // seconds; 0 = none
  int time_limit_signal = 0;  // sent to every worker time_limit_signal_before s before; 0 = none
  double time_limit_signal_before = 0;
  bool hang_rules() const {
    return hang_timeout > 0 || hang_timeout_auto || hang_timeout_initial > 0 ||
           !section_timeouts.empty();
  }
  // The torchrun personality's (launcher/torchrun.h); the other personalities keep the defaults.
  std::string role = "default";  // ROLE_NAME
  TaskMode task_mode = TaskMode::kInfer;
  std::string python_exec;            // kPython/kModule: PYTHON_EXEC; "" = python3 on PATH
  std::set<int> console_local_ranks;  // local ranks shown on the console; empty = all
  std::string local_addr;             // the address this node gives its peers; "" = routed
  bool may_host_scheduler = true;     // false: join the scheduler, never host it (is_host)
  std::vector<std::pair<std::string, std::string>> worker_env;  // set for every worker
  // The task.
  std::string task_script;
  std::vector<std::string> task_args;
  int min_workers() const { return worker_num_min > 0 ? worker_num_min : worker_num; }
  bool elastic() const { return min_workers() < worker_num; }
};

// Looks up an environment variable; nullopt when unset.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;

// What a command line gives (launcher/parse_command_line.h).
struct ParseResult {
  Options options;
  std::string help;                   // non-empty when --help was asked for: print it and exit 0
  std::set<std::string> given;        // options set by a flag or a GANGRUN_* variable (no "--")
  std::set<std::string> flags;        // those set by a flag
  std::vector<std::string> warnings;  // to log before the job starts
};

// A value as an error message shows it: on one line (control characters escaped) and short.
std::string QuoteValue(const std::string& value);

// Checks what parsing cannot: how options relate, files, directories and CPUs of this host,
// the task. One line, InvalidArgument. ValidateValues is the part that needs no host (the
// daemon checks a submitted job's options with it).
absl::Status Validate(const Options& options);
absl::Status ValidateValues(const Options& options);

// The personality from argv[0]: "msrun" or "torchrun" (any directory), else gangrun.
Personality PersonalityFromArgv0(const std::string& argv0);
// "gangrun", "msrun" or "torchrun".
std::string PersonalityName(Personality personality);

// The environment of this process, as an EnvLookup.
EnvLookup ProcessEnv();

}  // namespace gangrun::launcher
