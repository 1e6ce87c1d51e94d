#pragma once
// Daemon mode (PRODUCT.md section 1: gangrun as a service):
//   gangrun scheduler --listen ADDR:PORT   the long-lived scheduler (scheduler/daemon.h)
//   gangrun agent --master ADDR:PORT       a long-lived per-host agent (worker/agent.h)
//   gangrun submit --master ADDR:PORT ...  runs a job on the agents and returns its outcome
// Each reads its options from GANGRUN_* variables too (flags win), tells systemd when it is
// ready (Type=notify) and pings its watchdog.

#include <string>
#include <vector>

#include "launcher/options.h"

namespace gangrun::launcher {

int RunSchedulerCommand(const std::vector<std::string>& args, const EnvLookup& env);
int RunAgentCommand(const std::vector<std::string>& args, const EnvLookup& env,
                    const std::string& self_exe);
int RunSubmitCommand(const std::vector<std::string>& args, const EnvLookup& env);

}  // namespace gangrun::launcher
