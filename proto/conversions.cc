#include "proto/conversions.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace gangrun::proto {

namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using Json = nlohmann::ordered_json;

bool Is64Bit(const FieldDescriptor& field) {
  return field.cpp_type() == FieldDescriptor::CPPTYPE_INT64 ||
         field.cpp_type() == FieldDescriptor::CPPTYPE_UINT64;
}

// A 64-bit integer protobuf's JSON wrote as a string ("7"), as the number it is.
void Number(Json& value, const FieldDescriptor& field) {
  if (!value.is_string()) return;
  const std::string text = value.get<std::string>();
  if (field.cpp_type() == FieldDescriptor::CPPTYPE_INT64) {
    value = static_cast<int64_t>(std::stoll(text));
  } else {
    value = static_cast<uint64_t>(std::stoull(text));
  }
}

// Walks `json` (a message of `type`, field names as in the .proto) and turns every 64-bit
// integer back into a number: protobuf's JSON mapping writes them as strings for JavaScript,
// which gave `status --json` "generation": "1" beside numbers.
void Numbers(Json& json, const Descriptor& type) {
  if (!json.is_object()) return;
  for (int i = 0; i < type.field_count(); ++i) {
    const FieldDescriptor& field = *type.field(i);
    auto it = json.find(field.name());
    if (it == json.end()) continue;
    if (field.is_map()) {
      const FieldDescriptor& value = *field.message_type()->map_value();
      for (auto& [key, item] : it->items()) {
        if (Is64Bit(value)) Number(item, value);
        if (value.message_type() != nullptr) Numbers(item, *value.message_type());
      }
    } else if (field.is_repeated() && it->is_array()) {
      for (auto& item : *it) {
        if (Is64Bit(field)) Number(item, field);
        if (field.message_type() != nullptr) Numbers(item, *field.message_type());
      }
    } else {
      if (Is64Bit(field)) Number(*it, field);
      if (field.message_type() != nullptr) Numbers(*it, *field.message_type());
    }
  }
}

}  // namespace

std::string ToJson(const google::protobuf::Message& message, bool pretty) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(message, &json, options);
  Json parsed = Json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return json;
  Numbers(parsed, *message.GetDescriptor());
  return parsed.dump(pretty ? 1 : -1, ' ', false, Json::error_handler_t::replace);
}
namespace {

std::string Lower(const std::string& name, const std::string& prefix) {
  std::string text = absl::AsciiStrToLower(name);
  const std::string lower_prefix = absl::AsciiStrToLower(prefix);
  return absl::StartsWith(text, lower_prefix) ? text.substr(lower_prefix.size()) : text;
}

}  // namespace

v1::ProcessExit ToProto(const common::ExitStatus& status) {
  v1::ProcessExit exit;
  exit.set_exit_code(status.code);
  exit.set_signal(status.signal);
  return exit;
}

common::ExitStatus FromProto(const v1::ProcessExit& exit) {
  return exit.signal() > 0 ? common::ExitStatus::Signaled(exit.signal())
                           : common::ExitStatus::Exited(exit.exit_code());
}

void ToProto(const common::Program& program, v1::Program* out) {
  out->set_exec_path(program.exec_path);
  out->mutable_argv()->Assign(program.argv.begin(), program.argv.end());
  std::string* block = out->mutable_env();
  block->clear();
  size_t size = 0;
  for (const auto& entry : program.env) size += entry.size() + 1;
  block->reserve(size);
  for (const auto& entry : program.env) {
    block->append(entry, 0, entry.find('\0'));
    block->push_back('\0');
  }
  out->set_cwd(program.cwd);
  out->mutable_cpus()->Assign(program.cpus.begin(), program.cpus.end());
  out->mutable_memory_nodes()->Assign(program.memory_nodes.begin(), program.memory_nodes.end());
}

void FromProto(const v1::Program& program, common::Program* out) {
  out->exec_path = program.exec_path();
  out->argv.assign(program.argv().begin(), program.argv().end());
  // Assigned into the strings already there, so that a Program kept between spawns allocates
  // nothing once it has held the largest environment.
  absl::string_view block = program.env();
  size_t count = 0;
  while (!block.empty()) {
    const size_t end = std::min(block.find('\0'), block.size());
    if (count < out->env.size()) {
      out->env[count].assign(block.data(), end);
    } else {
      out->env.emplace_back(block.data(), end);
    }
    ++count;
    block.remove_prefix(std::min(end + 1, block.size()));
  }
  out->env.resize(count);
  out->cwd = program.cwd();
  out->cpus.assign(program.cpus().begin(), program.cpus().end());
  out->memory_nodes.assign(program.memory_nodes().begin(), program.memory_nodes().end());
}

