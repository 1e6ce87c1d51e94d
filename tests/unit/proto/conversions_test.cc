#include "proto/conversions.h"

#include <google/protobuf/any.pb.h>
#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>
#include <gtest/gtest.h>
#include <link.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "gangrun/v1/session.pb.h"

namespace gangrun::proto {
namespace {

TEST(ConversionsTest, AnExitStatusSurvivesTheWire) {
  for (const auto& status : {common::ExitStatus::Exited(0), common::ExitStatus::Exited(3),
                             common::ExitStatus::Signaled(SIGKILL)}) {
    const common::ExitStatus back = FromProto(ToProto(status));
    EXPECT_EQ(back.signaled, status.signaled) << status.ToString();
    EXPECT_EQ(back.code, status.code) << status.ToString();
    EXPECT_EQ(back.signal, status.signal) << status.ToString();
  }
  EXPECT_FALSE(FromProto(ToProto(common::ExitStatus::Signaled(SIGTERM))).success());
}

TEST(ConversionsTest, AProgramSurvivesTheWireWithEveryField) {
  common::Program program;
  program.exec_path = "/usr/bin/python3";
  program.argv = {"python3", "-u", "train.py", ""};
  program.env = {"A=1", "B=", "C=x=y"};
  program.cwd = "/work";
  program.cpus = {0, 2, 5};
  program.memory_nodes = {1, 3};
  v1::Program wire;
  ToProto(program, &wire);
  common::Program back;
  FromProto(wire, &back);
  EXPECT_EQ(back.exec_path, program.exec_path);
  EXPECT_EQ(back.argv, program.argv);
  EXPECT_EQ(back.env, program.env);
  EXPECT_EQ(back.cwd, program.cwd);
  EXPECT_EQ(back.cpus, program.cpus);
  EXPECT_EQ(back.memory_nodes, program.memory_nodes);
  // A field added to Program and not to the conversions breaks this: Program is six fields.
  static_assert(sizeof(common::Program) == 2 * sizeof(std::string) +
                                               2 * sizeof(std::vector<std::string>) +
                                               2 * sizeof(std::vector<int>));
}

// The keeper reads every spawn into one Program: what a longer environment left must not show.
TEST(ConversionsTest, AProgramReadIntoAnotherKeepsNothingOfIt) {
  common::Program first;
  first.argv = {"a"};
  first.env = {"LONG_VARIABLE_NUMBER_ONE=a value longer than a short string", "B=2", "C=3"};
  common::Program second;
  second.argv = {"b"};
  second.env = {"X=", "Y=y"};
  common::Program none;
  none.argv = {"c"};
  common::Program into;
  for (const common::Program* program : {&first, &second, &none, &first}) {
    v1::Program wire;
    ToProto(*program, &wire);
    FromProto(wire, &into);
    EXPECT_EQ(into.env, program->env);
    EXPECT_EQ(into.argv, program->argv);
  }
}

// A NUL byte ends a variable, as execve reads it; it never starts another one.
TEST(ConversionsTest, AVariableHoldingANulByteEndsThereAndMakesNoOther) {
  common::Program program;
  program.argv = {"x"};
  program.env = {std::string("A=1\0B=injected", 14), "C=3"};
  v1::Program wire;
  ToProto(program, &wire);
  common::Program back;
  FromProto(wire, &back);
  EXPECT_EQ(back.env, (std::vector<std::string>{"A=1", "C=3"}));
}

// The names are written out (no descriptor pool at run time): each must be the descriptor's
// name, lower case, without its prefix.
template <typename Enum>
void ExpectNamesMatchTheDescriptor(const google::protobuf::EnumDescriptor* descriptor,
                                   const std::string& prefix) {
  for (int i = 0; i < descriptor->value_count(); ++i) {
    const auto* value = descriptor->value(i);
    std::string expected = absl::AsciiStrToLower(value->name().substr(prefix.size()));
    EXPECT_EQ(Name(static_cast<Enum>(value->number())), expected) << value->name();
  }
}

TEST(ConversionsTest, EveryStateNameIsTheDescriptorsName) {
  ExpectNamesMatchTheDescriptor<v1::WorkerState>(v1::WorkerState_descriptor(), "WORKER_STATE_");
  ExpectNamesMatchTheDescriptor<v1::NodeState>(v1::NodeState_descriptor(), "NODE_STATE_");
  ExpectNamesMatchTheDescriptor<v1::JobPhase>(v1::JobPhase_descriptor(), "JOB_PHASE_");
  ExpectNamesMatchTheDescriptor<v1::JobOutcome::Kind>(v1::JobOutcome::Kind_descriptor(), "KIND_");
}

TEST(ConversionsTest, StateNamesLoseTheirPrefix) {
  EXPECT_EQ(Name(v1::WORKER_STATE_RUNNING), "running");
  EXPECT_EQ(Name(v1::JobOutcome::KIND_NODE_LOST), "node_lost");
}

TEST(ConversionsTest, ValuesAreTheDescriptorsWithoutUnspecified) {
  EXPECT_EQ(Values<v1::NodeState>(),
            (std::vector<v1::NodeState>{v1::NODE_STATE_JOINED, v1::NODE_STATE_RUNNING,
                                        v1::NODE_STATE_ENDED, v1::NODE_STATE_SPARE}));
  const auto kinds = Values<v1::JobOutcome::Kind>();
  EXPECT_EQ(kinds.size(), static_cast<size_t>(v1::JobOutcome::Kind_MAX));
  EXPECT_EQ(kinds.back(), v1::JobOutcome::KIND_TIME_LIMIT);
  for (v1::JobPhase phase : Values<v1::JobPhase>()) EXPECT_NE(phase, v1::JOB_PHASE_UNSPECIFIED);
}

// Whether protobuf is a shared library of this process (the sanitizer builds) or linked in.
bool ProtobufIsShared() {
  bool shared = false;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* found) {
        if (std::string(info->dlpi_name).find("libprotobuf.so") != std::string::npos) {
          *static_cast<bool*>(found) = true;
        }
        return 0;
      },
      &shared);
  return shared;
}

