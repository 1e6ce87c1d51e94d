#include "launcher/slurm.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
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

absl::StatusOr<std::string> ApplySlurm(Options& options, const std::set<std::string>& given,
                                       const EnvLookup& env) {
  auto job_id = env("SLURM_JOB_ID");
  if (!job_id || job_id->empty()) return std::string();
  std::string taken;
  auto node_id = env("SLURM_NODEID");
  if (node_id && given.count("node_rank") == 0) {
    auto rank = common::ParseInt(*node_id, 0, kMaxWorkers - 1);
    if (!rank) {
      return absl::InvalidArgumentError("SLURM_NODEID '" + *node_id + "' is not a node index");
    }
    options.node_rank = static_cast<int>(*rank);
    taken += " node rank " + std::to_string(*rank);
  }
  auto list = env("SLURM_JOB_NODELIST");
  if (!list) list = env("SLURM_NODELIST");
  std::vector<std::string> hosts;
  if (list && !list->empty()) {
    auto expanded = ExpandSlurmNodeList(*list);
    if (!expanded.ok()) return expanded.status();
    hosts = std::move(*expanded);
  }
  if (!hosts.empty() && given.count("master_addr") == 0) {
    options.master_addr = hosts.front();
    taken += ", master " + hosts.front();
  }
  auto nodes_text = env("SLURM_JOB_NUM_NODES");
  if (!nodes_text) nodes_text = env("SLURM_NNODES");
  int64_t nodes = static_cast<int64_t>(hosts.size());
  if (nodes_text) {
    auto parsed = common::ParseInt(*nodes_text, 1, kMaxWorkers);
    if (!parsed) {
      return absl::InvalidArgumentError("SLURM_JOB_NUM_NODES '" + *nodes_text +
                                        "' is not a node count");
    }
    nodes = *parsed;
  }
  if (nodes > 0 && given.count("worker_num") == 0) {
    if (options.local_worker_num * nodes > kMaxWorkers) {
      return absl::InvalidArgumentError(
          "Slurm's " + std::to_string(nodes) + " node(s) x --local_worker_num " +
          std::to_string(options.local_worker_num) + " is more than " +
          std::to_string(kMaxWorkers) + " workers");
    }
    options.worker_num = static_cast<int>(options.local_worker_num * nodes);
    options.worker_num_min = 0;
    taken += ", " + std::to_string(nodes) + " node(s) x " +
             std::to_string(options.local_worker_num) + " = " + std::to_string(options.worker_num) +
             " workers";
  }
  if (taken.empty()) return std::string();
  if (taken.rfind(", ", 0) == 0) taken.erase(0, 2);
  if (taken.front() == ' ') taken.erase(0, 1);
  return "Slurm job " + *job_id + ": " + taken;
}

}  // namespace gangrun::launcher
