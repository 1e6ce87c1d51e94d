// Every command's help in one layout (CLI11's, which most commands use; the commands that
// read their own command line print the same), and their usage errors in one line.

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "tests/testing/test_util.h"

namespace gangrun::testing {
namespace {

struct Ran {
  int code = -1;
  std::string out, err;
};

// `gangrun ARGS`, run to its end (30 s at most).
Ran Gangrun(const std::vector<std::string>& args) {
  TempDir dir;
  std::vector<std::string> argv = {GangrunBinary()};
  argv.insert(argv.end(), args.begin(), args.end());
  auto launched = Launch(argv, {}, dir.path(), dir.path());
  Ran ran;
  auto status = WaitExit(launched.pid, std::chrono::seconds(30));
  EXPECT_TRUE(status.has_value()) << "gangrun did not exit";
  ran.code = status ? status->code : -1;
  ran.out = launched.Stdout();
  ran.err = launched.Stderr();
  return ran;
}

TEST(HelpTest, EveryCommandsHelpHasOneLayout) {
  for (const std::string command :
       {"status", "stop", "health", "scale", "kv", "progress", "scheduler", "agent", "submit",
        "generate", "stacks", "logs", "drain", "undrain"}) {
    const Ran help = Gangrun({command, "--help"});
    EXPECT_EQ(help.code, 0) << command << ": " << help.err;
    EXPECT_EQ(help.out.rfind("gangrun " + command + ": ", 0), 0u) << help.out;
    EXPECT_NE(help.out.find("\nUsage: gangrun " + command + " "), std::string::npos) << help.out;
    EXPECT_EQ(help.err, "") << command;
  }
}

TEST(HelpTest, UsageErrorsAreOneLineNamingTheHelp) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"submit", {"submit", "--worker_num", "2", "/bin/true"}},  // no --master
      {"kv", {"kv"}},
      {"progress", {"progress"}},
      {"generate", {"generate", "bogus"}},
      {"logs", {"logs", "--master", "127.0.0.1:1", "--rank", "x"}},
      {"status", {"status", "--bogus"}},
      {"drain", {"drain", "--master", "127.0.0.1:1"}},  // no agent named
  };
  for (const auto& [command, args] : cases) {
    const Ran ran = Gangrun(args);
    EXPECT_EQ(ran.code, 2) << command << ": " << ran.err;
    EXPECT_EQ(std::count(ran.err.begin(), ran.err.end(), '\n'), 1) << ran.err;
    EXPECT_NE(ran.err.find("(see gangrun " + command + " --help)"), std::string::npos) << ran.err;
  }
}

}  // namespace
}  // namespace gangrun::testing
