// A worker for the integration tests. Behaviour comes from flags; "rank-specific" flags act
// only when $RANK matches. Reports to the FIFO named by $GANGRUN_TEST_READY (if set) one
// line "ready <rank> <pid> <grandchild pid or 0>", so tests wait for events, not time.
//
//   --lines N          print N numbered lines (alternating stdout and stderr) first
//   --flood BYTES      then write BYTES of numbered 100-byte lines to stdout as fast as it can
//   --long-line BYTES  then write one line of BYTES bytes (its newline last)
//   --env FILE         write the environment to FILE.<rank>
//   --affinity         print "cpus <Cpus_allowed_list>"
//   --grandchild       fork a grandchild that calls setsid() and ignores SIGTERM, then hangs
//   --ignore-term      ignore SIGTERM
//   --usr1             on SIGUSR1 write "usr1 <rank>" to the FIFO
//   --fail-rank R      rank R fails (see --exit/--signal/--abort); other ranks hang
//   --exit N           exit with N (all ranks unless --fail-rank)
//   --signal S         kill itself with signal S
//   --abort            call abort()
//   --hang             never exit on its own
//   --run-ms MS        work (sleep) for MS milliseconds before exiting 0
//   --only-generation G  fail (--exit/--signal/--abort) only in generation G
//   --wait-file PATH   after "ready", wait until PATH exists, then exit 0 (the test says when)
//   --then-exit N      with --wait-file: rank 0 then exits N instead
//   --say TEXT         print TEXT on stderr before acting (failing, as its last line)
//   --say-to FILE      append --say's line to FILE instead (as a kernel would log it)

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

extern char** environ;

