#include "launcher/options.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <map>

#include "launcher/command_line.h"
#include "launcher/option_table.h"
#include "launcher/parse_command_line.h"
#include "tests/testing/test_util.h"

namespace gangrun::launcher {
namespace {

EnvLookup Env(std::map<std::string, std::string> vars = {}) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

Options Parse(std::vector<std::string> args, Personality p = Personality::kGangrun,
              std::map<std::string, std::string> env = {}) {
  auto result = ParseCommandLine(p, args, Env(env));
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? result->options : Options{};
}

std::string Error(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
  auto result = ParseCommandLine(Personality::kGangrun, args, Env(env));
  EXPECT_FALSE(result.ok());
  return result.ok() ? "" : std::string(result.status().message());
}

TEST(OptionsTest, DefaultsFollowMsrun) {
  Options o = Parse({"train.py"});
  EXPECT_EQ(o.worker_num, 8);
  EXPECT_EQ(o.local_worker_num, 8);
  EXPECT_EQ(o.master_addr, "127.0.0.1");
  EXPECT_EQ(o.master_port, 8118);
  EXPECT_EQ(o.node_rank, -1);
  EXPECT_EQ(o.log_dir, "");
  EXPECT_EQ(o.cluster_time_out, 600);
  EXPECT_EQ(o.bind_core.mode, BindCore::Mode::kOff);
  EXPECT_EQ(o.sim_level, -1);
  EXPECT_EQ(o.sim_rank_id, -1);
  EXPECT_EQ(o.tail_worker_log, std::vector<int>{-1});
  EXPECT_DOUBLE_EQ(o.grace_period, 30.0);
  EXPECT_EQ(o.task_script, "train.py");
}

TEST(OptionsTest, JoinDefaultsDifferByPersonality) {
  EXPECT_TRUE(Parse({"t.py"}, Personality::kGangrun).join);
  EXPECT_FALSE(Parse({"t.py"}, Personality::kMsrun).join);
}

TEST(OptionsTest, AcceptsBothSpellingsOfValues) {
  Options o = Parse({"--worker_num=4", "--local_worker_num", "2", "--node_rank", "-1",
                     "--master_addr=::1", "t.py"});
  EXPECT_EQ(o.worker_num, 4);
  EXPECT_EQ(o.local_worker_num, 2);
  EXPECT_EQ(o.node_rank, -1);
  EXPECT_EQ(o.master_addr, "::1");
}

TEST(OptionsTest, WorkerNumMayBeAnElasticRange) {
  Options o = Parse({"--worker_num", "2:6", "t.py"});
  EXPECT_EQ(o.min_workers(), 2);
  EXPECT_EQ(o.worker_num, 6);
  EXPECT_TRUE(o.elastic());
  EXPECT_FALSE(Parse({"--worker_num", "4", "t.py"}).elastic());
}

TEST(OptionsTest, EverythingAfterTheScriptBelongsToIt) {
  Options o = Parse({"--worker_num", "2", "train.py", "--worker_num", "5", "-x", "--", "y"});
  EXPECT_EQ(o.worker_num, 2);
  EXPECT_EQ(o.task_script, "train.py");
  EXPECT_EQ(o.task_args, (std::vector<std::string>{"--worker_num", "5", "-x", "--", "y"}));
}

TEST(OptionsTest, DoubleDashEndsOptions) {
  Options o = Parse({"--worker_num", "2", "--", "train.py", "a"});
  EXPECT_EQ(o.task_script, "train.py");
  EXPECT_EQ(o.task_args, std::vector<std::string>{"a"});
}

TEST(OptionsTest, BooleansTakeMsrunLiteralsAndCommonSpellings) {
  for (const char* v : {"True", "true", "1"}) EXPECT_TRUE(Parse({"--join", v, "t.py"}).join);
  for (const char* v : {"False", "false", "0"}) EXPECT_FALSE(Parse({"--join", v, "t.py"}).join);
  EXPECT_EQ(Error({"--join", "yes", "t.py"}),
            "invalid value 'yes' for --join: expected True or False");
}

TEST(OptionsTest, MalformedNumbersAreNamed) {
  EXPECT_EQ(Error({"--worker_num", "abc", "t.py"}),
            "invalid value 'abc' for --worker_num: expected an integer in [1, 1048576], or "
            "MIN:MAX with 1 <= MIN <= MAX");
  EXPECT_EQ(Error({"--local_worker_num", "1.5", "t.py"}),
            "invalid value '1.5' for --local_worker_num: expected integer");
  EXPECT_EQ(Error({"--grace_period", "-1", "t.py"}),
            "invalid value '-1' for --grace_period: expected a number of seconds in [0, 86400]");
}

TEST(OptionsTest, EveryNumericOptionHasARange) {
  // Values that used to become no grace, a busy loop, a node that never joins, no backoff,
  // or gigabytes of plans.
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"--grace_period", "1e10"},
      {"--heartbeat_interval", "1e-300"},
      {"--node_timeout", "1e300"},
      {"--restart_backoff", "1e308"},
      {"--restart_backoff", "1,1e308"},
      {"--last_call", "nan"},
      {"--worker_num", "2147483647"},
      {"--worker_num", "0:4"},
      {"--worker_num", "5:4"},
      {"--local_worker_num", "1000000"},
      {"--local_worker_num", "0"},
      {"--master_port", "65536"},
      {"--node_rank", "-2"},
      {"--cluster_time_out", "99999999999"},
      {"--max_restarts", "-1"},
      {"--sim_level", "4"},
      {"--metrics_port", "70000"},
      {"--health_port", "-5"},
      {"--kv_max_bytes", "1"},
      {"--kv_max_bytes", "2TiB"},
      {"--kv_max_bytes", "-1M"},
      {"--tail_worker_log", "2000000"},
      {"--spare_nodes", "-1"},
      {"--health_check_timeout", "0"},
      {"--exclude_after", "-1"},
      {"--no_restart_exit_codes", "0"},
      {"--no_restart_exit_codes", "256"},
      {"--no_restart_exit_codes", "93,x"},
      {"--max_no_progress_restarts", "-3"},
      {"--signals_to_forward", "SIGKILL"},
      {"--signals_to_forward", "SIGTERM"},
      {"--signals_to_forward", "USR1,BOGUS"},
      {"--time_limit", "-1"},
      {"--time_limit", "1e12"},
      {"--time_limit_signal", "USR1"},
      {"--time_limit_signal", "USR1@0"},
      {"--time_limit_signal", "KILL@10"},
      {"--time_limit_signal", "USR1@nan"},
  };
  for (const auto& [option, value] : bad) {
    std::string message = Error({option, value, "t.py"});
    EXPECT_NE(message.find("invalid value '" + value + "' for " + option + ": expected"),
              std::string::npos)
        << option << " " << value << ": " << message;
  }
  EXPECT_EQ(Error({"--heartbeat_interval", "1e-300", "t.py"}),
            "invalid value '1e-300' for --heartbeat_interval: expected a number of seconds in "
            "[0.01, 60]");
}

