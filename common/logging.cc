#include "common/logging.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <unistd.h>

#include <cerrno>

namespace gangrun::common {

std::shared_ptr<spdlog::logger> Logger(const std::string& component) {
  if (auto existing = spdlog::get(component)) return existing;
  static auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  auto logger = std::make_shared<spdlog::logger>(component, sink);
  logger->set_pattern("[gangrun %n] %l: %v");
  logger->set_level(spdlog::get_level());
  logger->flush_on(spdlog::level::trace);
  spdlog::register_logger(logger);
  return logger;
}

void SetLogLevel(const std::string& level) {
  auto parsed = spdlog::level::from_str(level);
  spdlog::set_level(parsed);
  spdlog::apply_all([parsed](const std::shared_ptr<spdlog::logger>& l) { l->set_level(parsed); });
}

void WriteAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

}  // namespace gangrun::common
