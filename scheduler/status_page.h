#pragma once
// The status page (GET / on --metrics_port): one HTML document with its style and script
// inline (no external assets: it works offline), which shows what GET /status.json answers and
// fetches it again every two seconds. A job's JSON is {"status": GetStatusResponse, "events":
// its last state changes}; a daemon's is its DaemonStatusResponse ({"agents": ..., "jobs": ...}).

#include <string>

#include "scheduler/scheduler.h"
#include "scheduler/telemetry.h"

namespace gangrun::scheduler {

const std::string& StatusPageHtml();

// A job's /status.json: its status as `gangrun status --json` prints it, and its last state
// changes (newest last).
std::string JobStatusJson(const Scheduler& scheduler, const Telemetry& telemetry);

}  // namespace gangrun::scheduler
