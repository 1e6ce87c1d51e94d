#pragma once
// The one place where gangrun's values meet their protos: how a process ended, what to run,
// and the names of the state enums as people read them (a table, a metric label: "running").

#include <google/protobuf/message.h>

#include <string>
#include <vector>

#include "common/exit_status.h"
#include "common/spawn.h"
#include "gangrun/v1/keeper.pb.h"
#include "gangrun/v1/session.pb.h"

namespace gangrun::proto {

v1::ProcessExit ToProto(const common::ExitStatus& status);
common::ExitStatus FromProto(const v1::ProcessExit& exit);

// Into `out`, whose strings are reused: the keeper keeps one Program between spawns. An
// argument or variable holding a NUL byte ends there, as execve would read it.
void ToProto(const common::Program& program, v1::Program* out);
void FromProto(const v1::Program& program, common::Program* out);

// A message as `gangrun status --json` prints it: every field, even at its default, under its
// .proto name; `pretty` adds line breaks and indents.
std::string ToJson(const google::protobuf::Message& message, bool pretty = false);

// An outcome of `kind` with `message`.
v1::JobOutcome Outcome(v1::JobOutcome::Kind kind, const std::string& message);

// The enum value's name without its type prefix, in lower case: WORKER_STATE_RUNNING ->
// "running", JOB_PHASE_RESTARTING -> "restarting", KIND_NODE_LOST -> "node_lost".
std::string Name(v1::WorkerState state);
std::string Name(v1::NodeState state);
std::string Name(v1::JobPhase phase);
std::string Name(v1::JobOutcome::Kind kind);

// Every value of a state enum but its UNSPECIFIED zero, in the order the .proto declares
// them, from the enum's descriptor: a metric's label values, never a list kept by hand.
template <typename Enum>
std::vector<Enum> Values() {
  const google::protobuf::EnumDescriptor* descriptor = google::protobuf::GetEnumDescriptor<Enum>();
  std::vector<Enum> values;
  for (int i = 0; i < descriptor->value_count(); ++i) {
    const int number = descriptor->value(i)->number();
    if (number != 0) values.push_back(static_cast<Enum>(number));
  }
  return values;
}

}  // namespace gangrun::proto
