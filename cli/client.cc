#include "cli/client.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <regex>

#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/env_names.h"
#include "common/net.h"
#include "common/status.h"
#include "common/version.h"
#include "gangrun/v1/daemon.grpc.pb.h"
#include "rpc/channel.h"

namespace gangrun::cli {

rpc::Access ClientAccessFromEnv(const launcher::EnvLookup& env) {
  rpc::Access access;
  for (const rpc::AccessOption& option : rpc::AccessOptions()) {
    access.*option.field = env(option.variable()).value_or("");
  }
  return access;
}

std::string MasterHelp() {
  return std::string("the daemon (gangrun scheduler), HOST:PORT (") + env::kMaster + ")";
}

void AddClientOptions(CLI::App& app, ClientTarget& target, const launcher::EnvLookup& env) {
  target.master = env(env::kMaster).value_or("");
  target.access = ClientAccessFromEnv(env);
  app.add_option("--master", target.master, MasterHelp());
  for (const rpc::AccessOption& option : rpc::AccessOptions()) {
    app.add_option(std::string("--") + option.name, target.access.*option.field,
                   std::string(option.help) + " (" + option.variable() + ")");
  }
}

std::optional<CommandResult> ParseArgs(CLI::App& app, const std::string& command,
                                       const std::vector<std::string>& args) {
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  app.set_version_flag("--version", common::VersionLine(app.get_name()),
                       "print the version and exit");
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return absl::OkStatus();
  } catch (const CLI::CallForVersion&) {
    std::fputs((common::VersionLine(app.get_name()) + "\n").c_str(), stdout);
    return absl::OkStatus();
  } catch (const CLI::ExtrasError& e) {
    // CLI11's "The following arguments were not expected: --job 3", in gangrun's words.
    // The arguments were given to CLI11 reversed (ParseArgs): back in the user's order.
    std::string text = e.what();
    text = text.substr(text.find(':') == std::string::npos ? 0 : text.find(':') + 2);
    std::vector<std::string> extras = absl::StrSplit(text, ' ', absl::SkipEmpty());
    std::reverse(extras.begin(), extras.end());
    return absl::InvalidArgumentError("unknown option or argument: " + absl::StrJoin(extras, " ") +
                                      " (see gangrun " + command + " --help)");
  } catch (const CLI::ParseError& e) {
    return absl::InvalidArgumentError(std::string(e.what()) + " (see gangrun " + command +
                                      " --help)");
  }
  return std::nullopt;
}

void AddStoreOptions(CLI::App& app, ClientTarget& target) {
  app.add_option("--store", target.store.url,
                 "etcd://HOST:PORT[,...][/PREFIX]: find the run's scheduler through its store");
  app.add_option("--run_id", target.store.run_id, "the run id (with --store)");
  app.add_option("--store_cacert", target.store.cacert, "CA bundle for the store (TLS)");
  app.add_option("--store_cert", target.store.cert, "client certificate for the store");
  app.add_option("--store_key", target.store.key, "its key");
}

