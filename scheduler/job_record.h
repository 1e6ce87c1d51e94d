#pragma once
// The job's outcome as a store's record holds it (Scheduler::SetOnRecord writes the record;
// README "A store of record"): {"kind": "succeeded", "code": 1, "message": "..."}. The one
// codec both ways: the scheduler that writes it, and the launcher that takes a job over, or
// ends one no scheduler is left to end, reads or writes it.

#include "gangrun/v1/session.pb.h"
#include "nlohmann/json.hpp"

namespace gangrun::scheduler {

nlohmann::json RecordedOutcome(const v1::JobOutcome& outcome);
// A code that names no kind reads as a lost node (the record came from elsewhere).
v1::JobOutcome OutcomeFromRecord(const nlohmann::json& recorded);

}  // namespace gangrun::scheduler
