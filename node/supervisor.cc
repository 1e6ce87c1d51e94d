// A node's supervision of its workers (node/supervisor.h).

#include "node/supervisor.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <set>

#include "common/env_list.h"
#include "common/env_names.h"
#include "common/files.h"
#include "common/logging.h"
#include "node/flight_recorder.h"

namespace gangrun::node {
namespace {

// As the launcher's Options::hang_rules(): a rank without a progress channel would look hung.
bool HangRulesIn(const v1::ProgressRules& rules) {
  return rules.hang_timeout_seconds() > 0 || rules.learn() || rules.initial_timeout_seconds() > 0 ||
         !rules.section_timeout_seconds().empty();
}

pid_t ParentOf(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return 0;
  char state;
  int parent = 0;
  if (sscanf(stat.c_str() + paren + 1, " %c %d", &state, &parent) != 2) return 0;
  return parent;
}

// Appends a rank's captured stack to its log (the log is the worker's stdout and stderr,
// opened O_APPEND, so the lines land whole after what it wrote).
void AppendToLog(const std::string& path, const std::string& text) {
  int fd = open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0) return;
  common::WriteAll(fd, text);
  close(fd);
}

}  // namespace

Supervisor::Supervisor(common::Clock& clock, Owner& owner, Supervision parts)
    : clock_(clock),
      owner_(owner),
      parts_(std::move(parts)),
      timers_(parts_.process_start_time ? parts_.process_start_time
                                        : FileTimers::ProcessStartTime) {
  if (parts_.report_to) parts_.report_to(this);
}

Supervisor::~Supervisor() {
  if (parts_.report_to) parts_.report_to(nullptr);
}

void Supervisor::Stop() {
  if (stopped_) return;
  stopped_ = true;
  SayRefusedTimers();
  hang_timer_.reset();
  timer_check_.reset();
}

void Supervisor::StartGeneration(const v1::StartGeneration& start) {
  progress_ = std::make_unique<ProgressTracker>(start.progress_rules());
  // The last generation's timers were its workers'; none of them carries over.
  timers_.Clear();
  ArmTimerCheck();
  SayRefusedTimers();
  hang_reported_ = false;
  hang_timer_.reset();
  hang_check_at_.reset();
  rank_of_local_.clear();
}

absl::Status Supervisor::AddWorker(const v1::StartGeneration& start, ProcessSpec& spec) {
  if (spec.rank < 0) return absl::OkStatus();  // the MindSpore scheduler process reports nothing
  rank_of_local_[spec.local_rank] = spec.rank;
  // Tracked from its spawn request: a report it sends before the keeper's word that it runs
  // reaches the launcher first, and counts.
  if (progress_) {
    progress_->AddRank(spec.rank, clock_.Now());
    ArmHangCheck();
  }
  if (parts_.progress_path) {
    absl::StatusOr<std::string> path = parts_.progress_path(spec.local_rank);
    if (path.ok()) {
      common::SetVariable(spec.env, env::kProgress, *path);
    } else if (HangRulesIn(start.progress_rules())) {
      return path.status();  // its hangs could not be seen
    } else {
      common::UnsetVariable(spec.env, env::kProgress);  // an inherited one is somebody else's
      common::Logger("node")->warn("rank {} gets no GANGRUN_PROGRESS: {}", spec.rank,
                                   std::string(path.status().message()));
    }
  }
  if (!parts_.timer_file.empty()) {
    common::SetVariable(spec.env, env::kTorchTimerFile, parts_.timer_file);
  }
  if (parts_.error_file) {
    spec.error_file = parts_.error_file(spec.local_rank);
    unlink(spec.error_file.c_str());  // a previous generation's is not this one's
    common::SetVariable(spec.env, env::kTorchErrorFile, spec.error_file);
  }
  if (parts_.stacks != nullptr && start.progress_rules().python_stacks()) {
    parts_.stacks->AddWorkerEnv(spec.env);
  }
  if (parts_.flight_recorder != nullptr) parts_.flight_recorder->AddWorkerEnv(spec.env);
  return absl::OkStatus();
}

void Supervisor::RemoveWorker(const ProcessSpec& spec, pid_t pid, bool read_last) {
  if (read_last && spec.local_rank >= 0) {
    // Its last reports, sent before it exited, go before its exit.
    if (parts_.read_progress) parts_.read_progress(spec.local_rank);
    SendProgress();
  }
  if (progress_ && spec.rank >= 0) progress_->RemoveRank(spec.rank);
  if (pid > 0) timers_.ClearPid(pid);
}

