#pragma once
// TLS for the scheduler's port, from --tls_cert/--tls_key/--tls_ca: the server presents
// cert+key and, when a CA is given, requires and verifies client certificates (mutual TLS);
// nodes and `gangrun kv` verify the server against the CA and present cert+key.

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include <memory>

#include "absl/status/statusor.h"
#include "launcher/options.h"

namespace gangrun::launcher {

// Null (insecure) when no TLS option is set.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const Options& options);
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const Options& options);

// The shared secret: --token, else the content of --token_file (whitespace stripped);
// InvalidArgument when the file is empty or unreadable. Warns (on the launcher's log) when the
// file can be read by others than its owner.
absl::StatusOr<std::string> ResolveToken(const Options& options);

// Checks the TLS files before anything listens or connects, so that a bad file is named as
// such (not mistaken for a busy port): the certificate and key parse, the key belongs to the
// certificate, the certificate has not expired, the CA bundle holds a certificate.
absl::Status CheckTlsFiles(const Options& options);

// The token and TLS files a client subcommand (kv, scale) starts from: GANGRUN_TOKEN,
// GANGRUN_TLS_CA, GANGRUN_TLS_CERT, GANGRUN_TLS_KEY.
Options ClientAccessFromEnv(const EnvLookup& env);

}  // namespace gangrun::launcher