TEST(OptionsTest, RecoveryOptionsTakeNamesNumbersAndNone) {
  Options o =
      Parse({"--signals_to_forward", "usr2, SIGUSR1,12", "--no_restart_exit_codes", "93, 3,93",
             "--time_limit", "600", "--time_limit_signal", "SIGQUIT@30", "t.py"});
  EXPECT_EQ(o.signals_to_forward, (std::vector<int>{SIGUSR2, SIGUSR1}));
  EXPECT_EQ(o.no_restart_exit_codes, (std::set<int>{3, 93}));
  EXPECT_EQ(o.time_limit, 600);
  EXPECT_EQ(o.time_limit_signal, SIGQUIT);
  EXPECT_EQ(o.time_limit_signal_before, 30);
  Options none = Parse({"--signals_to_forward", "", "--time_limit_signal", "", "t.py"});
  EXPECT_TRUE(none.signals_to_forward.empty());
  EXPECT_EQ(none.time_limit_signal, 0);
  Options defaults = Parse({"t.py"});
  EXPECT_EQ(defaults.signals_to_forward, (std::vector<int>{SIGUSR1, SIGUSR2}));
  EXPECT_EQ(defaults.spare_nodes, 0);
  EXPECT_EQ(defaults.health_check_timeout, 60);
}