void Supervisor::OnProgressDatagram(int local_rank, pid_t sender, absl::string_view datagram) {
  GANGRUN_ON_STRAND(strand_);
  auto rank = rank_of_local_.find(local_rank);
  if (stopped_ || !progress_ || rank == rank_of_local_.end()) return;
  if (!MayReportFor(rank->second, sender)) {
    if (refused_senders_.size() < kMaxRefusedSenders && refused_senders_.insert(sender).second) {
      common::Logger("node")->warn(
          "progress for rank {} sent by pid {}, which is not of that rank's worker: ignored",
          rank->second, sender);
    }
    return;
  }
  progress_->OnDatagram(rank->second, datagram, clock_.Now());
  ArmHangCheck();
}

void Supervisor::SendProgress() {
  if (!progress_) return;
  std::vector<v1::RankProgress> changes = progress_->TakeChanges(clock_.Now());
  if (changes.empty()) return;
  v1::NodeEvent event;
  for (auto& change : changes) *event.mutable_progress()->add_ranks() = std::move(change);
  owner_.Send(std::move(event));
}

// The check runs when the earliest bound can pass; reports only move bounds later, except a
// section with a shorter bound, which brings the check forward.
void Supervisor::ArmHangCheck() {
  if (!progress_ || stopped_) return;
  std::optional<common::TimePoint> due = progress_->NextDeadline();
  if (auto silent = progress_->NextSilentRank(); silent && (!due || *silent < *due)) due = silent;
  if (!due) {
    hang_timer_.reset();
    hang_check_at_.reset();
    return;
  }
  if (hang_check_at_ && *hang_check_at_ <= *due) return;
  hang_check_at_ = *due;
  hang_timer_ = clock_.After(std::max(common::Duration::zero(), *due - clock_.Now()), [this] {
    hang_check_at_.reset();
    CheckHangs();
  });
}

// Every hung rank is logged here; the scheduler hears of the first of each generation only
// (it captures every rank's stack anyway), so a hang of many ranks is one message per node.
void Supervisor::CheckHangs() {
  if (!progress_ || stopped_) return;
  SaySilentRanks();
  for (auto& hung : progress_->CheckHangs(clock_.Now())) {
    common::Logger("node")->error(
        "rank {} reported no progress for {:.1f} s (bound {:.1f} s, {}{}{})", hung.rank(),
        hung.silent_seconds(), hung.bound_seconds(), hung.rule(), hung.section().empty() ? "" : " ",
        hung.section());
    if (hang_reported_) continue;
    hang_reported_ = true;
    v1::NodeEvent event;
    *event.mutable_rank_hung() = std::move(hung);
    owner_.Send(std::move(event));
  }
  ArmHangCheck();
}

// A rule that counts from a rank's first report cannot fire for a rank that never reports:
// said once per rank, so that nobody waits for a hang report that cannot come.
void Supervisor::SaySilentRanks() {
  const std::vector<int> silent = progress_->TakeSilentRanks(clock_.Now());
  if (silent.empty()) return;
  std::string ranks;
  for (size_t i = 0; i < silent.size() && i < 8; ++i) {
    ranks += (i > 0 ? "," : "") + std::to_string(silent[i]);
  }
  if (silent.size() > 8) ranks += ",...";
  common::Logger("node")->warn(
      "rank(s) {} sent no progress report yet: --hang_timeout counts from a rank's first "
      "report, so it cannot fire for them until they report (the progress hook reports for "
      "Python workers using torch.distributed; any other worker sends GANGRUN_PROGRESS "
      "reports, e.g. with `gangrun progress step`)",
      ranks);
}

void Supervisor::OnTimerLine(absl::string_view line) {
  GANGRUN_ON_STRAND(strand_);
  if (stopped_) return;
  auto request = ParseTimerRequest(line);
  if (!request.ok()) {
    // Said once, then counted: a broken client must not flood the log.
    if (malformed_timer_lines_++ == 0) {
      common::Logger("node")->warn("ignoring a malformed torch timer request: {}",
                                   std::string(request.status().message()));
    }
    return;
  }
  if (!timers_.Apply(*request) && refused_timers_++ == 0) {
    // Said once; a flood is counted (SayRefusedTimers).
    common::Logger("node")->warn(
        "refusing the torch timer '{}' of pid {}: {} timers are set, or the process is gone",
        request->scope, request->pid, timers_.size());
  }
  ArmTimerCheck();
}

