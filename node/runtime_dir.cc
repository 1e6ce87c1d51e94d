#include "node/runtime_dir.h"

#include <stdlib.h>
#include <sys/un.h>

#include <filesystem>

#include "common/files.h"
#include "common/status.h"

namespace gangrun::node {
namespace {

// Room left in a socket path for "/p<slot>" after the directory.
constexpr size_t kSocketNameRoom = 16;

}  // namespace

absl::StatusOr<std::unique_ptr<RuntimeDir>> RuntimeDir::Create() {
  std::string base = "/tmp";
  if (const char* tmp = getenv("TMPDIR"); tmp != nullptr && tmp[0] == '/') {
    const size_t limit =
        sizeof(sockaddr_un::sun_path) - kSocketNameRoom - sizeof("/gangrun-XXXXXX");
    if (std::string(tmp).size() <= limit) base = tmp;
  }
  ASSIGN_OR_RETURN(std::string path, common::MakeTempDir("gangrun-", base));
  return std::unique_ptr<RuntimeDir>(new RuntimeDir(std::move(path)));
}

RuntimeDir::~RuntimeDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

}  // namespace gangrun::node
