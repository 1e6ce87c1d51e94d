#include "common/logging.h"

#include <spdlog/sinks/base_sink.h>

#include <mutex>

#include "common/console.h"

namespace gangrun::common {
namespace {

// spdlog lines go to the process's stderr console, which never blocks (common/console.h).
class ConsoleSink : public spdlog::sinks::base_sink<std::mutex> {
 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t formatted;
    formatter_->format(msg, formatted);
    Stderr().Write(std::string_view(formatted.data(), formatted.size()));
  }
  void flush_() override {}
};

}  // namespace

std::shared_ptr<spdlog::logger> Logger(const std::string& component) {
  if (auto existing = spdlog::get(component)) return existing;
  static auto sink = std::make_shared<ConsoleSink>();
  auto logger = std::make_shared<spdlog::logger>(component, sink);
  logger->set_pattern("[gangrun %n] %l: %v");
  logger->set_level(spdlog::get_level());
  spdlog::register_logger(logger);
  return logger;
}

void SetLogLevel(const std::string& level) {
  auto parsed = spdlog::level::from_str(level);
  spdlog::set_level(parsed);
  spdlog::apply_all([parsed](const std::shared_ptr<spdlog::logger>& l) { l->set_level(parsed); });
}

}  // namespace gangrun::common