TEST(OptionsTest, RangesAcceptTheirEnds) {
  Options o = Parse({"--grace_period", "86400", "--heartbeat_interval", "0.01",
                     "--cluster_time_out", "-1", "--kv_max_bytes", "64MiB", "--worker_num",
                     "1048576", "--local_worker_num", "4096", "t.py"});
  EXPECT_DOUBLE_EQ(o.grace_period, 86400);
  EXPECT_DOUBLE_EQ(o.heartbeat_interval, 0.01);
  EXPECT_EQ(o.cluster_time_out, -1);
  EXPECT_EQ(o.kv_max_bytes, int64_t{64} << 20);
  EXPECT_EQ(o.worker_num, 1048576);
  EXPECT_EQ(o.local_worker_num, 4096);
  EXPECT_EQ(Parse({"--kv_max_bytes", "1048576", "t.py"}).kv_max_bytes, 1048576);
  EXPECT_EQ(Parse({"--kv_max_bytes", "2G", "t.py"}).kv_max_bytes, int64_t{2} << 30);
}

TEST(OptionsTest, UnknownOptionIsRejected) {
  EXPECT_EQ(Error({"--wroker_num", "2", "t.py"}),
            "unknown option --wroker_num (see gangrun --help)");
  EXPECT_EQ(Error({"--bogus=1", "t.py"}), "unknown option --bogus (see gangrun --help)");
}

TEST(OptionsTest, MissingValueIsAnError) {
  auto result = ParseCommandLine(Personality::kGangrun, {"--worker_num"}, Env());
  EXPECT_FALSE(result.ok());
}

TEST(OptionsTest, EnvironmentOverridesDefaultsAndFlagsWin) {
  Options o = Parse({"t.py"}, Personality::kGangrun,
                    {{"GANGRUN_WORKER_NUM", "3"}, {"GANGRUN_JOIN", "False"}});
  EXPECT_EQ(o.worker_num, 3);
  EXPECT_FALSE(o.join);
  Options flag =
      Parse({"--worker_num", "5", "t.py"}, Personality::kGangrun, {{"GANGRUN_WORKER_NUM", "3"}});
  EXPECT_EQ(flag.worker_num, 5);
}

TEST(OptionsTest, BadEnvironmentValueNamesTheVariable) {
  EXPECT_EQ(Error({"t.py"}, {{"GANGRUN_MASTER_PORT", "x"}}),
            "invalid value 'x' for GANGRUN_MASTER_PORT: expected integer");
}

TEST(OptionsTest, BindCoreTakesBooleansAndDicts) {
  EXPECT_EQ(Parse({"--bind_core", "True", "t.py"}).bind_core.mode, BindCore::Mode::kAuto);
  EXPECT_EQ(Parse({"--bind_core", "FALSE", "t.py"}).bind_core.mode, BindCore::Mode::kOff);
  Options o = Parse({"--bind_core", R"({"scheduler":["0"],"device0":["1-3","5"]})", "t.py"});
  ASSERT_EQ(o.bind_core.mode, BindCore::Mode::kDict);
  ASSERT_EQ(o.bind_core.dict.size(), 2u);
  EXPECT_EQ(o.bind_core.dict[1].first, "device0");
  EXPECT_EQ(o.bind_core.dict[1].second, (std::vector<std::string>{"1-3", "5"}));
}

TEST(OptionsTest, MalformedBindCoreDictIsRejected) {
  for (const char* bad : {R"({"gpu0":["1"]})", R"({"device0":"1-3"})", R"({"device0":["3-1"]})",
                          R"({"device0":[1]})", "[1,2]", "{oops"}) {
    std::string message = Error({"--bind_core", bad, "t.py"});
    EXPECT_NE(message.find("--bind_core"), std::string::npos) << bad;
  }
}

TEST(OptionsTest, TailWorkerLogIsAListOfRanks) {
  EXPECT_EQ(Parse({"--tail_worker_log", "0,3", "t.py"}).tail_worker_log, (std::vector<int>{0, 3}));
  EXPECT_FALSE(
      ParseCommandLine(Personality::kGangrun, {"--tail_worker_log", "a", "t.py"}, Env()).ok());
}

TEST(OptionsTest, HelpIsReturnedNotAnError) {
  auto result = ParseCommandLine(Personality::kMsrun, {"--help"}, Env());
  ASSERT_TRUE(result.ok());
  EXPECT_NE(result->help.find("--worker_num"), std::string::npos);
  EXPECT_NE(result->help.find("msrun"), std::string::npos);
}