void Supervisor::SayRefusedTimers() {
  if (refused_timers_ > 1) {
    common::Logger("node")->warn("refused {} torch timer requests in all", refused_timers_);
  }
  refused_timers_ = 0;
}

// Worked example: a timer far in the future (torch's expires(after=1e10), or an expiration time
// of 1e300) is checked again in a day, not armed for a time a duration cannot hold.
void Supervisor::ArmTimerCheck() {
  const std::optional<double> next = timers_.NextExpiration();
  if (!next || !parts_.wall_now) {
    timer_check_.reset();
    timer_check_for_.reset();
    return;
  }
  if (timer_check_ && timer_check_for_ == next) return;  // armed for it already
  timer_check_for_ = next;
  constexpr double kLongestWait = 24 * 3600;
  const double delay = std::clamp(*next - parts_.wall_now(), 0.0, kLongestWait);
  timer_check_ = clock_.After(
      std::chrono::duration_cast<common::Duration>(std::chrono::duration<double>(delay)), [this] {
        timer_check_.reset();
        CheckTimers();
      });
}

void Supervisor::CheckTimers() {
  if (stopped_) return;
  for (const TimerRequest& expired : timers_.TakeExpired(parts_.wall_now())) {
    const std::optional<int> rank = RankOfPid(expired.pid);
    auto log = common::Logger("node");
    if (!rank) {
      log->warn("torch timer '{}' of pid {} expired, but pid {} is not one of this node's workers",
                expired.scope, expired.pid, expired.pid);
      continue;
    }
    if (expired.signal <= 0) {
      log->warn("torch timer '{}' of rank {} (pid {}) expired; it asked for no signal",
                expired.scope, *rank, expired.pid);
      continue;
    }
    log->error("torch timer '{}' of rank {} (pid {}) expired: sending {}", expired.scope, *rank,
               expired.pid, common::SignalName(expired.signal));
    v1::NodeEvent event;
    auto* report = event.mutable_timer_expired();
    report->set_rank(*rank);
    report->set_pid(expired.pid);
    report->set_scope(expired.scope);
    report->set_signal(expired.signal);
    owner_.Send(std::move(event));  // before the signal: the exit it causes comes after
    if (parts_.signal_process) {
      parts_.signal_process(expired.pid, expired.signal);
    } else {
      kill(expired.pid, expired.signal);
    }
  }
  ArmTimerCheck();
}

bool Supervisor::MayReportFor(int rank, pid_t sender) const {
  const std::map<pid_t, ProcessSpec>* running = owner_.Running();
  if (sender <= 0 || running == nullptr) return true;  // the kernel said nothing: the socket says
  if (const std::optional<int> of = RankOfPid(sender)) return *of == rank;
  // Of no running worker: a report sent before the keeper's word that the worker runs reached
  // this node (it counts), unless that worker is known to run and this is not of it.
  for (const auto& [pid, process] : *running) {
    if (process.rank == rank) return false;
  }
  return true;
}

std::optional<int> Supervisor::RankOfPid(pid_t pid) const {
  if (owner_.Running() == nullptr) return std::nullopt;
  const auto& running = *owner_.Running();
  for (int depth = 0; depth < 64 && pid > 1; ++depth) {
    auto it = running.find(pid);
    if (it != running.end()) {
      if (it->second.rank < 0) return std::nullopt;
      return it->second.rank;
    }
    pid = ParentOf(pid);
  }
  return std::nullopt;
}

// One capture: the stacks and (at a hang) the flight recorder's dumps.
struct Supervisor::StackCapture {
  uint64_t generation = 0;
  uint64_t request = 0;  // 0: a hang's
  bool with_text = false;
  std::vector<v1::RankStack> stacks;
  std::map<int, std::string> dumps;
};

