#pragma once
// A node's private directory for what its workers talk to: the progress sockets, the torch
// timer pipe and the Python stack hook. Mode 0700 under $TMPDIR (or /tmp when $TMPDIR is too
// long for a socket path), so only this user can reach them; removed with everything in it
// when the node ends.

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace gangrun::node {

class RuntimeDir {
 public:
  static absl::StatusOr<std::unique_ptr<RuntimeDir>> Create();
  ~RuntimeDir();
  RuntimeDir(const RuntimeDir&) = delete;
  RuntimeDir& operator=(const RuntimeDir&) = delete;

  const std::string& path() const { return path_; }

 private:
  explicit RuntimeDir(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

}  // namespace gangrun::node
