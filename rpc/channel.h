#pragma once
// The client side of gangrun's RPCs: channels with gangrun's settings, and the job's token on
// every call.

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "common/clock.h"

namespace gangrun::rpc {

// A channel to `target` (HOST:PORT) with gangrun's settings: quick reconnects, patient
// connection attempts, a keepalive ping every `keepalive` that must be answered within
// `keepalive_timeout` (zero: within `keepalive`) or the connection is closed, 8 MiB messages.
std::shared_ptr<grpc::Channel> MakeChannel(
    const std::string& target, std::shared_ptr<grpc::ChannelCredentials> credentials,
    const std::string& tls_target_name, common::Duration keepalive,
    common::Duration keepalive_timeout = common::Duration::zero());

// Adds the job's token to a call ("authorization: Bearer <token>"); nothing for "".
void AddToken(grpc::ClientContext& context, const std::string& token);

}  // namespace gangrun::rpc
