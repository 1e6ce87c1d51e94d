// --join False: the command returns once the workers run, and a detached copy of the
// launcher (its own session, same arguments) keeps supervising them with the same
// guarantees. The copy reports "running" or an early exit code over a pipe.

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "common/env_names.h"
#include "common/files.h"
#include "common/spawn.h"
#include "common/status.h"
#include "launcher/launcher.h"

namespace gangrun::launcher {

absl::StatusOr<std::optional<v1::JobOutcome>> RunDetached(const std::vector<std::string>& argv,
                                                          const Options& options,
                                                          const HostFacts& facts,
                                                          const std::string& self_exe) {
  const std::string dir = facts.log_dir.empty() ? "." : facts.log_dir;
  if (absl::Status made = common::MakeDirs(facts.log_dir, 0700); !made.ok()) {
    return absl::InvalidArgumentError("--log_dir: " + std::string(made.message()));
  }
  const std::string log_path = dir + "/gangrun.log";
  ASSIGN_OR_RETURN(const int log_fd, common::OpenOwnFileForWriting(log_path, /*append=*/true));
  int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return common::ErrnoToStatus(errno, "pipe");

  common::SpawnOptions spawn;
  spawn.exec_path = self_exe;
  spawn.argv = argv;  // argv[0] keeps the personality
  spawn.env = common::CurrentEnvironment();
  spawn.env.push_back(std::string(env::kReadyFd) + "=3");
  spawn.fds = {{0, null_fd}, {1, log_fd}, {2, log_fd}, {3, pipe_fds[1]}};
  spawn.new_session = true;
  auto pid = common::Spawn(spawn);
  close(pipe_fds[1]);
  close(log_fd);
  close(null_fd);
  if (!pid.ok()) {
    close(pipe_fds[0]);
    return pid.status();
  }
  // "R" once its workers run, or "O" and the outcome of a job that ended before; nothing
  // (end of file) if the supervisor itself ended first.
  std::string said;
  char buffer[4096];
  ssize_t n;
  while ((n = read(pipe_fds[0], buffer, sizeof(buffer))) != 0) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    said.append(buffer, static_cast<size_t>(n));
  }
  close(pipe_fds[0]);
  if (said == "R") {
    std::printf("gangrun: %d worker(s) running, supervised by pid %d (its log: %s)\n",
                options.local_worker_num, *pid, log_path.c_str());
    std::fflush(stdout);
    return std::optional<v1::JobOutcome>();
  }
  int status = 0;
  waitpid(*pid, &status, 0);  // it is finishing, or has ended: reap it
  v1::JobOutcome outcome;
  if (said.empty() || said[0] != 'O' || !outcome.ParseFromString(said.substr(1))) {
    return absl::InternalError("the detached supervisor ended before its workers ran; see " +
                               log_path);
  }
  std::fprintf(stderr, "gangrun: the job ended before all workers ran (see %s)\n",
               log_path.c_str());
  return std::optional<v1::JobOutcome>(outcome);
}

}  // namespace gangrun::launcher
