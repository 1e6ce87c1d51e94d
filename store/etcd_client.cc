#include "store/etcd_client.h"

#include "absl/strings/str_join.h"
#include "common/net.h"
#include "rpc/credentials.h"

namespace gangrun::store {
namespace {

using std::chrono::duration_cast;
using std::chrono::milliseconds;

// gRPC's target for the members: one "ipv4:" or "ipv6:" address list, so that the channel
// moves to the next member when the one it uses goes away (pick_first over the list).
absl::StatusOr<std::string> ChannelTarget(const StoreConfig& config) {
  std::vector<std::string> v4, v6;
  for (const std::string& endpoint : config.endpoints) {
    auto parsed = common::ParseHostPort(endpoint, "--store");
    if (!parsed.ok()) return parsed.status();
    auto addresses = common::ResolveHost(parsed->host);
    if (!addresses.ok()) {
      return absl::InvalidArgumentError("--store " + config.url + ": " +
                                        std::string(addresses.status().message()));
    }
    const std::string& address = addresses->front();
    if (common::IsIpv6Literal(address)) {
      v6.push_back(common::JoinHostPort(address, parsed->port));
    } else {
      v4.push_back(common::JoinHostPort(address, parsed->port));
    }
  }
  if (!v4.empty() && !v6.empty()) {
    return absl::InvalidArgumentError("--store " + config.url +
                                      ": give the members all as IPv4 or all as IPv6 addresses");
  }
  return v4.empty() ? "ipv6:" + absl::StrJoin(v6, ",") : "ipv4:" + absl::StrJoin(v4, ",");
}

}  // namespace

std::string PrefixEnd(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    if (static_cast<unsigned char>(end.back()) < 0xff) {
      end.back() = static_cast<char>(end.back() + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key
}

absl::StatusOr<std::unique_ptr<EtcdClient>> EtcdClient::Connect(const StoreConfig& config) {
  auto target = ChannelTarget(config);
  if (!target.ok()) return target.status();
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (config.uses_tls()) {
    rpc::Access access;
    access.tls_ca = config.cacert;
    access.tls_cert = config.cert;
    access.tls_key = config.key;
    if (absl::Status files = rpc::CheckTlsFiles(access); !files.ok()) {
      return absl::InvalidArgumentError("--store_cacert/--store_cert/--store_key: " +
                                        std::string(files.message()));
    }
    auto made = rpc::MakeChannelCredentials(access);
    if (!made.ok()) return made.status();
    credentials = *made;
  }
  grpc::ChannelArguments args;
  const int timeout_ms =
      static_cast<int>(duration_cast<milliseconds>(config.request_timeout).count());
  // A member that stops answering is left once a keepalive ping goes unanswered. etcd refuses
  // pings more often than every 5 s (--grpc-keepalive-min-time) and pings outside calls
  // (--grpc-keepalive-permit-without-stream): it answers them with GOAWAY (too_many_pings).
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, std::max(timeout_ms, 1000));
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 0);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 1000);
  args.SetInt(GRPC_ARG_ENABLE_CHANNELZ, 0);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto channel = grpc::CreateCustomChannel(*target, credentials, args);
  return std::unique_ptr<EtcdClient>(new EtcdClient(config, std::move(channel)));
}

EtcdClient::EtcdClient(StoreConfig config, std::shared_ptr<grpc::Channel> channel)
    : config_(std::move(config)),
      channel_(std::move(channel)),
      kv_(etcdserverpb::KV::NewStub(channel_)),
      lease_(etcdserverpb::Lease::NewStub(channel_)),
      maintenance_(etcdserverpb::Maintenance::NewStub(channel_)) {}

void EtcdClient::Bound(grpc::ClientContext& context) const {
  context.set_deadline(std::chrono::system_clock::now() + config_.request_timeout);
  context.set_wait_for_ready(true);  // a member that is starting or moving is waited for
}

absl::Status EtcdClient::Failed(const std::string& what, const grpc::Status& status) const {
  std::string message = "the store " + config_.url + ": " + what + " failed: ";
  if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    message += "no answer within " +
               std::to_string(duration_cast<milliseconds>(config_.request_timeout).count()) +
               " ms (is etcd running there?)";
  } else {
    message += status.error_message();
  }
  return absl::UnavailableError(message);
}

absl::StatusOr<std::string> EtcdClient::Version() {
  grpc::ClientContext context;
  Bound(context);
  etcdserverpb::StatusResponse response;
  grpc::Status status = maintenance_->Status(&context, {}, &response);
  if (!status.ok()) return Failed("asking for its status", status);
  return response.version();
}

absl::StatusOr<std::optional<mvccpb::KeyValue>> EtcdClient::Get(const std::string& key,
                                                                int64_t revision) {
  grpc::ClientContext context;
  Bound(context);
  etcdserverpb::RangeRequest request;
  request.set_key(key);
  request.set_revision(revision);
  etcdserverpb::RangeResponse response;
  grpc::Status status = kv_->Range(&context, request, &response);
  if (!status.ok()) return Failed("reading " + key, status);
  if (response.kvs_size() == 0) return std::optional<mvccpb::KeyValue>();
  return std::optional<mvccpb::KeyValue>(response.kvs(0));
}

