#include "node/error_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <nlohmann/json.hpp>
#include <vector>

#include "absl/strings/str_split.h"
#include "common/utf8.h"

namespace gangrun::node {
namespace {

// Text for the message (common/utf8.h): a cut may split a character, and a file that is not
// torch's may hold anything.
std::string Shorten(std::string text, size_t limit) {
  if (text.size() > limit) text = text.substr(0, limit) + "...";
  return common::ValidUtf8(text);
}

std::string StringAt(const nlohmann::json& json, const char* key) {
  auto it = json.find(key);
  return it != json.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

v1::WorkerError ParseWorkerError(const std::string& text) {
  v1::WorkerError error;
  auto json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object()) {
    error.set_message(Shorten("(not torch's error file format) " + text, kMaxErrorMessageBytes));
    return error;
  }
  auto message = json.find("message");
  std::string callstack;
  if (message != json.end() && message->is_object()) {
    error.set_message(Shorten(StringAt(*message, "message"), kMaxErrorMessageBytes));
    if (auto extra = message->find("extraInfo"); extra != message->end() && extra->is_object()) {
      callstack = StringAt(*extra, "py_callstack");
      error.set_timestamp(Shorten(StringAt(*extra, "timestamp"), 32));
    }
  } else if (message != json.end() && message->is_string()) {
    error.set_message(Shorten(message->get<std::string>(), kMaxErrorMessageBytes));
  }
  std::vector<std::string> lines = absl::StrSplit(callstack, '\n', absl::SkipWhitespace());
  const size_t first = lines.size() > kMaxTracebackLines ? lines.size() - kMaxTracebackLines : 0;
  for (size_t i = first; i < lines.size(); ++i) {
    error.add_traceback(Shorten(lines[i], kMaxTracebackLineBytes));
  }
  return error;
}

std::optional<v1::WorkerError> ReadWorkerError(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
  if (fd < 0) return std::nullopt;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0) {
    close(fd);
    return std::nullopt;
  }
  if (static_cast<size_t>(st.st_size) > kMaxErrorFileBytes) {
    close(fd);
    v1::WorkerError error;
    error.set_message("its error file " + path + " is larger than 1 MiB; not read");
    return error;
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < text.size()) {
    ssize_t n = read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  close(fd);
  text.resize(got);
  return ParseWorkerError(text);
}

}  // namespace gangrun::node
