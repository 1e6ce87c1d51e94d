#pragma once
// spdlog set-up: one named logger per component, all writing to stderr.

#include <spdlog/spdlog.h>

#include <memory>
#include <string>

namespace gangrun::common {

// Returns the logger for `component` ("launcher", "node", "scheduler", "process"),
// creating it on first use. Lines look like "[gangrun node] info: ...".
std::shared_ptr<spdlog::logger> Logger(const std::string& component);

// Sets the level of every logger (GANGRUN_LOG_LEVEL: trace, debug, info, warn, error, off).
void SetLogLevel(const std::string& level);

// Writes all of `text` to `fd` (console output that must not be cut short), retrying on
// EINTR and short writes; gives up silently when the descriptor is gone.
void WriteAll(int fd, const std::string& text);

}  // namespace gangrun::common
