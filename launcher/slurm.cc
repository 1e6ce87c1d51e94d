#include "launcher/slurm.h"

#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/numbers.h"

namespace gangrun::launcher {
namespace {

absl::Status Bad(const std::string& list, const std::string& why) {
  return absl::InvalidArgumentError("cannot read SLURM_JOB_NODELIST '" + list + "': " + why);
}

// "01-04,07" -> {"01","02","03","04","07"}, keeping the width of the lower bound.
absl::StatusOr<std::vector<std::string>> ExpandRanges(const std::string& list,
                                                      const std::string& ranges) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= ranges.size()) {
    size_t comma = ranges.find(',', start);
    std::string part = ranges.substr(start, comma == std::string::npos ? comma : comma - start);
    start = comma == std::string::npos ? ranges.size() + 1 : comma + 1;
    size_t dash = part.find('-');
    std::string low = part.substr(0, dash);
    std::string high = dash == std::string::npos ? low : part.substr(dash + 1);
    uint64_t a, b;
    if (low.empty() || !absl::SimpleAtoi(low, &a) || !absl::SimpleAtoi(high, &b) || b < a ||
        low.find_first_not_of("0123456789") != std::string::npos ||
        high.find_first_not_of("0123456789") != std::string::npos) {
      return Bad(list, "bad range '" + part + "'");
    }
    if (b - a > 100000) return Bad(list, "range '" + part + "' is too large");
    for (uint64_t n = a; n <= b; ++n) {
      out.push_back(absl::StrFormat("%0*d", static_cast<int>(low.size()), n));
    }
  }
  return out;
}

// One host expression with any number of bracket groups: "rack[1-2]-gpu[01-02]".
absl::Status ExpandHost(const std::string& list, const std::string& expr,
                        std::vector<std::string>& out) {
  std::vector<std::string> partial = {""};
  size_t pos = 0;
  while (pos < expr.size()) {
    size_t open = expr.find('[', pos);
    std::string literal = expr.substr(pos, open == std::string::npos ? open : open - pos);
    for (auto& p : partial) p += literal;
    if (open == std::string::npos) break;
    size_t close = expr.find(']', open);
    if (close == std::string::npos) return Bad(list, "unbalanced '['");
    auto values = ExpandRanges(list, expr.substr(open + 1, close - open - 1));
    if (!values.ok()) return values.status();
    std::vector<std::string> next;
    for (const auto& p : partial) {
      for (const auto& v : *values) next.push_back(p + v);
    }
    partial = std::move(next);
    pos = close + 1;
  }
  if (partial.size() == 1 && partial[0].empty()) return Bad(list, "empty host name");
  out.insert(out.end(), partial.begin(), partial.end());
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ExpandSlurmNodeList(const std::string& list) {
  std::vector<std::string> hosts;
  // Split at the commas outside brackets.
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= list.size(); ++i) {
    if (i < list.size() && list[i] == '[') ++depth;
    if (i < list.size() && list[i] == ']' && --depth < 0) return Bad(list, "unbalanced ']'");
    if (i == list.size() || (list[i] == ',' && depth == 0)) {
      if (depth != 0) return Bad(list, "unbalanced '['");
      if (absl::Status s = ExpandHost(list, list.substr(start, i - start), hosts); !s.ok())
        return s;
      start = i + 1;
    }
  }
  if (hosts.empty()) return Bad(list, "no hosts");
  return hosts;
}

namespace {

// The first of `names` that is set (and not empty).
std::optional<std::string> First(const EnvLookup& env, std::initializer_list<const char*> names) {
  for (const char* name : names) {
    auto value = env(name);
    if (value && !value->empty()) return value;
  }
  return std::nullopt;
}

}  // namespace

