// The README's examples, run as written (issue #44): every code block that follows a line
// `<!-- runnable -->` runs on test hosts h0, h1, ... (network namespaces with their own
// address, host name and loopback: tests/testing/netns.h), so that the text and the behaviour
// cannot drift.
//
// How a block runs, as its users would type it:
//   - a line (with its `\` continuations) runs under /bin/sh on the hosts its comment names
//     (`# on h0`, `# on h2,h3`, `# c10d: on h0-h3`; h0 when it names none), in one directory
//     every host shares (as a cluster's home directory), holding a train.py that prints
//     "rank R of N";
//   - lines run in the block's order, each at once, except that a host runs its lines one
//     after the other;
//   - a line ending in `&` is a service (etcd, a daemon, an agent): it starts once every
//     earlier line has ended, and the next line waits until it listens when it is etcd or a
//     daemon; services are stopped (SIGTERM) when the other lines have ended, and a gangrun
//     service must then exit 0;
//   - the block passes when every other line exits 0 and every rank of every job printed.

#include <signal.h>

#include <chrono>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

#include "tests/integration/launcher_fixture.h"
#include "tests/testing/netns.h"

namespace gangrun::testing {
namespace {

using std::chrono::seconds;

struct Line {
  std::string command;   // without its comment and its `&`
  std::set<int> hosts;   // h<i>
  bool service = false;  // ended with `&`
};

struct Block {
  int first_line = 0;  // in README.md, for messages
  std::vector<Line> lines;
  int host_count() const {
    int count = 1;
    for (const auto& line : lines) count = std::max(count, *line.hosts.rbegin() + 1);
    return count;
  }
};

// `# ...` after two spaces is a line's comment; every h<i> and h<i>-h<j> in it is a host.
Line ParseLine(std::string text) {
  Line line;
  const size_t comment = text.find("  #");
  std::string hosts_text;
  if (comment != std::string::npos) {
    hosts_text = text.substr(comment);
    text.erase(comment);
  }
  static const std::regex host(R"(\bh(\d+)(?:-h(\d+))?\b)");
  for (std::sregex_iterator it(hosts_text.begin(), hosts_text.end(), host), end; it != end; ++it) {
    const int from = std::stoi((*it)[1]);
    const int to = (*it)[2].matched ? std::stoi((*it)[2]) : from;
    for (int h = from; h <= to; ++h) line.hosts.insert(h);
  }
  if (line.hosts.empty()) line.hosts.insert(0);
  while (!text.empty() && text.back() == ' ') text.pop_back();
  if (!text.empty() && text.back() == '&') {
    line.service = true;
    text.pop_back();
  }
  line.command = text;
  return line;
}

std::vector<Block> RunnableBlocks(const std::string& readme) {
  std::vector<Block> blocks;
  std::istringstream in(readme);
  std::string text;
  int number = 0;
  bool marked = false;
  while (std::getline(in, text)) {
    ++number;
    if (text == "<!-- runnable -->") {
      marked = true;
      continue;
    }
    if (!marked) continue;
    marked = false;
    if (text.rfind("```", 0) != 0) continue;
    Block block;
    block.first_line = number;
    std::string joined;
    while (std::getline(in, text) && text.rfind("```", 0) != 0) {
      ++number;
      if (!text.empty() && text.back() == '\\') {
        joined += text.substr(0, text.size() - 1) + " ";
        continue;
      }
      joined += text;
      if (joined.find_first_not_of(' ') != std::string::npos) {
        block.lines.push_back(ParseLine(joined));
      }
      joined.clear();
    }
    ++number;
    blocks.push_back(std::move(block));
  }
  return blocks;
}

class ReadmeTest : public LauncherTest {
 protected:
  // Runs `command` under /bin/sh on host `host`, with the built gangrun, msrun and torchrun
  // first on PATH.
  Launched Run(const Hosts& hosts, int host, const std::string& command, bool exec) {
    const std::string bin = GangrunBinary().substr(0, GangrunBinary().rfind('/'));
    const std::string script = "export PATH=" + bin + ":$PATH; " + (exec ? "exec " : "") + command;
    return Launch(hosts.In(host, {"/bin/sh", "-c", script}), {}, dir_.path(), dir_.path());
  }
  // The number of TCP listeners on host `host`.
  int Listeners(const Hosts& hosts, int host) {
    auto ss = Launch(hosts.In(host, {"/usr/bin/ss", "-Hltn"}), {}, dir_.path(), dir_.path());
    RunToEnd(ss);
    const std::string out = ss.Stdout();
    return static_cast<int>(std::count(out.begin(), out.end(), '\n'));
  }
  void RunBlock(const Block& block);
};

void ReadmeTest::RunBlock(const Block& block) {
  SCOPED_TRACE("README.md line " + std::to_string(block.first_line));
  Hosts hosts(block.host_count());
  ASSERT_TRUE(hosts.ok()) << "cannot make network namespaces (needs root and iproute2)";
  std::ofstream(dir_.File("train.py"))
      << "import os, sys\n"
         "print('rank %s of %s' % (os.environ['RANK'], os.environ['WORLD_SIZE']), flush=True)\n";
  struct Running {
    Launched launched;
    std::string what;
    std::optional<common::ExitStatus> end;  // once reaped
  };
  auto wait = [&](Running& running) {
    if (!running.end) running.end = RunToEnd(running.launched, seconds(120));
    return *running.end;
  };
  std::vector<Running> foreground, services;
  std::map<int, size_t> last_on_host;  // host -> index in foreground
  auto finish = [&](Running& running) {
    EXPECT_EQ(wait(running).code, 0) << running.what << "\n" << running.launched.Stderr();
  };
  size_t finished = 0;  // foreground[0, finished) have been waited for
  for (const auto& line : block.lines) {
    if (line.service) {
      for (; finished < foreground.size(); ++finished) finish(foreground[finished]);
    }
    for (int host : line.hosts) {
      const std::string what = "h" + std::to_string(host) + "$ " + line.command;
      if (line.service) {
        const int before = Listeners(hosts, host);
        services.push_back({Run(hosts, host, line.command, true), what, std::nullopt});
        const bool serves =
            line.command.rfind("etcd", 0) == 0 || line.command.rfind("gangrun scheduler", 0) == 0;
        const auto deadline = std::chrono::steady_clock::now() + seconds(30);
        while (serves && Listeners(hosts, host) <= before) {
          ASSERT_LT(std::chrono::steady_clock::now(), deadline)
              << what << " never listened\n"
              << services.back().launched.Stderr();
        }
        continue;
      }
      auto previous = last_on_host.find(host);
      if (previous != last_on_host.end()) {
        wait(foreground[previous->second]);
      }
      last_on_host[host] = foreground.size();
      foreground.push_back({Run(hosts, host, line.command, false), what, std::nullopt});
    }
  }
  for (; finished < foreground.size(); ++finished) finish(foreground[finished]);
  for (auto it = services.rbegin(); it != services.rend(); ++it) {
    kill(-it->launched.pid, SIGTERM);
    const auto end = RunToEnd(it->launched);
    if (it->what.find("$ gangrun") != std::string::npos) {
      EXPECT_EQ(end.code, 0) << it->what << "\n" << it->launched.Stderr();
    }
  }
  // Every rank of every job printed: "rank R of N" for each R < N of each N seen.
  std::map<int, std::set<int>> ranks;
  static const std::regex printed(R"(rank (\d+) of (\d+))");
  for (const auto& running : foreground) {
    const std::string out = running.launched.Stdout();
    for (std::sregex_iterator it(out.begin(), out.end(), printed), end; it != end; ++it) {
      ranks[std::stoi((*it)[2])].insert(std::stoi((*it)[1]));
    }
  }
  EXPECT_FALSE(ranks.empty()) << "no job printed a rank";
  for (const auto& [size, seen] : ranks) {
    EXPECT_EQ(static_cast<int>(seen.size()), size) << "a job of " << size << " ranks";
  }
}

TEST_F(ReadmeTest, EveryRunnableExampleRunsAsWritten) {
  const std::string readme = ReadFile(std::string(GANGRUN_SOURCE_DIR) + "/README.md");
  const auto blocks = RunnableBlocks(readme);
  // The two-host example, torchrun's forms, the store, the daemon on a store, daemon mode.
  ASSERT_GE(blocks.size(), 5u);
  for (const auto& block : blocks) {
    RunBlock(block);
    if (HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace gangrun::testing
