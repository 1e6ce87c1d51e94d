// launch-floor N [PROGRAM]: the floor of a launch — posix_spawn N copies of PROGRAM
// (/bin/true) and wait for them all. No coordination, no logs, no supervision: what a
// launcher cannot beat (bench/launch_overhead.py reports gangrun's time against it).
#include <spawn.h>
#include <sys/wait.h>

#include <cstdlib>
#include <vector>

extern char** environ;

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 4;
  char* program = const_cast<char*>(argc > 2 ? argv[2] : "/bin/true");
  char* child_argv[] = {program, nullptr};
  std::vector<pid_t> pids(static_cast<size_t>(n > 0 ? n : 0));
  for (pid_t& pid : pids) {
    if (posix_spawn(&pid, program, nullptr, nullptr, child_argv, environ) != 0) return 1;
  }
  int failed = 0;
  for (pid_t pid : pids) {
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      ++failed;
    }
  }
  return failed == 0 ? 0 : 1;
}