absl::StatusOr<SlurmApplied> ApplySlurm(Options& options, const std::set<std::string>& given,
                                        const EnvLookup& env) {
  SlurmApplied applied;
  auto job_id = env("SLURM_JOB_ID");
  if (!job_id || job_id->empty()) return applied;
  // Inside a step (srun) the step is the job: its tasks are the launchers, its nodes the
  // hosts. Outside one (a batch script's own shell) the allocation's nodes are.
  auto step_id = First(env, {"SLURM_STEP_ID", "SLURM_STEPID"});
  const bool in_step = step_id.has_value();
  std::vector<std::string> taken;
  if (given.count("run_id") == 0) {
    // Slurm's identity, so that two jobs (or two steps) never form one gang, even on one
    // master host and port: the second is refused for its run id.
    options.run_id = "slurm-" + *job_id + (in_step ? "." + *step_id : std::string());
    taken.push_back("run id " + options.run_id);
  }
  auto rank_text = in_step ? First(env, {"SLURM_PROCID", "SLURM_NODEID"}) : env("SLURM_NODEID");
  if (rank_text && given.count("node_rank") == 0) {
    auto rank = common::ParseInt(*rank_text, 0, kMaxWorkers - 1);
    if (!rank) {
      return absl::InvalidArgumentError(std::string(in_step ? "SLURM_PROCID" : "SLURM_NODEID") +
                                        " '" + *rank_text + "' is not a node index");
    }
    options.node_rank = static_cast<int>(*rank);
    taken.push_back("node rank " + std::to_string(*rank));
  }
  auto list = in_step ? First(env, {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"})
                      : First(env, {"SLURM_JOB_NODELIST", "SLURM_NODELIST"});
  std::vector<std::string> hosts;
  if (list) {
    auto expanded = ExpandSlurmNodeList(*list);
    if (!expanded.ok()) return expanded.status();
    hosts = std::move(*expanded);
  }
  if (!hosts.empty() && given.count("master_addr") == 0) {
    options.master_addr = hosts.front();
    taken.push_back("master " + hosts.front());
  }
  if (given.count("master_port") == 0) {
    // A port of the job's own (below Linux's ephemeral range), so that jobs sharing a host
    // rarely meet; when they do, the run id keeps them apart.
    uint64_t job = 0, step = 0;
    absl::SimpleAtoi(*job_id, &job);
    if (step_id) absl::SimpleAtoi(*step_id, &step);
    options.master_port = static_cast<int>(20000 + (job * 16 + step % 16) % 12000);
    taken.push_back("port " + std::to_string(options.master_port));
  }
  const char* count_name = in_step ? "SLURM_STEP_NUM_TASKS" : "SLURM_JOB_NUM_NODES";
  auto count_text = in_step ? First(env, {"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"})
                            : First(env, {"SLURM_JOB_NUM_NODES", "SLURM_NNODES"});
  int64_t launchers = static_cast<int64_t>(hosts.size());
  if (count_text) {
    auto parsed = common::ParseInt(*count_text, 1, kMaxWorkers);
    if (!parsed) {
      return absl::InvalidArgumentError(std::string(count_name) + " '" + *count_text +
                                        "' is not a " + (in_step ? "task" : "node") + " count");
    }
    launchers = *parsed;
  }
  if (launchers > 0 && given.count("worker_num") == 0) {
    if (options.local_worker_num * launchers > kMaxWorkers) {
      return absl::InvalidArgumentError(
          "Slurm's " + std::to_string(launchers) + (in_step ? " task(s)" : " node(s)") +
          " x --local_worker_num " + std::to_string(options.local_worker_num) + " is more than " +
          std::to_string(kMaxWorkers) + " workers");
    }
    options.worker_num = static_cast<int>(options.local_worker_num * launchers);
    options.worker_num_min = 0;
    taken.push_back(std::to_string(launchers) + (in_step ? " task(s)" : " node(s)") + " x " +
                    std::to_string(options.local_worker_num) + " = " +
                    std::to_string(options.worker_num) + " workers");
  }
  // Two launchers of one step on one host (srun -n2 on a node) are ranked apart by their task
  // ids, but their local ranks (LOCAL_RANK, DEVICE_ID) both start at 0.
  auto local_id = env("SLURM_LOCALID");
  int64_t local = 0;
  if (in_step && local_id && absl::SimpleAtoi(*local_id, &local) && local > 0) {
    applied.warnings.push_back(
        "Slurm runs more than one launcher of step " + *job_id + "." + *step_id +
        " on this host (SLURM_LOCALID " + *local_id +
        "): each is a node of the job, but their local ranks (LOCAL_RANK, DEVICE_ID) overlap; "
        "start one launcher per host (srun --ntasks-per-node=1) and give it "
        "--local_worker_num instead");
  }
  if (taken.empty()) return applied;
  applied.taken = "Slurm " +
                  std::string(in_step ? "step " + *job_id + "." + *step_id : "job " + *job_id) +
                  ": " + absl::StrJoin(taken, ", ");
  return applied;
}

}  // namespace gangrun::launcher