// proto/lazy_descriptors.cc: a generated file's descriptor is registered at its first use, not
// at the program's start (ours always; protobuf's own files where protobuf is linked in, as
// gangrun links it); after that, JSON (nested messages of another file included) and lookups by
// name work as before. Checked in a fresh process of this binary, before anything else touched
// a descriptor.
TEST(LazyDescriptorsTest, AFileIsRegisteredAtItsFirstUseThenServesJsonAndLookups) {
  const auto* pool = google::protobuf::DescriptorPool::generated_pool();
  if (std::getenv("GANGRUN_TEST_FRESH_PROCESS") == nullptr) {
    char self[4096] = {};
    ASSERT_GT(readlink("/proc/self/exe", self, sizeof(self) - 1), 0);
    ASSERT_EQ(std::system(("GANGRUN_TEST_FRESH_PROCESS=1 " + std::string(self) +
                           " --gtest_filter=LazyDescriptorsTest.* >/dev/null 2>&1")
                              .c_str()),
              0)
        << "the check failed in a fresh process (run it with GANGRUN_TEST_FRESH_PROCESS=1)";
    return;
  }
  EXPECT_EQ(pool->FindFileByName("gangrun/v1/session.proto"), nullptr) << "registered at the start";
  if (!ProtobufIsShared()) {  // (generated_pool() itself registers descriptor.proto)
    for (const char* file : {"google/protobuf/type.proto", "google/protobuf/any.proto",
                             "google/protobuf/wrappers.proto"}) {
      EXPECT_EQ(pool->FindFileByName(file), nullptr) << file << " registered at the start";
    }
  }
  v1::StartGeneration start;
  start.mutable_progress_rules()->set_hang_timeout_seconds(30);
  EXPECT_NE(ToJson(start).find("\"hang_timeout_seconds\":30"), std::string::npos) << ToJson(start);
  EXPECT_NE(pool->FindFileByName("gangrun/v1/session.proto"), nullptr);
  EXPECT_NE(pool->FindMessageTypeByName("gangrun.v1.ProgressRules"), nullptr);
  EXPECT_NE(pool->FindMessageTypeByName("gangrun.v1.NodeEvent"), nullptr);
  // protobuf's own files, registered on their first use too.
  EXPECT_EQ(google::protobuf::Any::descriptor()->full_name(), "google.protobuf.Any");
  EXPECT_NE(pool->FindFileByName("google/protobuf/any.proto"), nullptr);
  EXPECT_NE(google::protobuf::FileDescriptorProto::descriptor()->FindFieldByName("syntax"),
            nullptr);
  EXPECT_NE(pool->FindMessageTypeByName("google.protobuf.FieldDescriptorProto"), nullptr);
}

}  // namespace
}  // namespace gangrun::proto
