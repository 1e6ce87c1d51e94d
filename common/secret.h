#pragma once
// Comparing secrets (tokens) without telling an attacker, through timing, how much of a guess
// was right.

#include <string_view>

namespace gangrun::common {

// True when `a` equals `b`; the time taken does not depend on where they differ.
bool SecretsEqual(std::string_view a, std::string_view b);

}  // namespace gangrun::common
