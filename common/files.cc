#include "common/files.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "common/status.h"

namespace gangrun::common {

absl::Status MakeDirs(const std::string& dir, mode_t mode) {
  if (dir.empty()) return absl::OkStatus();
  for (size_t pos = dir.find('/', 1);; pos = dir.find('/', pos + 1)) {
    const std::string part = dir.substr(0, pos);
    if (!part.empty() && mkdir(part.c_str(), mode) != 0 && errno != EEXIST) {
      return ErrnoToStatus(errno, "cannot create directory " + part);
    }
    if (pos == std::string::npos) break;
  }
  struct stat st;
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(dir + " is not a directory");
  }
  return absl::OkStatus();
}

bool WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

absl::StatusOr<int> MemoryFile(const char* name, std::string_view data) {
  const int fd = memfd_create(name, MFD_CLOEXEC);
  if (fd < 0) return ErrnoToStatus(errno, "memfd_create");
  if (!WriteAll(fd, data) || lseek(fd, 0, SEEK_SET) != 0) {
    const int error = errno;
    close(fd);
    return ErrnoToStatus(error, std::string("cannot write ") + name);
  }
  return fd;
}

absl::StatusOr<std::string> ReadDescriptor(int fd, size_t limit, const std::string& what) {
  std::string bytes;
  char buffer[65536];
  for (ssize_t n; (n = read(fd, buffer, sizeof(buffer))) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      close(fd);
      return ErrnoToStatus(error, "cannot read " + what);
    }
    if (bytes.size() + static_cast<size_t>(n) > limit) {
      close(fd);
      return absl::InvalidArgumentError(what + " is larger than " + std::to_string(limit) +
                                        " bytes");
    }
    bytes.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  return bytes;
}

absl::Status WriteFileAtomically(const std::string& path, std::string_view content, mode_t mode) {
  const std::string temporary = path + ".tmp" + std::to_string(getpid());
  unlink(temporary.c_str());  // never write through whatever may be there
  int fd = open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) return ErrnoToStatus(errno, "cannot create " + temporary);
  if (!WriteAll(fd, content)) {
    const int error = errno;
    close(fd);
    unlink(temporary.c_str());
    return ErrnoToStatus(error, "cannot write " + temporary);
  }
  if (close(fd) != 0 || rename(temporary.c_str(), path.c_str()) != 0) {
    const int error = errno;
    unlink(temporary.c_str());
    return ErrnoToStatus(error, "cannot write " + path);
  }
  return absl::OkStatus();
}

std::string TempBase() {
  const char* tmp = std::getenv("TMPDIR");
  return tmp != nullptr && tmp[0] == '/' ? tmp : "/tmp";
}

absl::StatusOr<std::string> MakeTempDir(const std::string& prefix, std::string base) {
  if (base.empty()) base = TempBase();
  std::string pattern = base + "/" + prefix + "XXXXXX";
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  if (mkdtemp(buffer.data()) == nullptr) {
    return ErrnoToStatus(errno, "cannot create a directory in " + base);
  }
  const std::string made(buffer.data());
  // What is there now is what we made: ours, 0700, a directory (not a link put in its place).
  const int fd = open(made.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  struct stat st;
  const bool ours =
      fd >= 0 && fstat(fd, &st) == 0 && st.st_uid == geteuid() && (st.st_mode & 07777) == 0700;
  if (fd >= 0) close(fd);
  if (!ours) return absl::FailedPreconditionError(made + " changed under us right after mkdtemp");
  return made;
}

namespace {

std::string Mode(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof(text), "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

}  // namespace

absl::Status CheckSafeDirectoryPath(const std::string& dir, const std::string& what) {
  char resolved[PATH_MAX];
  if (realpath(dir.c_str(), resolved) == nullptr) {
    return ErrnoToStatus(errno, what + " " + dir);
  }
  const std::string path(resolved);
  const uid_t me = geteuid();
  for (size_t end = 0; end != std::string::npos;) {
    end = path.find('/', end + 1);
    const std::string part = end == std::string::npos ? path : path.substr(0, end);
    const std::string name = part.empty() ? "/" : part;
    struct stat st;
    if (lstat(name.c_str(), &st) != 0) return ErrnoToStatus(errno, what + ": " + name);
    if (!S_ISDIR(st.st_mode))
      return absl::InvalidArgumentError(what + ": " + name + " is not a directory");
    const bool others_write = (st.st_mode & (S_IWGRP | S_IWOTH)) != 0;
    if ((st.st_uid != 0 && st.st_uid != me) || (others_write && !(st.st_mode & S_ISVTX))) {
      return absl::InvalidArgumentError(
          what + " " + dir + " is not safe: " + name + " (owner uid " + std::to_string(st.st_uid) +
          ", mode " + Mode(st.st_mode) +
          ") lets another user rename or replace what is in it; "
          "use a directory that only root and you can write (or a sticky one such as /tmp)");
    }
  }
  return absl::OkStatus();
}

absl::Status CheckLogDirectory(const std::string& dir, const std::string& what) {
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) return ErrnoToStatus(errno, what + " " + dir);
  if (!S_ISDIR(st.st_mode))
    return absl::InvalidArgumentError(what + " " + dir + " is not a directory");
  if ((st.st_mode & S_IWOTH) && !((st.st_mode & S_ISVTX) && st.st_uid == geteuid())) {
    return absl::InvalidArgumentError(
        what + " " + dir + " is writable by other users (owner uid " + std::to_string(st.st_uid) +
        ", mode " + Mode(st.st_mode) +
        "): they could plant or swap its files; use a directory of your own, or chmod o-w it");
  }
  return absl::OkStatus();
}

absl::StatusOr<int> OpenOwnFileForWriting(const std::string& path, bool append) {
  const int fd = open(path.c_str(),
                      O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | (append ? O_APPEND : 0), 0600);
  if (fd < 0) {
    if (errno == ELOOP) {
      return absl::InvalidArgumentError(path + " is a symbolic link: refusing to write through it");
    }
    return ErrnoToStatus(errno, "cannot open " + path);
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() || st.st_nlink != 1) {
    close(fd);
    return absl::InvalidArgumentError(
        path +
        " is not a file of this user's (another user's file, a hard link or not a "
        "regular file): refusing to write to it");
  }
  if (!append && ftruncate(fd, 0) != 0) {
    const int error = errno;
    close(fd);
    return ErrnoToStatus(error, "cannot truncate " + path);
  }
  return fd;
}

}  // namespace gangrun::common
