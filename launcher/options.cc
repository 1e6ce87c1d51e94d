// The options' own helpers (launcher/options.h): this file needs nothing of the folder but
// its ground.

#include "launcher/options.h"

#include <cstdlib>

#include "absl/strings/escaping.h"

namespace gangrun::launcher {

std::string QuoteValue(const std::string& value) {
  constexpr size_t kShown = 200;
  std::string shown = absl::CHexEscape(value.substr(0, kShown));
  if (value.size() > kShown) shown += "...";
  return shown;
}

Personality PersonalityFromArgv0(const std::string& argv0) {
  size_t slash = argv0.rfind('/');
  std::string base = slash == std::string::npos ? argv0 : argv0.substr(slash + 1);
  if (base == "msrun") return Personality::kMsrun;
  if (base == "torchrun") return Personality::kTorchrun;
  return Personality::kGangrun;
}

std::string PersonalityName(Personality personality) {
  switch (personality) {
    case Personality::kMsrun:
      return "msrun";
    case Personality::kTorchrun:
      return "torchrun";
    case Personality::kGangrun:
      break;
  }
  return "gangrun";
}

EnvLookup ProcessEnv() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

}  // namespace gangrun::launcher
