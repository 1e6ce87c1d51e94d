#pragma once
// The wait for nodes: the job's first formation, and each wait for a lost node's replacement.
// Owns the wait's deadline (--cluster_time_out), the elastic job's last call (--last_call),
// the launchers refused at their session's opening, and the wait's reminders
// (scheduler/wait_reminder.h). It knows nothing of who joined: the core says when a wait
// begins and ends, and hands the joined nodes to WaitingLine when a line is to be said.
//
// Owned by the scheduler's core; runs on its strand through its clock; its timers die with it.
//
// Worked example, a 4-worker job with --cluster_time_out 600 whose launchers join one by one:
// Begin(start) arms the deadline at start + 600 s and the reminders (every 10 s, then every
// minute: `remind` with "9 m 40 s left"); the core says WaitingLine(joined, 4, RefusedText())
// at each join; the fourth join forms the job and End() disarms all. Had 600 s passed first,
// `timed_out` would have been called once.

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "scheduler/rank_assignment.h"
#include "scheduler/wait_reminder.h"

namespace gangrun::scheduler {

class Formation {
 public:
  struct Callbacks {
    std::function<void()> timed_out;                      // the deadline passed
    std::function<void(const std::string& left)> remind;  // say the wait's line again
  };
  // `timeout`: how long a wait may last (negative: no limit).
  Formation(common::Clock& clock, common::Duration timeout, Callbacks callbacks);

  // A wait begins, its deadline `timeout` after `since` (the scheduler's start for the first;
  // now for a lost node's replacement); its reminders start again.
  void Begin(common::TimePoint since);
  // Elastic: enough workers are present; `form` runs once after `delay` unless the wait ends
  // first. False (and nothing armed) while a last call is already on.
  bool CallLast(common::Duration delay, std::function<void()> form);
  // The wait is over (the job formed or finished): no deadline, no last call, no reminders.
  void End();
  // No reminders until the next Begin (the job left the waiting states).
  void StopReminding() { reminder_.Stop(); }
  // "; 9 m 40 s left" while reminders run, else "".
  std::string Left() const;

  // A launcher at `host` was refused at its session's opening for `why`. True the first
  // time this host and reason are noted (to be logged); at most kRefusedKept are kept, the
  // first ones; later repeats only count.
  static constexpr size_t kRefusedKept = 8;
  bool Refused(const std::string& host, const std::string& why);
  // "h1 (its token is not the job's, 3 times), h2 (...)", or "".
  std::string RefusedText() const;

  // "waiting for 2 of 4 workers (1 node(s) joined: a; node rank 1 has not joined; refused:
  // ...)", or "" when no worker is missing. Names at most 8 nodes and 8 node ranks.
  static std::string WaitingLine(const std::vector<NodeJoin>& joined, int world_size,
                                 const std::string& refused);

 private:
  common::Clock& clock_;
  common::Duration timeout_;
  Callbacks callbacks_;
  std::unique_ptr<common::Timer> timer_;
  std::unique_ptr<common::Timer> last_call_;
  std::map<std::pair<std::string, std::string>, int> refused_;  // host, why -> how often
  WaitReminder reminder_;
};

}  // namespace gangrun::scheduler
