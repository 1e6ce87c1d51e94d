#pragma once
// The client side of gangrun's RPCs: channels with gangrun's settings, and the job's token on
// every call.

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "common/clock.h"

namespace gangrun::rpc {

// A channel to `target` (HOST:PORT) with gangrun's settings: quick reconnects, patient
// connection attempts, keepalive pings every `keepalive`, 8 MiB messages.
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& target,
                                           std::shared_ptr<grpc::ChannelCredentials> credentials,
                                           const std::string& tls_target_name,
                                           common::Duration keepalive);

// Adds the job's token to a call ("authorization: Bearer <token>"); nothing for "".
void AddToken(grpc::ClientContext& context, const std::string& token);

}  // namespace gangrun::rpc
