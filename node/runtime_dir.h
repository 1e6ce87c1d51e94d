#pragma once
// A node's private directory for what its workers talk to: the progress sockets, the torch
// timer pipe, the Python stack hook and the flight recorder's pipes and dumps. Mode 0700, so
// only this user can reach them; removed with everything in it when the node ends. Where:
//   - under $TMPDIR when the user set it;
//   - otherwise in memory: under $XDG_RUNTIME_DIR (the user's runtime directory, made for
//     sockets and pipes), or /dev/shm when it is a tmpfs this user can write;
//   - otherwise under /tmp.
// A base too long for a socket path is skipped. In memory, a launch creates its dozen
// entries without a journal: a 4-worker launch took 1.4 ms less than on /tmp's ext4
// (issue #24). A dump the flight recorder collects at a hang passes through it (bounded by
// FlightRecorder::kMaxDumpBytes per rank; torch's are a few MiB).

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace gangrun::node {

class RuntimeDir {
 public:
  static absl::StatusOr<std::unique_ptr<RuntimeDir>> Create();
  // Where Create makes it, for these values of $TMPDIR and $XDG_RUNTIME_DIR (null: unset) and
  // this /dev/shm.
  static std::string BaseFor(const char* tmpdir, const char* xdg_runtime_dir,
                             const std::string& shm = "/dev/shm");
  ~RuntimeDir();
  RuntimeDir(const RuntimeDir&) = delete;
  RuntimeDir& operator=(const RuntimeDir&) = delete;

  const std::string& path() const { return path_; }

 private:
  explicit RuntimeDir(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

}  // namespace gangrun::node
