// A failure's signatures (scheduler/restart_rules.h): a site's rules file, read in order and
// before gangrun's hardware signatures; the one line that says what is wrong with a file; and
// what the recovery policy makes of each action. No Scheduler.

#include "scheduler/restart_rules.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "scheduler/recovery_policy.h"

namespace gangrun::scheduler {
namespace {

using Action = RestartRules::Action;

TEST(RestartRulesTest, TheBuiltInSignaturesCompileAndMatchFailingHardware) {
  const RestartRules rules;
  EXPECT_EQ(rules.size(), 3u);
  auto ecc = rules.Find(
      {"exited with code 1", "RuntimeError: CUDA error: uncorrectable ECC error encountered"});
  ASSERT_TRUE(ecc);
  EXPECT_EQ(ecc->action, Action::kExclude);
  EXPECT_EQ(ecc->line, "RuntimeError: CUDA error: uncorrectable ECC error encountered");
  EXPECT_NE(ecc->rule.find("gangrun's hardware signature (exclude /"), std::string::npos)
      << ecc->rule;
  EXPECT_TRUE(
      rules.Find({"NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus."}));
  EXPECT_FALSE(rules.Find({"ValueError: bad batch", "exited with code 1"}));
}

TEST(RestartRulesTest, ASitesRulesComeFirstInTheirOrder) {
  auto rules = RestartRules::Parse(
      "# our signatures\n"
      "\n"
      "restart  NCCL (WARN|error).*Connection reset\n"
      "stop     CUDA out of memory\n"
      "  exclude\tECC\n",
      "rules.txt");
  ASSERT_TRUE(rules.ok()) << rules.status();
  EXPECT_EQ(rules->size(), 6u);
  auto oom = rules->Find({"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB"});
  ASSERT_TRUE(oom);
  EXPECT_EQ(oom->action, Action::kStop);
  EXPECT_EQ(oom->rule, "rule 2 of rules.txt (stop /CUDA out of memory/)");
  // The site's `exclude ECC` matches before gangrun's own signature does.
  auto ecc = rules->Find({"uncorrectable ECC error encountered"});
  ASSERT_TRUE(ecc);
  EXPECT_EQ(ecc->rule, "rule 3 of rules.txt (exclude /ECC/)");
  // The first rule that matches any line decides, not the first line.
  auto both = rules->Find({"CUDA out of memory", "NCCL WARN socket: Connection reset by peer"});
  ASSERT_TRUE(both);
  EXPECT_EQ(both->action, Action::kRestart);
}

TEST(RestartRulesTest, AFileThatIsNotRulesIsOneLineNamingItsLine) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"stop a\nbogus b\n", "rules.txt line 2: 'bogus' is not an action"},
      {"# fine\nstop\n", "rules.txt line 2: no pattern"},
      {"exclude (unclosed\n", "rules.txt line 1: the pattern does not compile: "},
  };
  for (const auto& [text, said] : cases) {
    auto rules = RestartRules::Parse(text, "rules.txt");
    ASSERT_FALSE(rules.ok()) << text;
    const std::string message(rules.status().message());
    EXPECT_NE(message.find(said), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
  std::string many;
  for (size_t i = 0; i <= RestartRules::kMaxRules; ++i) many += "stop x\n";
  EXPECT_FALSE(RestartRules::Parse(many, "many").ok());
  EXPECT_FALSE(RestartRules::Parse(std::string(RestartRules::kMaxFileBytes + 1, '#'), "big").ok());
  auto missing = RestartRules::Load("/nonexistent/rules.txt");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/rules.txt: No such file"),
            std::string::npos)
      << missing.status();
  // No file: the built-in signatures.
  auto none = RestartRules::Load("");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->size(), 3u);
}

TEST(RestartRulesTest, AFailuresTextIsItsExitItsExceptionAndItsLog) {
  v1::RootCause cause;
  cause.mutable_exit()->set_signal(7);
  cause.mutable_error()->set_message("RuntimeError: boom");
  cause.mutable_error()->add_traceback("File \"train.py\", line 3, in <module>");
  cause.add_log_tail("last words");
  const std::vector<std::string> text = FailureText(cause);
  ASSERT_EQ(text.size(), 4u);
  EXPECT_NE(text[0].find("signal 7"), std::string::npos) << text[0];
  EXPECT_EQ(text[1], "RuntimeError: boom");
  EXPECT_EQ(text[3], "last words");
}

RecoveryPolicy::Options WithRules(const std::string& text) {
  RecoveryPolicy::Options options;
  auto rules = RestartRules::Parse(text, "rules.txt");
  EXPECT_TRUE(rules.ok()) << rules.status();
  options.rules = std::make_shared<const RestartRules>(std::move(*rules));
  return options;
}

TEST(RestartRulesTest, ThePolicyStopsExcludesOrRestartsAsARuleSays) {
  RecoveryPolicy stop(WithRules("stop out of memory\n"));
  auto stopped = stop.OnGenerationFailed(7, "exit code 1", {"CUDA out of memory"});
  EXPECT_TRUE(stopped.stop);
  EXPECT_EQ(stopped.stop_why,
            "the failure matched rule 1 of rules.txt (stop /out of memory/) matched \"CUDA out of "
            "memory\"");
  // A hardware signature: the node goes and the restart is not the job's.
  RecoveryPolicy exclude(WithRules(""));
  auto excluded = exclude.OnGenerationFailed(7, "exit code 1", {"uncorrectable ECC error"});
  EXPECT_TRUE(excluded.exclude);
  EXPECT_TRUE(excluded.forgiven);
  EXPECT_FALSE(excluded.stop);
  EXPECT_NE(excluded.exclude_why.find("its failure matched gangrun's hardware signature"),
            std::string::npos)
      << excluded.exclude_why;
  // `restart`: the same failure three times is not taken for the code's.
  RecoveryPolicy restart(WithRules("restart Connection reset\n"));
  for (int i = 0; i < 5; ++i) {
    auto verdict = restart.OnGenerationFailed(7, "exit code 1; last line: Connection reset",
                                              {"Connection reset"});
    EXPECT_FALSE(verdict.stop) << i;
    EXPECT_NE(verdict.rule.find("rule 1 of rules.txt (restart /Connection reset/)"),
              std::string::npos);
  }
  // Without the rule, the third stops it.
  RecoveryPolicy plain(WithRules(""));
  plain.OnGenerationFailed(7, "same", {"Connection reset"});
  plain.OnGenerationFailed(7, "same", {"Connection reset"});
  EXPECT_TRUE(plain.OnGenerationFailed(7, "same", {"Connection reset"}).stop);
}

}  // namespace
}  // namespace gangrun::scheduler