absl::StatusOr<std::vector<mvccpb::KeyValue>> EtcdClient::GetPrefix(const std::string& prefix) {
  grpc::ClientContext context;
  Bound(context);
  etcdserverpb::RangeRequest request;
  request.set_key(prefix);
  request.set_range_end(PrefixEnd(prefix));
  etcdserverpb::RangeResponse response;
  grpc::Status status = kv_->Range(&context, request, &response);
  if (!status.ok()) return Failed("reading " + prefix + "*", status);
  return std::vector<mvccpb::KeyValue>(response.kvs().begin(), response.kvs().end());
}

absl::StatusOr<int64_t> EtcdClient::Put(const std::string& key, const std::string& value,
                                        int64_t lease) {
  grpc::ClientContext context;
  Bound(context);
  etcdserverpb::PutRequest request;
  request.set_key(key);
  request.set_value(value);
  request.set_lease(lease);
  etcdserverpb::PutResponse response;
  grpc::Status status = kv_->Put(&context, request, &response);
  if (!status.ok()) return Failed("writing " + key, status);
  return response.header().revision();
}

absl::Status EtcdClient::Delete(const std::string& key) {
  grpc::ClientContext context;
  Bound(context);
  etcdserverpb::DeleteRangeRequest request;
  request.set_key(key);
  etcdserverpb::DeleteRangeResponse response;
  grpc::Status status = kv_->DeleteRange(&context, request, &response);
  if (!status.ok()) return Failed("deleting " + key, status);
  return absl::OkStatus();
}

absl::StatusOr<etcdserverpb::TxnResponse> EtcdClient::Txn(const etcdserverpb::TxnRequest& request) {
  grpc::ClientContext context;
  Bound(context);
  etcdserverpb::TxnResponse response;
  grpc::Status status = kv_->Txn(&context, request, &response);
  if (!status.ok()) return Failed("a transaction", status);
  return response;
}

absl::StatusOr<int64_t> EtcdClient::GrantLease(int64_t ttl_seconds) {
  grpc::ClientContext context;
  Bound(context);
  etcdserverpb::LeaseGrantRequest request;
  request.set_ttl(ttl_seconds);
  etcdserverpb::LeaseGrantResponse response;
  grpc::Status status = lease_->LeaseGrant(&context, request, &response);
  if (!status.ok()) return Failed("granting a lease", status);
  if (!response.error().empty()) {
    return absl::UnavailableError("the store " + config_.url +
                                  ": granting a lease failed: " + response.error());
  }
  return response.id();
}

absl::StatusOr<int64_t> EtcdClient::KeepAlive(int64_t lease) {
  grpc::ClientContext context;
  Bound(context);
  auto stream = lease_->LeaseKeepAlive(&context);
  etcdserverpb::LeaseKeepAliveRequest request;
  request.set_id(lease);
  etcdserverpb::LeaseKeepAliveResponse response;
  const bool answered = stream->Write(request) && stream->WritesDone() && stream->Read(&response);
  grpc::Status status = stream->Finish();
  if (!answered) {
    return Failed("keeping the lease alive",
                  status.ok() ? grpc::Status(grpc::StatusCode::UNAVAILABLE, "no answer") : status);
  }
  return response.ttl();
}

absl::Status EtcdClient::Revoke(int64_t lease) {
  grpc::ClientContext context;
  Bound(context);
  etcdserverpb::LeaseRevokeRequest request;
  request.set_id(lease);
  etcdserverpb::LeaseRevokeResponse response;
  grpc::Status status = lease_->LeaseRevoke(&context, request, &response);
  if (!status.ok()) return Failed("revoking the lease", status);
  return absl::OkStatus();
}

absl::StatusOr<int64_t> EtcdClient::TimeToLive(int64_t lease) {
  grpc::ClientContext context;
  Bound(context);
  etcdserverpb::LeaseTimeToLiveRequest request;
  request.set_id(lease);
  etcdserverpb::LeaseTimeToLiveResponse response;
  grpc::Status status = lease_->LeaseTimeToLive(&context, request, &response);
  if (!status.ok()) return Failed("reading the lease", status);
  return response.ttl();
}

etcdserverpb::Compare EtcdClient::CreateRevisionIs(const std::string& key, int64_t revision) {
  etcdserverpb::Compare compare;
  compare.set_key(key);
  compare.set_target(etcdserverpb::Compare::CREATE);
  compare.set_result(etcdserverpb::Compare::EQUAL);
  compare.set_create_revision(revision);
  return compare;
}

etcdserverpb::Compare EtcdClient::ModRevisionIs(const std::string& key, int64_t revision) {
  etcdserverpb::Compare compare;
  compare.set_key(key);
  compare.set_target(etcdserverpb::Compare::MOD);
  compare.set_result(etcdserverpb::Compare::EQUAL);
  compare.set_mod_revision(revision);
  return compare;
}

}  // namespace gangrun::store