TEST(OptionsTest, PersonalityFollowsArgv0) {
  EXPECT_EQ(PersonalityFromArgv0("/usr/bin/msrun"), Personality::kMsrun);
  EXPECT_EQ(PersonalityFromArgv0("msrun"), Personality::kMsrun);
  EXPECT_EQ(PersonalityFromArgv0("./build/bin/gangrun"), Personality::kGangrun);
}

Options Valid() {
  Options o;
  o.worker_num = 2;
  o.local_worker_num = 2;
  o.task_script = "t.py";
  return o;
}

std::string Invalid(Options o) {
  absl::Status status = Validate(o);
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  return std::string(status.message());
}

TEST(ValidateTest, AcceptsAValidConfiguration) { EXPECT_TRUE(Validate(Valid()).ok()); }

TEST(ValidateTest, RejectsBadCountsWithOneClearLine) {
  Options o = Valid();
  o.worker_num = 0;
  EXPECT_EQ(Invalid(o), "--worker_num must be in 1..1048576 (got 0)");
  o = Valid();
  o.local_worker_num = 3;
  EXPECT_EQ(Invalid(o), "--local_worker_num (3) is greater than --worker_num (2)");
  o = Valid();
  o.local_worker_num = -1;
  EXPECT_EQ(Invalid(o), "--local_worker_num must be in 1..4096 (got -1)");
}

TEST(ValidateTest, RejectsAnElasticMinimumAboveTheMaximum) {
  Options o = Valid();
  o.worker_num_min = 3;
  EXPECT_EQ(Invalid(o), "--worker_num MIN:MAX needs 1 <= MIN <= MAX (got 3:2)");
}

TEST(ValidateTest, RejectsPortsOutsideTheRange) {
  Options o = Valid();
  o.master_port = 0;
  EXPECT_EQ(Invalid(o), "--master_port must be in 1..65535 (got 0)");
  o.master_port = 65536;
  EXPECT_EQ(Invalid(o), "--master_port must be in 1..65535 (got 65536)");
}

TEST(ValidateTest, RejectsMissingTaskAndUnreadableFiles) {
  Options o = Valid();
  o.task_script.clear();
  EXPECT_NE(Invalid(o).find("missing task script"), std::string::npos);
  o = Valid();
  testing::TempDir dir;  // a path that does not exist, inside the test's own directory
  o.rank_table_file = dir.File("missing/rank_table.json");
  EXPECT_EQ(Invalid(o),
            "cannot read --rank_table_file '" + o.rank_table_file + "': No such file or directory");
}

TEST(ValidateTest, RejectsOptionsThatContradictEachOther) {
  Options o = Valid();
  o.node_timeout = 1;
  o.heartbeat_interval = 2;
  EXPECT_NE(Invalid(o).find("--node_timeout (1.000000 s) must be longer than "
                            "--heartbeat_interval"),
            std::string::npos);
  o = Valid();
  o.node_rank = 2;
  EXPECT_EQ(Invalid(o),
            "--node_rank 2 is out of range: a job of 2 worker(s) has at most 2 node(s)");
}

TEST(ValidateTest, RejectsALogDirectoryThatCannotHoldLogs) {
  Options o = Valid();
  o.log_dir = "/proc/gangrun-logs";
  EXPECT_EQ(Invalid(o),
            "--log_dir '/proc/gangrun-logs' is on /proc or /sys, not a file system "
            "for logs");
  testing::TempDir dir;
  ASSERT_EQ(chmod(dir.path().c_str(), 0500), 0);
  o.log_dir = dir.File("a/b");
  if (geteuid() != 0) {  // root writes anyway
    EXPECT_NE(Invalid(o).find("cannot write in"), std::string::npos);
  }
  chmod(dir.path().c_str(), 0700);
  std::ofstream(dir.File("file")) << "x";
  o.log_dir = dir.File("file/logs");
  EXPECT_NE(Invalid(o).find("is not a directory"), std::string::npos);
  o.log_dir = dir.File("new/nested");
  EXPECT_TRUE(Validate(o).ok());
}

TEST(ValidateTest, RejectsAnEventLogThatCannotBeWritten) {
  Options o = Valid();
  testing::TempDir dir;  // a path that does not exist, inside the test's own directory
  o.event_log = dir.File("missing/events.jsonl");
  EXPECT_EQ(Invalid(o), "cannot create --event_log '" + o.event_log + "': '" + dir.File("missing") +
                            "' is not a writable directory");
}

