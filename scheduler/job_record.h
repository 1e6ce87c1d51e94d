#pragma once
// The job's outcome as a store's record holds it (Scheduler::SetOnRecord writes the record;
// README "A store of record"): {"kind": "succeeded", "code": 1, "message": "...", "ledger":
// {...}} (the ledger: scheduler/ledger.h). The one
// codec both ways: the scheduler that writes it, and the launcher that takes a job over, or
// ends one no scheduler is left to end, reads or writes it.

#include "gangrun/v1/session.pb.h"
#include "nlohmann/json.hpp"

namespace gangrun::scheduler {

nlohmann::json RecordedOutcome(const v1::JobOutcome& outcome);
// A code that names no kind reads as a lost node (the record came from elsewhere).
v1::JobOutcome OutcomeFromRecord(const nlohmann::json& recorded);

// A field of a record read from the store, or `fallback` when it is missing or of another
// type (a record gangrun did not write as it expects: nothing throws).
template <typename T>
T RecordField(const nlohmann::json& record, const char* key, T fallback) {
  if (!record.is_object()) return fallback;
  try {
    return record.value(key, fallback);
  } catch (const nlohmann::json::exception&) {
    return fallback;
  }
}

}  // namespace gangrun::scheduler