absl::StatusOr<std::unique_ptr<store::RunStore>> OpenRunStore(const StoreLookup& lookup) {
  ASSIGN_OR_RETURN(store::StoreConfig config,
                   store::ParseStoreUrl(lookup.url, lookup.cacert, lookup.cert, lookup.key));
  if (lookup.run_id.empty()) return absl::InvalidArgumentError("--store needs --run_id");
  ASSIGN_OR_RETURN(auto client, store::EtcdClient::Connect(config));
  return std::make_unique<store::RunStore>(std::move(client), lookup.run_id);
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> OpenClientChannel(const ClientTarget& given) {
  ClientTarget target = given;
  if (!target.store.url.empty() && target.master.empty()) {
    ASSIGN_OR_RETURN(auto run, OpenRunStore(target.store));
    ASSIGN_OR_RETURN(auto scheduler, run->Scheduler());
    if (!scheduler) {
      return absl::UnavailableError("no scheduler holds run " + target.store.run_id +
                                    " in the store " + target.store.url +
                                    " now (a failover under way, or the run is over: gangrun "
                                    "status --store says which)");
    }
    target.master = store::AddressToReach(*scheduler);
  }
  if (target.master.empty()) {
    return absl::InvalidArgumentError(std::string("--master HOST:PORT is required (or ") +
                                      env::kMaster + ")");
  }
  const std::vector<std::string> masters = absl::StrSplit(target.master, ',');
  for (const std::string& master : masters) {
    RETURN_IF_ERROR(common::ParseHostPort(master, "--master").status());
  }
  ASSIGN_OR_RETURN(auto credentials, rpc::MakeChannelCredentials(target.access));
  ASSIGN_OR_RETURN(const std::string token, rpc::ResolveToken(target.access));
  if (masters.size() == 1) {
    return rpc::MakeChannel(target.master, credentials, token, "", std::chrono::seconds(30));
  }
  // Several daemons on one store: the active one (the others stand by), else the first that
  // answers (its status names the active one).
  std::shared_ptr<grpc::Channel> answering;
  for (const std::string& master : masters) {
    auto channel = rpc::MakeChannel(master, credentials, token, "", std::chrono::seconds(30));
    v1::DaemonStatusResponse status;
    auto context = CallContext(2);
    if (!v1::Daemon::NewStub(channel)->Status(context.get(), {}, &status).ok()) continue;
    if (!status.standby()) return channel;
    if (!answering) answering = channel;
  }
  if (answering) return answering;
  return absl::UnavailableError("no daemon of " + target.master + " answers");
}

std::unique_ptr<grpc::ClientContext> CallContext(int seconds) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
  return context;
}

absl::StatusOr<std::vector<int>> ParseRankList(const std::string& text,
                                               const std::string& command) {
  std::vector<int> ranks;
  if (text.empty()) return ranks;
  auto bad = [&](absl::string_view item) {
    return UsageError(command, "--rank: '" + std::string(item) +
                                   "' is not a rank or a range of ranks (0, 2-5, 0-3,7)");
  };
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    // R or R-S, as `gangrun status` prints them.
    const size_t dash = item.find('-');
    int first = -1, last = -1;
    if (!absl::SimpleAtoi(item.substr(0, dash), &first) || first < 0 ||
        (dash != absl::string_view::npos &&
         (!absl::SimpleAtoi(item.substr(dash + 1), &last) || last < first))) {
      return bad(item);
    }
    if (dash == absl::string_view::npos) last = first;
    // Bounded as a job's ranks are (launcher::kMaxWorkers), whatever the text asks.
    if (last >= launcher::kMaxWorkers ||
        ranks.size() + static_cast<size_t>(last - first) + 1 > size_t{launcher::kMaxWorkers}) {
      return UsageError(command, "--rank: '" + std::string(item) + "' names more than " +
                                     std::to_string(launcher::kMaxWorkers) + " ranks");
    }
    for (int rank = first; rank <= last; ++rank) ranks.push_back(rank);
  }
  return ranks;
}

absl::Status CallFailed(const grpc::Status& status) {
  // gRPC's own words for a target nobody answers at ("failed to connect to all addresses;
  // last error: UNKNOWN: ipv4:127.0.0.1:29999: Failed to connect to remote host: Connection
  // refused"), said once in gangrun's.
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
    static const std::regex unreachable(
        R"(failed to connect to all addresses.*?(?:ipv4|ipv6):(\S+?): (?:Failed to connect to remote host: )?(.*)$)");
    std::smatch match;
    const std::string message = status.error_message();
    if (std::regex_search(message, match, unreachable)) {
      std::string why = match[2];
      if (!why.empty()) why[0] = static_cast<char>(std::tolower(why[0]));
      return absl::UnavailableError("no gangrun scheduler or daemon answers at " +
                                    std::string(match[1]) + ": " + why);
    }
  }
  if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    return absl::UnavailableError("no answer in time from the gangrun scheduler or daemon (" +
                                  status.error_message() + ")");
  }
  switch (status.error_code()) {
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::NOT_FOUND:
      return absl::InvalidArgumentError(status.error_message());
    default:
      return absl::UnavailableError(status.error_message());
  }
}

}  // namespace gangrun::cli
