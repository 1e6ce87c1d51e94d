#include "common/numbers.h"

#include "absl/strings/numbers.h"

namespace gangrun::common {

std::optional<int64_t> ParseInt(absl::string_view text, int64_t min, int64_t max) {
  int64_t value;
  if (!absl::SimpleAtoi(text, &value) || value < min || value > max) return std::nullopt;
  return value;
}

}  // namespace gangrun::common
