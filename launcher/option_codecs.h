#pragma once
// How one launcher option's value is read into Options and written back out of them: the
// generic codecs the option table's rows are built from (launcher/option_table.h), and those
// of the options whose values have a shape of their own.

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "launcher/options.h"
#include "rpc/credentials.h"

namespace gangrun::launcher::codec {

using Setter = std::function<absl::Status(Options&, const std::string&)>;
using Formatter = std::function<std::string(const Options&)>;

struct Codec {
  Setter set;        // InvalidArgument saying what was expected
  Formatter format;  // the value as `set` takes it back
};

inline constexpr double kMaxBackoff = 86400;
inline constexpr double kMaxHangSeconds = 7 * 86400;
inline constexpr double kMaxTimeLimit = 366.0 * 86400;  // a year: longer than any allocation

// The shortest text that reads back as exactly `value`.
std::string Number(double value);
// " [min..max]" for a help text.
std::string Range(int min, int max);
std::string Range(double min, double max);

// An integer in [min, max]; with `negative_means_forever`, any negative value too
// (cluster_time_out's "wait forever").
Codec Int(int Options::*field, int min, int max, bool negative_means_forever = false);
Codec SecondsOption(double Options::*field, double min, double max,
                    const char* what = "a number of seconds");
Codec String(std::string Options::*field);
// --numa_binding: "", node, socket, exclusive or core-complex (launcher/numa.h).
Codec NumaBindingMode();
Codec BindNumaConfig();  // msrun's --bind_numa
Codec AccessString(std::string rpc::Access::*field);
// msrun's literals True/False, and also true/false/1/0.
Codec Bool(bool Options::*field);

// N, or MIN:MAX for an elastic job.
Codec WorkerNum();
// False, True or msrun's JSON dict of device -> CPU ranges.
Codec BindCoreDict();
// Ranks, comma-separated; -1 = all.
Codec TailRanks();
// INITIAL[,CAP] seconds.
Codec Backoff();
// Bytes, with an optional binary suffix.
Codec KvMaxBytes();
// Seconds, or "auto".
Codec HangTimeout();
// NAME=S[,NAME=S...]; "" = none.
Codec SectionTimeouts();

// The signals a launcher may pass on to every worker of its job and let the job go on (the
// stop signals SIGINT, SIGTERM and SIGHUP stop it instead).
bool Forwardable(int sig);
// CODE[,CODE...], exit codes in [1, 255]; "" = none.
Codec ExitCodes(std::set<int> Options::*field);
// SIG[,SIG...] of Forwardable signals by name or number; "" = none.
Codec Signals(std::vector<int> Options::*field);
// torchrun 2.9's --signals-to-handle SIG[,SIG...] (its default SIGTERM,SIGINT,SIGHUP,SIGQUIT):
// its agent stops the workers on each. gangrun always stops the job on SIGTERM, SIGINT and
// SIGHUP, and forwards the others job-wide (signals_to_forward): a checkpoint signal should
// not end the job. InvalidArgument says what was expected.
absl::Status SetSignalsToHandle(Options& o, const std::string& value);
// SIG@SECONDS: SIG to every worker SECONDS before --time_limit; "" = none.
Codec TimeLimitSignal();

}  // namespace gangrun::launcher::codec
