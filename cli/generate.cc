// gangrun generate man gangrun|msrun|torchrun, gangrun generate completion: the man pages and
// the bash completion, written from the option tables themselves (launcher/option_table.h,
// launcher/torchrun_options.h) so that they cannot drift from what the parsers accept. The
// build runs them for the Debian package (cpack -G DEB).

#include <cstdio>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "cli/command.h"
#include "common/version.h"
#include "launcher/option_table.h"
#include "launcher/torchrun_options.h"

namespace gangrun::cli {
namespace {

constexpr char kGenerateUsage[] = "usage: gangrun generate man gangrun|msrun|torchrun | completion";

const char* const kCommands[] = {"status",    "stop",  "scale",  "health", "kv",  "progress",
                                 "scheduler", "agent", "submit", "stacks", "logs"};

// roff: a leading dot or quote would be a request; backslashes and dashes are escaped.
std::string Roff(const std::string& text) {
  std::string out = absl::StrReplaceAll(text, {{"\\", "\\e"}, {"-", "\\-"}});
  if (!out.empty() && (out[0] == '.' || out[0] == '\'')) out = "\\&" + out;
  return out;
}

struct ManOption {
  std::string spellings;  // "--nproc-per-node, --nproc_per_node"
  std::string help;
  bool takes_value = true;
};

std::vector<ManOption> OptionsOf(const std::string& program) {
  std::vector<ManOption> out;
  if (program == "torchrun") {
    for (const auto& option : launcher::torch::TorchOptions()) {
      out.push_back({absl::StrReplaceAll(option.names, {{",", ", "}}), option.help, !option.flag});
    }
    for (const auto& row : launcher::GangrunOptionRows()) {
      if (launcher::torch::IsTorchOption(row.name)) continue;
      out.push_back(
          {absl::StrReplaceAll(launcher::torch::Spellings(row.name), {{",", ", "}}), row.help});
    }
    return out;
  }
  for (const auto& row : launcher::OptionRows()) out.push_back({"--" + row.name, row.help});
  return out;
}

std::string ManPage(const std::string& program) {
  const std::string upper = program == "gangrun" ? "GANGRUN"
                            : program == "msrun" ? "MSRUN"
                                                 : "TORCHRUN";
  const std::string what = program == "msrun"      ? "MindSpore's msrun, run by gangrun"
                           : program == "torchrun" ? "PyTorch's torchrun, run by gangrun"
                                                   : "launch ranked worker processes across hosts";
  std::string out = ".TH " + upper + " 1 \"\" \"" + Roff(common::VersionLine("gangrun")) +
                    "\" \"User Commands\"\n.SH NAME\n" + program + " \\- " + Roff(what) +
                    "\n.SH SYNOPSIS\n.B " + program +
                    "\n[\\fIoptions\\fR] \\fItask_script\\fR "
                    "[\\fIargs\\fR...]\n";
  if (program == "gangrun") {
    out += ".br\n.B gangrun\n\\fIcommand\\fR [\\fIoptions\\fR] (" +
           Roff(absl::StrJoin(kCommands, ", ")) + "; each with \\-\\-help)\n";
  }
  out +=
      ".SH DESCRIPTION\nStarts the task's ranked processes on this host and joins them with "
      "the other hosts' into one job (README: \"Use\"). Every option can also be set in "
      "the environment: " +
      std::string(program == "torchrun" ? "PET_<OPTION> for torchrun's, " : "") +
      "GANGRUN_<OPTION> for gangrun's.\n.SH OPTIONS\n";
  for (const auto& option : OptionsOf(program)) {
    out += ".TP\n.B " + Roff(option.spellings) + (option.takes_value ? " \\fIVALUE\\fR" : "") +
           "\n" + Roff(option.help) + "\n";
  }
  out +=
      ".TP\n.B \\-\\-version\nprint the version and exit\n.TP\n.B \\-h, \\-\\-help\nprint "
      "the options and exit\n.SH EXIT STATUS\n0 when every worker exited 0; the failing "
      "worker's code or 128+signal; 2 invalid options; 3 the cluster did not form; 4 a node "
      "was lost; 5 the job hung; 6 this node was excluded; 7 the time limit passed.\n"
      ".SH SEE ALSO\n/usr/share/doc/gangrun/README.md\n";
  return out;
}

std::string Completion() {
  std::set<std::string> gangrun_words(std::begin(kCommands), std::end(kCommands));
  for (const auto& row : launcher::OptionRows()) gangrun_words.insert("--" + row.name);
  std::set<std::string> torch_words;
  for (const auto& [spelling, what] : launcher::torch::AllSpellings()) {
    if (spelling.rfind("--", 0) == 0) torch_words.insert(spelling);
  }
  gangrun_words.insert({"--version", "--help"});
  return "# bash completion for gangrun, msrun and torchrun (gangrun generate completion).\n"
         "_gangrun_words() {\n  case \"$1\" in\n    torchrun) echo '" +
         absl::StrJoin(torch_words, " ") + "' ;;\n    *) echo '" +
         absl::StrJoin(gangrun_words, " ") +
         "' ;;\n  esac\n}\n"
         "_gangrun() {\n  local cur=${COMP_WORDS[COMP_CWORD]}\n"
         "  if [[ $cur == -* || $COMP_CWORD -eq 1 ]]; then\n"
         "    COMPREPLY=($(compgen -W \"$(_gangrun_words \"${COMP_WORDS[0]##*/}\")\" -- "
         "\"$cur\"))\n"
         "  else\n    COMPREPLY=($(compgen -f -- \"$cur\"))\n  fi\n}\n"
         "complete -F _gangrun gangrun msrun torchrun\n";
}

}  // namespace

CommandResult RunGenerate(const CommandArgs& command) {
  const auto& args = command.args;
  if (args.size() == 2 && args[0] == "man" &&
      (args[1] == "gangrun" || args[1] == "msrun" || args[1] == "torchrun")) {
    std::fputs(ManPage(args[1]).c_str(), stdout);
    return absl::OkStatus();
  }
  if (args.size() == 1 && args[0] == "completion") {
    std::fputs(Completion().c_str(), stdout);
    return absl::OkStatus();
  }
  return UsageError(kGenerateUsage, args.empty() ? "what to generate?" : "cannot generate that");
}

}  // namespace gangrun::cli