namespace {

int rank = -1;

void Report(const std::string& line) {
  const char* fifo = std::getenv("GANGRUN_TEST_READY");
  if (fifo == nullptr) return;
  int fd = open(fifo, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return;
  std::string text = line + "\n";
  (void)!write(fd, text.data(), text.size());
  close(fd);
}

void OnUsr1(int) {
  char text[64];
  int n = std::snprintf(text, sizeof(text), "usr1 %d\n", rank);
  const char* fifo = std::getenv("GANGRUN_TEST_READY");
  if (fifo == nullptr) return;
  int fd = open(fifo, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return;
  (void)!write(fd, text, static_cast<size_t>(n));
  close(fd);
}

// Whole 100-byte lines, written with large write(2) calls.
void Flood(long long bytes) {
  std::string block;
  for (long long written = 0; written < bytes;) {
    block.clear();
    while (block.size() < (1 << 16) && written + static_cast<long long>(block.size()) < bytes) {
      char line[101];
      std::snprintf(line, sizeof(line), "flood %-93lld\n", written + block.size());
      block.append(line, 100);
    }
    if (write(1, block.data(), block.size()) <= 0) return;
    written += static_cast<long long>(block.size());
  }
}

void LongLine(long long bytes) {
  if (bytes <= 0) return;
  std::string chunk(1 << 16, 'x');
  for (long long left = bytes; left > 0; left -= static_cast<long long>(chunk.size())) {
    size_t n = static_cast<size_t>(std::min<long long>(left, chunk.size()));
    if (write(1, chunk.data(), n) <= 0) return;
  }
  (void)!write(1, "\n", 1);
}

void HangForever() {
  while (true) pause();
}

}  // namespace

int main(int argc, char** argv) {
  const char* rank_env = std::getenv("RANK");
  rank = rank_env ? std::atoi(rank_env) : -1;
  int lines = 0, fail_rank = -1, exit_code = -1, sig = 0, only_generation = -1;
  std::string wait_file;
  int then_exit = -1;  // rank 0's exit code once the wait file is there
  long long flood = 0, long_line = 0;
  bool grandchild = false, ignore_term = false, usr1 = false, do_abort = false, hang = false;
  long long run_ms = 0;
  bool affinity = false;
  std::string env_file;
  std::string say;     // a line to print on stderr before acting
  std::string say_to;  // the file to append it to instead
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (a == "--lines")
      lines = std::atoi(next().c_str());
    else if (a == "--flood")
      flood = std::atoll(next().c_str());
    else if (a == "--long-line")
      long_line = std::atoll(next().c_str());
    else if (a == "--env")
      env_file = next();
    else if (a == "--affinity")
      affinity = true;
    else if (a == "--grandchild")
      grandchild = true;
    else if (a == "--ignore-term")
      ignore_term = true;
    else if (a == "--usr1")
      usr1 = true;
    else if (a == "--fail-rank")
      fail_rank = std::atoi(next().c_str());
    else if (a == "--exit")
      exit_code = std::atoi(next().c_str());
    else if (a == "--signal")
      sig = std::atoi(next().c_str());
    else if (a == "--abort")
      do_abort = true;
    else if (a == "--hang")
      hang = true;
    else if (a == "--run-ms")
      run_ms = std::atoll(next().c_str());
    else if (a == "--then-exit")
      then_exit = std::atoi(next().c_str());
    else if (a == "--wait-file")
      wait_file = next();
    else if (a == "--only-generation")
      only_generation = std::atoi(next().c_str());
    else if (a == "--say")
      say = next();
    else if (a == "--say-to")
      say_to = next();
  }
  if (ignore_term) signal(SIGTERM, SIG_IGN);
  if (usr1) signal(SIGUSR1, OnUsr1);
  for (int i = 0; i < lines; ++i) {
    std::fprintf(i % 2 ? stderr : stdout, "line %d of rank %d\n", i, rank);
  }
  std::fflush(stdout);
  Flood(flood);
  LongLine(long_line);
  if (!env_file.empty()) {
    std::ofstream out(env_file + "." + std::to_string(rank));
    for (char** e = environ; *e != nullptr; ++e) out << *e << "\n";
  }
  if (affinity) {
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line)) {
      if (line.rfind("Cpus_allowed_list:", 0) == 0) {
        std::printf("cpus %s\n", line.substr(line.find_first_not_of(" \t", 18)).c_str());
      }
    }
    std::fflush(stdout);
  }
  pid_t grandchild_pid = 0;
  if (grandchild) {
    int pipe_fds[2];
    if (pipe(pipe_fds) != 0) return 99;
    grandchild_pid = fork();
    if (grandchild_pid == 0) {
      setsid();
      signal(SIGTERM, SIG_IGN);
      close(pipe_fds[0]);
      close(pipe_fds[1]);  // tells the parent we are in our own session
      HangForever();
    }
    close(pipe_fds[1]);
    char c;
    (void)!read(pipe_fds[0], &c, 1);
    close(pipe_fds[0]);
  }
  Report("ready " + std::to_string(rank) + " " + std::to_string(getpid()) + " " +
         std::to_string(grandchild_pid));
  const char* generation = std::getenv("GANGRUN_GENERATION");
  const bool acts =
      (fail_rank < 0 || fail_rank == rank) &&
      (only_generation < 0 || (generation != nullptr && std::atoi(generation) == only_generation));
  if (acts && !say.empty() && say_to.empty()) std::fprintf(stderr, "%s\n", say.c_str());
  if (acts && !say.empty() && !say_to.empty()) std::ofstream(say_to, std::ios::app) << say << "\n";
  if (acts && do_abort) abort();
  if (acts && sig > 0) {
    signal(sig, SIG_DFL);
    kill(getpid(), sig);
  }
  if (acts && exit_code >= 0) return exit_code;
  // Bystanders of a failing rank hang (so they must be stopped) in the failing generation.
  const bool failing_generation =
      only_generation < 0 || (generation != nullptr && std::atoi(generation) == only_generation);
  if (hang || (fail_rank >= 0 && failing_generation)) HangForever();
  while (!wait_file.empty() && access(wait_file.c_str(), F_OK) != 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // the worker's own pace
  }
  if (run_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(run_ms));
  if (then_exit >= 0 && rank == 0) return then_exit;
  return 0;
}
