#pragma once
// The launcher's options, one row each: its name, its help (with its range), how its value is
// read into Options and how it is written back out of them. Everything that spells a launcher
// option uses this table: the gangrun/msrun parser and torchrun's (for gangrun's own options),
// the launch spec that carries a submitted job (launcher/launch_spec.h), the command line an
// agent starts a launcher with, and the round-trip test. Adding an option is one row (and its
// sample value in that test).

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "launcher/options.h"

namespace gangrun::launcher {

struct OptionRow {
  std::string name;  // without "--"
  std::string help;  // with its range
  // Reads a value into Options; InvalidArgument saying what was expected.
  std::function<absl::Status(Options&, const std::string&)> set;
  // The value as `set` takes it back (format(o) read into o' gives o'.x == o.x).
  std::function<std::string(const Options&)> format;
  // Carried in a launch spec; the token is not (it never travels: --token_file does).
  bool travels = true;
};

// msrun's options (the same names, defaults and ranges).
const std::vector<OptionRow>& MsrunOptionRows();
// gangrun's own (every personality accepts them).
const std::vector<OptionRow>& GangrunOptionRows();
// Both, msrun's first.
const std::vector<OptionRow>& OptionRows();
// The row named `name`, or null.
const OptionRow* FindOptionRow(const std::string& name);

}  // namespace gangrun::launcher
