#include "scheduler/job_record.h"

#include "proto/conversions.h"
#include "scheduler/ledger.h"

namespace gangrun::scheduler {

nlohmann::json RecordedOutcome(const v1::JobOutcome& outcome) {
  nlohmann::json recorded = {{"kind", proto::Name(outcome.kind())},
                             {"code", static_cast<int>(outcome.kind())},
                             {"message", outcome.message()}};
  if (outcome.has_ledger()) recorded["ledger"] = LedgerJson(outcome.ledger());
  return recorded;
}

v1::JobOutcome OutcomeFromRecord(const nlohmann::json& recorded) {
  v1::JobOutcome outcome;
  const int code = RecordField(recorded, "code", -1);
  outcome.set_kind(v1::JobOutcome::Kind_IsValid(code) ? static_cast<v1::JobOutcome::Kind>(code)
                                                      : v1::JobOutcome::KIND_NODE_LOST);
  outcome.set_message(RecordField(recorded, "message", std::string()));
  if (recorded.is_object() && recorded.contains("ledger")) {
    *outcome.mutable_ledger() = LedgerFromJson(recorded["ledger"]);
  }
  return outcome;
}

}  // namespace gangrun::scheduler
