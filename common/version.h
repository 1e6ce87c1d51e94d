#pragma once
// What `--version` prints: the version of CMake's project(), and `git describe` when the build
// was configured from a checkout.

#include <string>
#include <string_view>

namespace gangrun::common {

// "gangrun 0.1.0" or "gangrun 0.1.0 (v0.1.0-42-gabc1234)"; `program` names who answers
// ("msrun", "gangrun status").
std::string VersionLine(std::string_view program);

}  // namespace gangrun::common
