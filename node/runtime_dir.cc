#include "node/runtime_dir.h"

#include <linux/magic.h>
#include <stdlib.h>
#include <sys/statfs.h>
#include <sys/un.h>
#include <unistd.h>

#include <filesystem>
#include <string_view>

#include "common/files.h"
#include "common/status.h"

namespace gangrun::node {
namespace {

// Room left in a socket path for "/p<slot>" after the directory.
constexpr size_t kSocketNameRoom = 16;

// An absolute directory short enough for "<base>/gangrun-XXXXXX/p<slot>".
bool Usable(const char* base) {
  if (base == nullptr || base[0] != '/') return false;
  const size_t limit = sizeof(sockaddr_un::sun_path) - kSocketNameRoom - sizeof("/gangrun-XXXXXX");
  return std::string_view(base).size() <= limit;
}

// A directory this user may create entries in.
bool Writable(const char* dir) { return access(dir, W_OK | X_OK) == 0; }

bool Tmpfs(const char* dir) {
  struct statfs fs;
  return statfs(dir, &fs) == 0 && fs.f_type == TMPFS_MAGIC;
}

}  // namespace

std::string RuntimeDir::BaseFor(const char* tmpdir, const char* xdg_runtime_dir,
                                const std::string& shm) {
  if (Usable(tmpdir)) return tmpdir;
  if (Usable(xdg_runtime_dir) && Writable(xdg_runtime_dir)) return xdg_runtime_dir;
  if (Usable(shm.c_str()) && Tmpfs(shm.c_str()) && Writable(shm.c_str())) return shm;
  return "/tmp";
}

absl::StatusOr<std::unique_ptr<RuntimeDir>> RuntimeDir::Create() {
  const std::string base = BaseFor(getenv("TMPDIR"), getenv("XDG_RUNTIME_DIR"));
  ASSIGN_OR_RETURN(std::string path, common::MakeTempDir("gangrun-", base));
  return std::unique_ptr<RuntimeDir>(new RuntimeDir(std::move(path)));
}

RuntimeDir::~RuntimeDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

}  // namespace gangrun::node