v1::JobOutcome Outcome(v1::JobOutcome::Kind kind, const std::string& message) {
  v1::JobOutcome outcome;
  outcome.set_kind(kind);
  outcome.set_message(message);
  return outcome;
}

// Written out, not read from the descriptors: v1::*_Name builds the proto files' descriptor
// pool on first use, which a 4-worker launch paid ~0.4 ms for (issue #24). -Wswitch names an
// enumerator added to the proto and missing here; conversions_test checks every name against
// the descriptor's.
std::string Name(v1::WorkerState state) {
  switch (state) {
    case v1::WORKER_STATE_UNSPECIFIED:
      return "unspecified";
    case v1::WORKER_STATE_STARTING:
      return "starting";
    case v1::WORKER_STATE_RUNNING:
      return "running";
    case v1::WORKER_STATE_SUCCEEDED:
      return "succeeded";
    case v1::WORKER_STATE_FAILED:
      return "failed";
    case v1::WORKER_STATE_STOPPED:
      return "stopped";
    case v1::WorkerState_INT_MIN_SENTINEL_DO_NOT_USE_:
    case v1::WorkerState_INT_MAX_SENTINEL_DO_NOT_USE_:
      break;
  }
  return Lower(v1::WorkerState_Name(state), "WORKER_STATE_");
}

std::string Name(v1::NodeState state) {
  switch (state) {
    case v1::NODE_STATE_UNSPECIFIED:
      return "unspecified";
    case v1::NODE_STATE_JOINED:
      return "joined";
    case v1::NODE_STATE_RUNNING:
      return "running";
    case v1::NODE_STATE_ENDED:
      return "ended";
    case v1::NODE_STATE_SPARE:
      return "spare";
    case v1::NodeState_INT_MIN_SENTINEL_DO_NOT_USE_:
    case v1::NodeState_INT_MAX_SENTINEL_DO_NOT_USE_:
      break;
  }
  return Lower(v1::NodeState_Name(state), "NODE_STATE_");
}

std::string Name(v1::JobPhase phase) {
  switch (phase) {
    case v1::JOB_PHASE_UNSPECIFIED:
      return "unspecified";
    case v1::JOB_PHASE_FORMING:
      return "forming";
    case v1::JOB_PHASE_RUNNING:
      return "running";
    case v1::JOB_PHASE_STOPPING:
      return "stopping";
    case v1::JOB_PHASE_RESTARTING:
      return "restarting";
    case v1::JOB_PHASE_FINISHED:
      return "finished";
    case v1::JOB_PHASE_WAITING:
      return "waiting";
    case v1::JOB_PHASE_HUNG:
      return "hung";
    case v1::JobPhase_INT_MIN_SENTINEL_DO_NOT_USE_:
    case v1::JobPhase_INT_MAX_SENTINEL_DO_NOT_USE_:
      break;
  }
  return Lower(v1::JobPhase_Name(phase), "JOB_PHASE_");
}

std::string Name(v1::JobOutcome::Kind kind) {
  switch (kind) {
    case v1::JobOutcome::KIND_UNSPECIFIED:
      return "unspecified";
    case v1::JobOutcome::KIND_SUCCEEDED:
      return "succeeded";
    case v1::JobOutcome::KIND_WORKER_FAILED:
      return "worker_failed";
    case v1::JobOutcome::KIND_STOPPED_BY_SIGNAL:
      return "stopped_by_signal";
    case v1::JobOutcome::KIND_FORMATION_FAILED:
      return "formation_failed";
    case v1::JobOutcome::KIND_NODE_LOST:
      return "node_lost";
    case v1::JobOutcome::KIND_HUNG:
      return "hung";
    case v1::JobOutcome::KIND_EXCLUDED:
      return "excluded";
    case v1::JobOutcome::KIND_TIME_LIMIT:
      return "time_limit";
    case v1::JobOutcome_Kind_JobOutcome_Kind_INT_MIN_SENTINEL_DO_NOT_USE_:
    case v1::JobOutcome_Kind_JobOutcome_Kind_INT_MAX_SENTINEL_DO_NOT_USE_:
      break;
  }
  return Lower(v1::JobOutcome::Kind_Name(kind), "KIND_");
}

}  // namespace gangrun::proto
