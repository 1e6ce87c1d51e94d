#pragma once
// The client side of gangrun's RPCs: channels with gangrun's settings, whose every call proves
// it knows the job's token (rpc/call_auth.h).

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "common/clock.h"

namespace gangrun::rpc {

// A channel to `target` (HOST:PORT) with gangrun's settings: quick reconnects, patient
// connection attempts, a keepalive ping every `keepalive` that must be answered within
// `keepalive_timeout` (zero: within `keepalive`) or the connection is closed, 8 MiB messages,
// and `token` proven on every call ("" = none).
std::shared_ptr<grpc::Channel> MakeChannel(
    const std::string& target, std::shared_ptr<grpc::ChannelCredentials> credentials,
    const std::string& token, const std::string& tls_target_name, common::Duration keepalive,
    common::Duration keepalive_timeout = common::Duration::zero());

}  // namespace gangrun::rpc
