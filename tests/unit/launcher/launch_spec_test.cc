// The option table and the launch spec (launcher/option_table.h, launcher/launch_spec.h): every
// option survives options -> spec -> argv -> options, and a spec is held to a command line's
// rules.

#include "launcher/launch_spec.h"

#include <fcntl.h>
#include <gtest/gtest.h>

#include <map>

#include "common/files.h"
#include "launcher/option_table.h"
#include "launcher/parse_command_line.h"

namespace gangrun::launcher {
namespace {

// A non-default value for every option of the table, written as the table writes it back. A new
// option without a sample here fails the first test.
const std::map<std::string, std::string>& Samples() {
  static const std::map<std::string, std::string> samples = {
      {"worker_num", "6:12"},
      {"local_worker_num", "3"},
      {"master_addr", "10.0.0.9"},
      {"master_port", "9000"},
      {"node_rank", "2"},
      {"log_dir", "/var/log/job"},
      {"join", "False"},
      {"cluster_time_out", "-1"},
      {"bind_core", R"({"device0":["0-3"],"device1":["4-7"]})"},
      {"sim_level", "1"},
      {"sim_rank_id", "3"},
      {"rank_table_file", "/etc/ranks.json"},
      {"worker_log_name", "w_{ip}"},
      {"tail_worker_log", "1,3"},
      {"max_restarts", "7"},
      {"restart_backoff", "0.5,8"},
      {"heartbeat_interval", "0.25"},
      {"node_timeout", "7.5"},
      {"grace_period", "2"},
      {"last_call", "3"},
      {"kv_max_bytes", "2097152"},
      {"kv_max_waits", "32"},
      {"hang_timeout", "auto"},
      {"hang_timeout_initial", "40"},
      {"section_timeout", "ckpt=60,load=5"},
      {"stack_timeout", "3"},
      {"progress_hook", "False"},
      {"straggler_factor", "2.5"},
      {"spare_nodes", "2"},
      {"rejoin_window", "15"},
      {"health_check", "deploy/health/log-dir-writable"},
      {"topology_domain", "rack7"},
      {"health_check_timeout", "12.5"},
      {"kernel_log", "/var/log/kern.log"},
      {"device_files", "/dev/dri/renderD*"},
      {"exclude_after", "2"},
      {"no_restart_exit_codes", "3,93"},
      {"max_no_progress_restarts", "4"},
      {"max_same_failures", "5"},
      {"restart_rules", "/etc/gangrun/rules.txt"},
      {"signals_to_forward", "SIGUSR2,SIGQUIT"},
      {"time_limit", "3600"},
      {"time_limit_signal", "SIGUSR1@120"},
      {"run_id", "job-7"},
      {"store", "etcd://10.0.0.7:2379,10.0.0.8:2379/jobs"},
      {"store_cacert", "/etc/etcd/ca.pem"},
      {"store_cert", "/etc/etcd/client.pem"},
      {"store_key", "/etc/etcd/client.key"},
      {"store_follow", "True"},
      {"dry_run", "True"},
      {"virtual_local_rank", "True"},
      {"agent_store", "True"},
      {"store_wait_report", "7.5"},
      {"numa_binding", "exclusive"},
      {"bind_numa", "True"},
      {"duplicate_stdout_filters", "loss=,step"},
      {"duplicate_stderr_filters", "Traceback"},
      {"log_prefix", "<{rank}> "},
      {"metrics_port", "9100"},
      {"metrics_host", "10.0.0.5"},
      {"event_log", "/tmp/events.jsonl"},
      {"health_port", "9200"},
      {"token", "tok"},
      {"token_file", "/etc/gangrun/token"},
      {"tls_cert", "/etc/gangrun/cert.pem"},
      {"tls_key", "/etc/gangrun/key.pem"},
      {"tls_ca", "/etc/gangrun/ca.pem"},
  };
  return samples;
}

EnvLookup NoEnv() {
  return [](const std::string&) { return std::nullopt; };
}

Options ParseAll(const std::vector<std::string>& args, const EnvLookup& env = NoEnv()) {
  auto parsed = ParseCommandLine(Personality::kGangrun, args, env);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  return parsed.ok() ? parsed->options : Options();
}

TEST(OptionTableTest, EveryOptionReadsBackWhatItWrites) {
  std::vector<std::string> args;
  for (const OptionRow& row : OptionRows()) {
    auto sample = Samples().find(row.name);
    ASSERT_NE(sample, Samples().end()) << "no sample value for --" << row.name;
    args.insert(args.end(), {"--" + row.name, sample->second});
  }
  EXPECT_EQ(Samples().size(), OptionRows().size()) << "a sample for an option that is gone";
  args.insert(args.end(), {"train.py", "--lr", "0.1"});
  const Options o = ParseAll(args);
  const Options defaults;
  for (const OptionRow& row : OptionRows()) {
    EXPECT_EQ(row.format(o), Samples().at(row.name)) << "--" << row.name;
    EXPECT_NE(row.format(o), row.format(defaults))
        << "--" << row.name << "'s sample is its default";
  }
}

TEST(LaunchSpecTest, EveryTravellingOptionSurvivesSpecAndArgv) {
  std::vector<std::string> args;
  for (const auto& [name, value] : Samples()) args.insert(args.end(), {"--" + name, value});
  args.insert(args.end(), {"train.py", "--lr", "0.1"});
  const Options before = ParseAll(args);
  const v1::LaunchSpec spec = ToLaunchSpec(before);
  // The agent's launcher reads its command line with GANGRUN_* variables around it: none of
  // them may win over the spec.
  const EnvLookup noisy = [](const std::string& name) -> std::optional<std::string> {
    if (name == "GANGRUN_GRACE_PERIOD") return "99";
    if (name == "GANGRUN_METRICS_PORT") return "9118";
    return std::nullopt;
  };
  const Options after = ParseAll(LaunchArgv(spec), noisy);
  for (const OptionRow& row : OptionRows()) {
    if (row.travels) {
      EXPECT_EQ(row.format(after), row.format(before)) << "--" << row.name;
    } else {
      EXPECT_EQ(spec.options().count(row.name), 0u) << "--" << row.name << " must not travel";
    }
  }
  EXPECT_EQ(after.task_script, "train.py");
  EXPECT_EQ(after.task_args, (std::vector<std::string>{"--lr", "0.1"}));
  auto from = FromLaunchSpec(spec);
  ASSERT_TRUE(from.ok()) << from.status();
  EXPECT_EQ(from->access.token, "");  // the token never travels
  EXPECT_EQ(from->access.token_file, "/etc/gangrun/token");
}

TEST(LaunchSpecTest, ASpecIsHeldToTheCommandLinesRules) {
  v1::LaunchSpec spec = ToLaunchSpec(ParseAll({"/bin/true"}));
  SetLaunchOption(spec, "worker_num", "0");
  EXPECT_FALSE(FromLaunchSpec(spec).ok());
  spec = ToLaunchSpec(ParseAll({"/bin/true"}));
  (*spec.mutable_options())["rm_rf"] = "/";
  auto unknown = FromLaunchSpec(spec);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("does not take: rm_rf"), std::string::npos);
  spec = ToLaunchSpec(ParseAll({"/bin/true"}));
  (*spec.mutable_options())["token"] = "s3cret";
  EXPECT_FALSE(FromLaunchSpec(spec).ok()) << "a token never travels in a spec";
  // The daemon's choices go in one option at a time, read back as they went in.
  spec = ToLaunchSpec(ParseAll({"/bin/true"}));
  SetLaunchOption(spec, "node_rank", "4");
  EXPECT_EQ(LaunchOption(spec, "node_rank"), "4");
  auto placed = FromLaunchSpec(spec);
  ASSERT_TRUE(placed.ok());
  EXPECT_EQ(placed->node_rank, 4);
}

// An agent's launcher: its command line is the label, its spec comes whole through a memory
// file, and what is not a spec, or is larger than any spec can be, is one clear error.
TEST(LaunchSpecTest, ASpecTravelsThroughADescriptorBehindAShortLabel) {
  v1::LaunchSpec spec = ToLaunchSpec(ParseAll({"--max_restarts", "7", "train.py", "--lr", "1"}));
  SetLaunchOption(spec, "run_id", "job-4");
  EXPECT_EQ(LaunchLabel(spec),
            (std::vector<std::string>{"--run_id", "job-4", "--", "train.py", "--lr", "1"}));
  auto fd = common::MemoryFile("spec", spec.SerializeAsString());
  ASSERT_TRUE(fd.ok()) << fd.status();
  auto read = ReadLaunchSpec(*fd);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(LaunchArgv(*read), LaunchArgv(spec));
  EXPECT_EQ(fcntl(*fd, F_GETFD), -1) << "the descriptor is closed once read";

  auto garbage = common::MemoryFile("spec", "\xff\xff\xff not a spec");
  ASSERT_TRUE(garbage.ok());
  auto bad = ReadLaunchSpec(*garbage);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("does not parse"), std::string::npos) << bad.status();

  auto huge = common::MemoryFile("spec", std::string(kMaxLaunchSpecBytes + 1, '\0'));
  ASSERT_TRUE(huge.ok());
  auto too_large = ReadLaunchSpec(*huge);
  ASSERT_FALSE(too_large.ok());
  EXPECT_NE(too_large.status().message().find("larger than 8388608 bytes"), std::string::npos)
      << too_large.status();
}

}  // namespace
}  // namespace gangrun::launcher
