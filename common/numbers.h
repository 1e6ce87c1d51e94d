#pragma once
// The one integer parser for what users, the environment and peers write: a whole decimal
// number within a range, or nothing.

#include <cstdint>
#include <optional>

#include "absl/strings/string_view.h"

namespace gangrun::common {

std::optional<int64_t> ParseInt(absl::string_view text, int64_t min, int64_t max);

}  // namespace gangrun::common
