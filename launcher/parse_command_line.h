#pragma once
// The launcher's command line, in each personality: msrun's and gangrun's through the option
// table (launcher/option_table.h), torchrun's through its own (launcher/torchrun.h). Apart
// from launcher/options.h, so that the folder's ground needs nothing above it.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "launcher/options.h"

namespace gangrun::launcher {

// Parses argv[1..] (argv[0] is not read). Errors are InvalidArgument with one line that
// names the option, e.g. "invalid value 'x' for --worker_num: expected an integer".
absl::StatusOr<ParseResult> ParseCommandLine(Personality personality,
                                             const std::vector<std::string>& args,
                                             const EnvLookup& env);

}  // namespace gangrun::launcher
