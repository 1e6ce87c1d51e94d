#pragma once
// spdlog set-up: one named logger per component, all writing to the stderr console
// (common/console.h: it never blocks the caller).

#include <spdlog/spdlog.h>

#include <memory>
#include <string>

namespace gangrun::common {

// Returns the logger for `component` ("launcher", "node", "scheduler", "process"),
// creating it on first use. Lines look like "[gangrun node] info: ...".
std::shared_ptr<spdlog::logger> Logger(const std::string& component);

// Sets the level of every logger (GANGRUN_LOG_LEVEL: trace, debug, info, warn, error, off).
void SetLogLevel(const std::string& level);

}  // namespace gangrun::common
