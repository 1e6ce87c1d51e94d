// gangrun generate man|completion gangrun|msrun|torchrun: the man pages and the bash
// completion, written from the option tables themselves (launcher/option_table.h,
// launcher/torchrun_options.h) so that they cannot drift from what the parsers accept. The
// build runs them for the Debian package (cpack -G DEB), which installs the msrun and torchrun
// pages as gangrun-msrun(1) and gangrun-torchrun(1): `man torchrun` stays PyTorch's. And
// gangrun generate token: a fresh shared secret (the package's postinst writes one); gangrun
// generate page-secret: what the metrics and status pages of a job with a token ask for.

#include <cstdio>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "cli/client.h"
#include "cli/command.h"
#include "common/version.h"
#include "launcher/option_table.h"
#include "launcher/torchrun_options.h"
#include "rpc/session_auth.h"

namespace gangrun::cli {
namespace {

constexpr char kGenerate[] = "generate";

const char* const kCommands[] = {"status",   "stop",      "scale",  "health", "kv",
                                 "progress", "scheduler", "agent",  "submit", "stacks",
                                 "logs",     "drain",     "undrain"};

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
  // The page's own name: gangrun-msrun and gangrun-torchrun, never the other projects'.
  const std::string name = program == "gangrun" ? program : "gangrun-" + program;
  const std::string upper = absl::AsciiStrToUpper(name);
  const std::string what = program == "msrun"      ? "MindSpore's msrun, run by gangrun"
                           : program == "torchrun" ? "PyTorch's torchrun, run by gangrun"
                                                   : "launch ranked worker processes across hosts";
  std::string out = ".TH " + upper + " 1 \"\" \"" + Roff(common::VersionLine("gangrun")) +
                    "\" \"User Commands\"\n.SH NAME\n" + Roff(name) + " \\- " + Roff(what) +
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

// The words a launch completes: gangrun's and msrun's options, or torchrun's spellings.
std::string LaunchWords(const std::string& program) {
  std::set<std::string> words;
  if (program == "torchrun") {
    for (const auto& [spelling, what] : launcher::torch::AllSpellings()) {
      if (spelling.rfind("--", 0) == 0) words.insert(spelling);
    }
  } else {
    for (const auto& row : launcher::OptionRows()) words.insert("--" + row.name);
  }
  words.insert({"--version", "--help"});
  return absl::StrJoin(words, " ");
}

// One file per program, as bash-completion loads them lazily by the command's name
// (/usr/share/bash-completion/completions/<program>). gangrun completes its commands, a
// launch's options, and each command's own options, read from that command's --help on
// first use (cached for the shell's life), so they cannot drift either. msrun and torchrun
// complete only when the command found on PATH is gangrun's: PyTorch's torchrun keeps bash's
// default completion.
std::string Completion(const std::string& program) {
  std::string out =
      "# bash completion for " + program + " (gangrun generate completion " + program + ").\n";
  if (program == "gangrun") {
    out += "_gangrun_commands='" + absl::StrJoin(kCommands, " ") + " generate'\n";
  }
  out += "_" + program + "_launch_words='" + LaunchWords(program) + "'\n";
  if (program == "gangrun") {
    out += R"(declare -gA _gangrun_command_words
_gangrun() {
  local cur=${COMP_WORDS[COMP_CWORD]} command=${COMP_WORDS[1]}
  if ((COMP_CWORD == 1)); then
    COMPREPLY=($(compgen -W "$_gangrun_commands $_gangrun_launch_words" -- "$cur"))
    return
  fi
  case " $_gangrun_commands " in
    *" $command "*)
      if [[ $command == generate && $COMP_CWORD -eq 2 ]]; then
        COMPREPLY=($(compgen -W "man completion token page-secret" -- "$cur"))
      elif [[ $command == generate && $COMP_CWORD -eq 3 ]]; then
        COMPREPLY=($(compgen -W "gangrun msrun torchrun" -- "$cur"))
      elif [[ $command == kv && $COMP_CWORD -eq 2 ]]; then
        COMPREPLY=($(compgen -W "get put wait add del" -- "$cur"))
      elif [[ $cur == -* ]]; then
        if [[ -z ${_gangrun_command_words[$command]+set} ]]; then
          _gangrun_command_words[$command]=$("${COMP_WORDS[0]}" "$command" --help 2>/dev/null |
            grep -o -- '--[A-Za-z0-9_-]*' | sort -u | tr '\n' ' ')
        fi
        COMPREPLY=($(compgen -W "${_gangrun_command_words[$command]}" -- "$cur"))
      else
        COMPREPLY=($(compgen -f -- "$cur"))
      fi
      return ;;
  esac
  if [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W "$_gangrun_launch_words" -- "$cur"))
  else
    COMPREPLY=($(compgen -f -- "$cur"))
  fi
}
complete -F _gangrun gangrun
)";
    return out;
  }
  out += "_" + program + "() {\n" +
         R"(  local cur=${COMP_WORDS[COMP_CWORD]} path
  path=$(type -P "${COMP_WORDS[0]}") || path=
  if [[ -z $path || $(readlink -f "$path") != */gangrun ]]; then
    compopt -o default 2>/dev/null
    COMPREPLY=()
    return
  fi
  if [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W "$_)" +
         program + R"(_launch_words" -- "$cur"))
  else
    COMPREPLY=($(compgen -f -- "$cur"))
  fi
}
complete -F _)" +
         program + " " + program + "\n";
  return out;
}

}  // namespace

