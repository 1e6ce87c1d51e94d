#pragma once
// An environment as a list of KEY=VALUE strings (common::Program::env) and the few things done
// to it per worker, without a string built for each comparison: a 32-worker launch made ~5,000
// of them (issue #24).

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace gangrun::common {

// Whether `entry` (KEY=VALUE) sets `name`.
inline bool SetsVariable(absl::string_view entry, absl::string_view name) {
  return entry.size() > name.size() && entry[name.size()] == '=' &&
         entry.substr(0, name.size()) == name;
}

// The value the last entry for `name` gives it, if any.
inline std::optional<absl::string_view> LastValueOf(const std::vector<std::string>& env,
                                                    absl::string_view name) {
  for (auto it = env.rbegin(); it != env.rend(); ++it) {
    if (SetsVariable(*it, name)) return absl::string_view(*it).substr(name.size() + 1);
  }
  return std::nullopt;
}

inline void UnsetVariable(std::vector<std::string>& env, absl::string_view name) {
  env.erase(std::remove_if(env.begin(), env.end(),
                           [name](const std::string& entry) { return SetsVariable(entry, name); }),
            env.end());
}

// `name` set once, to `value`, as the last entry.
inline void SetVariable(std::vector<std::string>& env, absl::string_view name,
                        absl::string_view value) {
  UnsetVariable(env, name);
  env.push_back(absl::StrCat(name, "=", value));
}

}  // namespace gangrun::common