TEST(ValidateTest, RejectsBindCoreCpusThatDoNotExist) {
  Options o = Valid();
  o.bind_core = {BindCore::Mode::kDict, {{"device0", {"0"}}, {"device1", {"99999"}}}};
  EXPECT_NE(Invalid(o).find("--bind_core: CPU 99999 of 'device1' does not exist"),
            std::string::npos);
}

TEST(ValidateTest, RejectsOutOfRangeSimulationLevels) {
  Options o = Valid();
  o.sim_level = 7;
  EXPECT_EQ(Invalid(o), "--sim_level must be one of -1, 0, 1, 2, 3 (got 7)");
}

// A launch gives CLI11 only the options its command line names (command_line.h): the rows
// named before the task, or none of that when anything else comes first.
TEST(OptionsTest, OnlyTheRowsNamedBeforeTheTaskAreSelected) {
  const std::vector<OptionRow>& rows = OptionRows();
  auto selected = [&](std::vector<std::string> args) {
    std::vector<std::string> names;
    auto named = RowsNamedBeforeTheTask(rows, args);
    if (!named) return std::vector<std::string>{"<every row>"};
    for (size_t i = 0; i < rows.size(); ++i) {
      if ((*named)[i]) names.push_back(rows[i].name);
    }
    return names;
  };
  using Names = std::vector<std::string>;
  EXPECT_EQ(selected({"train.py"}), Names{});
  EXPECT_EQ(selected({"--worker_num=4", "--log_dir", "logs", "train.py", "--help", "-x"}),
            (Names{"worker_num", "log_dir"}));
  EXPECT_EQ(selected({}), Names{});
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"--help"},
           {"-h"},
           {"--version"},
           {"--no_such_option=1", "train.py"},
           {"--worker_num"},                    // its value missing
           {"--worker_num", "-4", "train.py"},  // a value CLI11 may read as an option
           {"--log_dir", "", "train.py"},
           {"--", "train.py"},
           {"-", "train.py"},
       }) {
    EXPECT_EQ(selected(args), Names{"<every row>"}) << args[0];
  }
}

// What the selected rows parse to is what every row parses to: the same command lines, once
// as they are and once after "--node_rank -1" (a value starting with '-', so every row).
TEST(OptionsTest, TheSelectedRowsParseAsEveryRowDoes) {
  const std::vector<std::vector<std::string>> lines = {
      {"train.py"},
      {"--worker_num=4", "--local_worker_num", "4", "train.py", "--lr", "1"},
      {"--worker_num", "8", "--worker_num=2", "--local_worker_num=2", "--log_dir", "logs",
       "train.py", "--worker_num", "9"},
      {"--master_port=1234", "--join", "False", "python3", "-u", "x.py", "--", "-z"},
      {"--bind_core={\"device0\": [\"0-1\"]}", "--worker_log_name=w{ip}", "t.py"},
  };
  for (const auto& line : lines) {
    std::vector<std::string> every = {"--node_rank", "-1"};
    every.insert(every.end(), line.begin(), line.end());
    ASSERT_TRUE(RowsNamedBeforeTheTask(OptionRows(), line).has_value()) << line[0];
    ASSERT_FALSE(RowsNamedBeforeTheTask(OptionRows(), every).has_value()) << line[0];
    auto few = ParseCommandLine(Personality::kGangrun, line, Env());
    auto all = ParseCommandLine(Personality::kGangrun, every, Env());
    ASSERT_TRUE(few.ok()) << few.status();
    ASSERT_TRUE(all.ok()) << all.status();
    for (const auto& row : OptionRows()) {
      if (row.name == "node_rank") continue;
      EXPECT_EQ(row.format(few->options), row.format(all->options)) << line[0] << " " << row.name;
    }
    EXPECT_EQ(few->options.task_script, all->options.task_script);
    EXPECT_EQ(few->options.task_args, all->options.task_args);
    all->flags.erase("node_rank");
    all->given.erase("node_rank");
    EXPECT_EQ(few->flags, all->flags);
    EXPECT_EQ(few->given, all->given);
  }
}

}  // namespace
}  // namespace gangrun::launcher
