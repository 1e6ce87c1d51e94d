#include "node/device_holders.h"

#include <dirent.h>
#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <utility>

namespace gangrun::node {
namespace {

// The process's group id, command name and real uid, from /proc/<pid>/stat and status.
struct Process {
  pid_t pgid = 0;
  std::string comm;
  uid_t uid = 0;
};

std::optional<Process> ReadProcess(const std::string& dir) {
  std::ifstream stat_file(dir + "/stat");
  std::string stat;
  if (!std::getline(stat_file, stat)) return std::nullopt;
  // "PID (COMM) STATE PPID PGRP ...": COMM may hold spaces and ')', so the last ')' ends it.
  const size_t open = stat.find('(');
  const size_t close = stat.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open) return std::nullopt;
  Process process;
  process.comm = stat.substr(open + 1, close - open - 1);
  char state = 0;
  long ppid = 0;
  long pgrp = 0;
  if (std::sscanf(stat.c_str() + close + 1, " %c %ld %ld", &state, &ppid, &pgrp) != 3) {
    return std::nullopt;
  }
  process.pgid = static_cast<pid_t>(pgrp);
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0) process.uid = st.st_uid;
  return process;
}

}  // namespace

std::vector<std::string> DeviceFiles(const std::vector<std::string>& patterns) {
  std::vector<std::string> files;
  for (const std::string& pattern : patterns) {
    glob_t found{};
    if (glob(pattern.c_str(), 0, nullptr, &found) == 0) {
      for (size_t i = 0; i < found.gl_pathc; ++i) files.emplace_back(found.gl_pathv[i]);
    }
    globfree(&found);
  }
  return files;
}

std::vector<std::string> DeviceHolders(const std::vector<std::string>& files,
                                       const std::set<pid_t>& ours) {
  std::set<std::string> wanted;
  for (const std::string& file : files) {
    char real[PATH_MAX];
    if (realpath(file.c_str(), real) != nullptr) wanted.insert(real);
  }
  std::vector<std::string> holders;
  if (wanted.empty()) return holders;
  std::unique_ptr<DIR, int (*)(DIR*)> proc(opendir("/proc"), closedir);
  if (!proc) return holders;
  std::map<pid_t, std::string> found;  // by pid, for the order
  const pid_t self = getpid();
  size_t scanned = 0;
  while (const dirent* entry = readdir(proc.get())) {
    char* end = nullptr;
    const long pid = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || pid <= 0 || pid == self) continue;
    if (++scanned > kMaxProcesses) break;
    const std::string dir = "/proc/" + std::string(entry->d_name);
    const std::optional<Process> process = ReadProcess(dir);
    if (!process || ours.count(process->pgid) > 0) continue;
    std::unique_ptr<DIR, int (*)(DIR*)> fds(opendir((dir + "/fd").c_str()), closedir);
    if (!fds) continue;  // gone, or not ours to read
    while (const dirent* fd = readdir(fds.get())) {
      if (fd->d_name[0] == '.') continue;
      // The link's text, never the file it names: a stat could block on a hung file system.
      char target[PATH_MAX];
      const std::string link = dir + "/fd/" + fd->d_name;
      const ssize_t n = readlink(link.c_str(), target, sizeof(target) - 1);
      if (n <= 0) continue;
      auto it = wanted.find(std::string(target, static_cast<size_t>(n)));
      if (it == wanted.end()) continue;
      found[static_cast<pid_t>(pid)] = "pid " + std::to_string(pid) + " (" + process->comm +
                                       ", uid " + std::to_string(process->uid) + ") holds " + *it;
      break;
    }
  }
  for (auto& [pid, line] : found) {
    if (holders.size() == kMaxHolders) break;
    holders.push_back(std::move(line));
  }
  return holders;
}

}  // namespace gangrun::node
