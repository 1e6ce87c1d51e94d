#include "rpc/channel.h"

#include "rpc/call_auth.h"

namespace gangrun::rpc {

using std::chrono::duration_cast;
using std::chrono::milliseconds;

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& target,
                                           std::shared_ptr<grpc::ChannelCredentials> credentials,
                                           const std::string& token,
                                           const std::string& tls_target_name,
                                           common::Duration keepalive,
                                           common::Duration keepalive_timeout) {
  if (keepalive_timeout <= common::Duration::zero()) keepalive_timeout = keepalive;
  grpc::ChannelArguments args;
  // Retry 100 ms after a quick failure (a scheduler not listening yet), at most every 500 ms.
  // gRPC also takes MIN_RECONNECT_BACKOFF as the least time a connection attempt is given:
  // it must be long, or a scheduler that is busy (thousands of nodes joining) or behind a
  // slow TLS handshake could never be reached.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 10000);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 500);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS,
              static_cast<int>(duration_cast<milliseconds>(keepalive).count()));
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
              static_cast<int>(duration_cast<milliseconds>(keepalive_timeout).count()));
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  args.SetInt(GRPC_ARG_ENABLE_CHANNELZ, 0);
  args.SetMaxReceiveMessageSize(8 << 20);
  if (!tls_target_name.empty()) args.SetSslTargetNameOverride(tls_target_name);
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> interceptors;
  if (auto interceptor = CallAuthInterceptor(token)) interceptors.push_back(std::move(interceptor));
  return grpc::experimental::CreateCustomChannelWithInterceptors(
      target, credentials ? credentials : grpc::InsecureChannelCredentials(), args,
      std::move(interceptors));
}

}  // namespace gangrun::rpc
