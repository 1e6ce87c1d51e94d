#pragma once
// TLS for the scheduler's port, from --tls_cert/--tls_key/--tls_ca: the server presents
// cert+key and, when a CA is given, requires and verifies client certificates (mutual TLS);
// nodes and `gangrun kv` verify the server against the CA and present cert+key.

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace gangrun::rpc {

// How a process proves itself to a job's scheduler or a daemon, and checks it: a shared
// secret, and TLS files.
struct Access {
  std::string token;       // --token (visible in ps: prefer token_file or GANGRUN_TOKEN)
  std::string token_file;  // --token_file
  std::string tls_cert;    // --tls_cert
  std::string tls_key;     // --tls_key
  std::string tls_ca;      // --tls_ca: clients verify the server with it; the server requires
                           // client certificates signed by it (mutual TLS)
  bool uses_tls() const { return !tls_cert.empty() || !tls_key.empty() || !tls_ca.empty(); }
};

// The access options, in the one list every command takes them from (the launcher's option
// table, the client commands, the daemon and the agent): the flag's name without "--", its
// help, and its field. Each defaults to the variable GANGRUN_<NAME>.
struct AccessOption {
  const char* name;
  const char* help;
  std::string Access::*field;
  std::string variable() const;  // GANGRUN_TOKEN, GANGRUN_TOKEN_FILE, ...
};
const std::vector<AccessOption>& AccessOptions();

// Null (insecure) when no TLS option is set.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const Access& access);
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const Access& access);

// The shared secret: --token, else the content of --token_file (whitespace stripped);
// InvalidArgument when the file is empty or unreadable. Warns (on the launcher's log) when the
// file can be read by others than its owner.
// Warns (once per process) when `token` is shorter than 32 characters: the job's owner (a
// launcher that hosts a job, a daemon) says so; clients and workers, which only use the token,
// do not.
void WarnIfWeakToken(const std::string& token);

absl::StatusOr<std::string> ResolveToken(const Access& access);

// Checks the TLS files before anything listens or connects, so that a bad file is named as
// such (not mistaken for a busy port): the certificate and key parse, the key belongs to the
// certificate, the certificate has not expired, the CA bundle holds a certificate.
absl::Status CheckTlsFiles(const Access& access);

}  // namespace gangrun::rpc
