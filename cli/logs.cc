// gangrun logs: every rank's log of a running job from whichever node holds it, through the
// job's scheduler (or a daemon's), each line prefixed with its host and rank. A rank's lines
// come in order; ranks interleave by whole lines. Nothing is dropped: the stream is pulled,
// so a slow reader of this command's output slows the reads on the nodes (scheduler/logs.cc).

#include <cstdio>
#include <map>

#include "cli/client.h"
#include "cli/command.h"
#include "gangrun/v1/daemon.grpc.pb.h"
#include "gangrun/v1/session.grpc.pb.h"

namespace gangrun::cli {
namespace {

// A line longer than this (a rank writing without newlines) is printed in pieces.
constexpr size_t kMaxLineBytes = 1 << 20;

// Whole lines to stdout, each with its rank's prefix; a rank's unfinished line waits for the
// rest (or for the rank's end).
class LinePrinter {
 public:
  void Add(const v1::LogChunk& chunk) {
    std::string& partial = partial_[chunk.rank()];
    const std::string prefix = "[" + chunk.host() + ":" + std::to_string(chunk.rank()) + "] ";
    absl::string_view data = chunk.data();
    std::string out;
    while (!data.empty()) {
      const size_t newline = data.find('\n');
      const size_t take = newline == absl::string_view::npos ? data.size() : newline + 1;
      partial.append(data.data(), take);
      data.remove_prefix(take);
      if (partial.back() == '\n' || partial.size() >= kMaxLineBytes) {
        out += prefix + partial;
        if (out.back() != '\n') out += '\n';
        partial.clear();
      }
    }
    if (chunk.end() && !partial.empty()) {
      out += prefix + partial + "\n";
      partial.clear();
    }
    if (chunk.end() && !chunk.error().empty()) {
      std::fprintf(stderr, "gangrun logs: rank %d on %s: %s\n", chunk.rank(), chunk.host().c_str(),
                   chunk.error().c_str());
    }
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::fflush(stdout);  // --follow: what came is shown now
  }

 private:
  std::map<int, std::string> partial_;
};

template <typename Stub>
grpc::Status ReadLogs(Stub& stub, const v1::LogsRequest& request, LinePrinter& printer, bool& any) {
  grpc::ClientContext context;  // no deadline: --follow runs as long as the job
  auto reader = stub.Logs(&context, request);
  v1::LogChunk chunk;
  while (reader->Read(&chunk)) {
    any = true;
    printer.Add(chunk);
  }
  std::fflush(stdout);
  return reader->Finish();
}

}  // namespace

CommandResult RunLogs(const CommandArgs& command) {
  CLI::App app{
      "gangrun logs: every rank's log of a job, from any host (a daemon's: also once ended)",
      "gangrun logs"};
  ClientTarget target;
  AddClientOptions(app, target, command.env);
  AddStoreOptions(app, target);
  std::string ranks_text, job_id;
  bool follow = false;
  int64_t tail = -1;  // not given: the whole log
  app.add_option("--rank", ranks_text,
                 "R, R-S, ...: only these ranks (0-3,7; default: every rank)");
  app.add_flag("--follow,-f", follow, "keep printing what the ranks write until they end");
  app.add_option("--tail", tail,
                 "start at each rank's last N lines; 0: only what they write from now on, as "
                 "tail -n 0 -f (default: the whole log)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  app.add_option("--job", job_id,
                 "a daemon's job id, running or ended (default: its only running job)");
  if (auto done = ParseArgs(app, "logs", command.args)) return *done;
  auto ranks = ParseRankList(ranks_text, "logs");
  if (!ranks.ok()) return ranks.status();
  auto channel = OpenClientChannel(target);
  if (!channel.ok()) return channel.status();
  v1::LogsRequest request;
  request.set_job_id(job_id);
  for (int rank : *ranks) request.add_ranks(rank);
  request.set_follow(follow);
  request.set_tail_lines(tail < 0 ? 0 : tail == 0 ? -1 : tail);
  LinePrinter printer;
  bool any = false;
  grpc::Status status(grpc::StatusCode::UNIMPLEMENTED, "");
  if (job_id.empty()) {
    auto stub = v1::Scheduler::NewStub(*channel);
    status = ReadLogs(*stub, request, printer, any);
  }
  if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED && !any) {
    auto stub = v1::Daemon::NewStub(*channel);
    status = ReadLogs(*stub, request, printer, any);
  }
  if (!status.ok()) return CallFailed(status);
  return absl::OkStatus();
}

}  // namespace gangrun::cli