CommandResult RunGenerate(const CommandArgs& command) {
  const auto& args = command.args;
  if (AsksForHelp(args)) {
    PrintHelp(kGenerate, "write what gangrun is installed and used with",
              "man|completion gangrun|msrun|torchrun | token | page-secret [TOKEN_FILE]",
              "Commands:\n"
              "  man NAME                    the manual page of gangrun, msrun or torchrun\n"
              "  completion NAME             the bash completion of gangrun, msrun or torchrun\n"
              "  token                       a new random token (64 hex characters)\n"
              "  page-secret [TOKEN_FILE]    the secret a job's or daemon's pages ask for, from "
              "its token (TOKEN_FILE, GANGRUN_TOKEN_FILE or GANGRUN_TOKEN)");
    return absl::OkStatus();
  }
  if (args.size() == 2 && args[0] == "man" &&
      (args[1] == "gangrun" || args[1] == "msrun" || args[1] == "torchrun")) {
    std::fputs(ManPage(args[1]).c_str(), stdout);
    return absl::OkStatus();
  }
  if (args.size() == 2 && args[0] == "completion" &&
      (args[1] == "gangrun" || args[1] == "msrun" || args[1] == "torchrun")) {
    std::fputs(Completion(args[1]).c_str(), stdout);
    return absl::OkStatus();
  }
  if (args.size() == 1 && args[0] == "token") {
    // 256 bits from the kernel's generator, as hex: what --token_file and GANGRUN_TOKEN take.
    std::printf("%s\n", absl::BytesToHexString(rpc::RandomBytes(32)).c_str());
    return absl::OkStatus();
  }
  if ((args.size() == 1 || args.size() == 2) && args[0] == "page-secret") {
    // What the HTTP pages of a job or daemon with this token ask for (rpc::PageSecret): from
    // the token file given, else GANGRUN_TOKEN / GANGRUN_TOKEN_FILE.
    rpc::Access access = ClientAccessFromEnv(launcher::ProcessEnv());
    if (args.size() == 2) {
      access = rpc::Access();
      access.token_file = args[1];
    }
    auto token = rpc::ResolveToken(access);
    if (!token.ok()) return UsageError(kGenerate, std::string(token.status().message()));
    if (token->empty()) {
      return UsageError(kGenerate,
                        "page-secret needs the token: a token file, or GANGRUN_TOKEN_FILE or "
                        "GANGRUN_TOKEN");
    }
    std::printf("%s\n", rpc::PageSecret(*token).c_str());
    return absl::OkStatus();
  }
  return UsageError(kGenerate, args.empty() ? "what to generate?" : "cannot generate that");
}

}  // namespace gangrun::cli
