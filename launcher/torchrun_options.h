#pragma once
// torchrun's options as its parser (argparse) knows them, and their values: what
// launcher/torchrun.cc maps onto gangrun's options. Internal to the launcher.

#include <CLI/CLI.hpp>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "launcher/command_line.h"
#include "launcher/options.h"

namespace gangrun::launcher::torch {

// torchrun's options: the name of their PET_ variable (torchrun's `dest`), their spellings,
// whether they take a value, and help.
struct TorchOption {
  std::string dest;
  std::string names;  // CLI11's comma-separated spellings
  bool flag;
  std::string help;
};

const std::vector<TorchOption>& TorchOptions();
bool IsTorchOption(const std::string& dest);
// PET_<DEST>, where torchrun reads an option that is not given.
std::string PetName(const std::string& dest);
// gangrun's option `name` in both spellings, as CLI11 wants them ("--a_b,--a-b").
std::string Spellings(const std::string& name);
// Every long and short spelling of torchrun's options and gangrun's (for abbreviations).
std::map<std::string, Spelling> AllSpellings();

absl::Status Invalid(const std::string& source, const std::string& value,
                     const std::string& expected);

// A value, from the command line or PET_<DEST>, with where it came from.
struct Value {
  std::string text;
  std::string source;  // "--nnodes" or "PET_NNODES"
};

class Values {
 public:
  explicit Values(std::map<std::string, Value> values) : values_(std::move(values)) {}
  bool Has(const std::string& dest) const { return values_.count(dest) > 0; }
  std::string Get(const std::string& dest, const std::string& fallback) const {
    auto it = values_.find(dest);
    return it == values_.end() ? fallback : it->second.text;
  }
  std::string Source(const std::string& dest) const {
    auto it = values_.find(dest);
    return it == values_.end() ? "--" + dest : it->second.source;
  }
  absl::Status Bad(const std::string& dest, const std::string& expected) const {
    return Invalid(Source(dest), Get(dest, ""), expected);
  }

 private:
  std::map<std::string, Value> values_;
};

// torchrun's options from their flags, else from PET_<DEST> (a flag's variable, as torchrun's
// check_env reads it: an integer, set when non-zero).
absl::StatusOr<Values> ReadTorchValues(const std::map<std::string, CLI::Option*>& given,
                                       const std::map<std::string, std::string>& texts,
                                       const EnvLookup& env, ParseResult& result);

}  // namespace gangrun::launcher::torch
