#include "scheduler/job_record.h"

#include "proto/conversions.h"

namespace gangrun::scheduler {

nlohmann::json RecordedOutcome(const v1::JobOutcome& outcome) {
  return {{"kind", proto::Name(outcome.kind())},
          {"code", static_cast<int>(outcome.kind())},
          {"message", outcome.message()}};
}

v1::JobOutcome OutcomeFromRecord(const nlohmann::json& recorded) {
  v1::JobOutcome outcome;
  const int code = RecordField(recorded, "code", -1);
  outcome.set_kind(v1::JobOutcome::Kind_IsValid(code) ? static_cast<v1::JobOutcome::Kind>(code)
                                                      : v1::JobOutcome::KIND_NODE_LOST);
  outcome.set_message(RecordField(recorded, "message", std::string()));
  return outcome;
}

}  // namespace gangrun::scheduler