void Supervisor::CaptureStacks(const v1::CaptureStacks& capture) {
  const bool hang = capture.request() == 0;
  const std::set<int> wanted(capture.ranks().begin(), capture.ranks().end());
  std::vector<StackTarget> targets;
  std::vector<FlightRecorder::Target> dumps;
  if (const auto* running = owner_.Running()) {
    for (const auto& [pid, spec] : *running) {
      if (spec.rank < 0 || (!wanted.empty() && wanted.count(spec.rank) == 0)) continue;
      targets.push_back({spec.rank, pid});
      if (!hang || parts_.flight_recorder == nullptr) continue;
      if (auto dump = FlightRecorder::TargetOf(spec.env, spec.rank, spec.log_path)) {
        dumps.push_back(std::move(*dump));
      }
    }
  }
  if (hang) {
    common::Logger("node")->warn("capturing the stacks of {} rank(s): {}", targets.size(),
                                 capture.reason());
  } else {
    common::Logger("node")->info("capturing the stacks of {} rank(s) on request", targets.size());
  }
  auto join = std::make_shared<StackCapture>();
  join->generation = owner_.generation();
  join->request = capture.request();
  join->with_text = capture.with_text();
  const auto timeout = std::chrono::duration_cast<common::Duration>(
      std::chrono::duration<double>(std::max(0.1, capture.timeout_seconds())));
  // The flight recorder after the stacks, in what is left of the same time: a dump starts
  // threads in the process, which faulthandler's all-threads dump must not race with.
  const common::TimePoint deadline = clock_.Now() + timeout;
  auto stacks_done = [this, join, deadline, dumps = std::move(dumps)]() mutable {
    if (dumps.empty() || parts_.flight_recorder == nullptr) return OnStacksCaptured(*join);
    const common::Duration left =
        std::max<common::Duration>(deadline - clock_.Now(), std::chrono::milliseconds(500));
    parts_.flight_recorder->Collect(std::move(dumps), left,
                                    [this, join](std::map<int, std::string> collected) {
                                      join->dumps = std::move(collected);
                                      OnStacksCaptured(*join);
                                    });
  };
  if (parts_.stacks == nullptr || targets.empty()) {
    for (const auto& target : targets) {
      v1::RankStack stack;
      stack.set_rank(target.rank);
      stack.set_pid(target.pid);
      stack.set_error("stack capture is not available on this node");
      join->stacks.push_back(std::move(stack));
    }
    return stacks_done();
  }
  parts_.stacks->Capture(
      std::move(targets), timeout,
      [join, stacks_done = std::move(stacks_done)](std::vector<v1::RankStack> stacks) mutable {
        join->stacks = std::move(stacks);
        stacks_done();
      });
}

// A hang's stacks go into the ranks' logs and only `where` to the scheduler; a request's
// leave the logs alone and carry the text when asked for.
void Supervisor::OnStacksCaptured(StackCapture& capture) {
  if (stopped_ || capture.generation != owner_.generation()) return;
  const bool hang = capture.request == 0;
  auto log = common::Logger("node");
  std::map<pid_t, std::string> log_paths;
  if (const auto* running = owner_.Running()) {
    for (const auto& [pid, spec] : *running) log_paths[pid] = spec.log_path;
  }
  v1::NodeEvent event;
  auto* captured = event.mutable_stacks_captured();
  captured->set_request(capture.request);
  for (auto& stack : capture.stacks) {
    const HookCounts hook = progress_ ? progress_->HookOf(stack.rank()) : HookCounts{};
    if (hook.collectives >= 0) {
      stack.set_collectives(hook.collectives);
      stack.set_last_op(hook.last_op);
      stack.set_in_collective(hook.inside);
    }
    if (auto dump = capture.dumps.find(stack.rank()); dump != capture.dumps.end()) {
      stack.set_flight_recorder(dump->second);
    }
    if (hang) {
      const std::string header = "[gangrun] rank " + std::to_string(stack.rank()) + " (pid " +
                                 std::to_string(stack.pid()) + ") when the job hung";
      const std::string& path = log_paths[stack.pid()];
      if (!stack.error().empty()) {
        log->warn("rank {}: no stack: {}", stack.rank(), stack.error());
      } else if (!path.empty()) {
        AppendToLog(path, "\n" + header + ", " + stack.kind() + " stack:\n" + stack.text() + "\n");
      } else {
        log->warn("{}, {} stack:\n{}", header, stack.kind(), stack.text());
      }
    }
    // A hang's whole stack is in the rank's log; the scheduler needs `where`.
    if (hang || !capture.with_text) stack.clear_text();
    *captured->add_stacks() = std::move(stack);
  }
  owner_.Send(std::move(event));
}

}  // namespace gangrun::node
