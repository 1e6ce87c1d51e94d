#include "launcher/credentials.h"

#include <fstream>
#include <sstream>

#include "absl/strings/strip.h"

namespace gangrun::launcher {
namespace {

absl::StatusOr<std::string> ReadPem(const std::string& option, const std::string& path) {
  if (path.empty()) return std::string();
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError("cannot read --" + option + " '" + path + "'");
  std::stringstream content;
  content << in.rdbuf();
  if (content.str().find("-----BEGIN") == std::string::npos) {
    return absl::InvalidArgumentError("--" + option + " '" + path + "' is not a PEM file");
  }
  return content.str();
}

struct Pems {
  std::string cert, key, ca;
};

absl::StatusOr<Pems> ReadAll(const Options& options) {
  Pems pems;
  auto cert = ReadPem("tls_cert", options.tls_cert);
  if (!cert.ok()) return cert.status();
  auto key = ReadPem("tls_key", options.tls_key);
  if (!key.ok()) return key.status();
  auto ca = ReadPem("tls_ca", options.tls_ca);
  if (!ca.ok()) return ca.status();
  return Pems{*cert, *key, *ca};
}

bool UsesTls(const Options& o) {
  return !o.tls_cert.empty() || !o.tls_key.empty() || !o.tls_ca.empty();
}

}  // namespace

absl::StatusOr<std::string> ResolveToken(const Options& options) {
  if (!options.token.empty() || options.token_file.empty()) return options.token;
  std::ifstream in(options.token_file);
  std::stringstream content;
  content << in.rdbuf();
  std::string token(absl::StripAsciiWhitespace(content.str()));
  if (token.empty()) {
    return absl::InvalidArgumentError("--token_file '" + options.token_file +
                                      "' is empty or unreadable");
  }
  return token;
}

Options ClientAccessFromEnv(const EnvLookup& env) {
  Options access;
  access.token = env("GANGRUN_TOKEN").value_or("");
  access.tls_ca = env("GANGRUN_TLS_CA").value_or("");
  access.tls_cert = env("GANGRUN_TLS_CERT").value_or("");
  access.tls_key = env("GANGRUN_TLS_KEY").value_or("");
  return access;
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const Options& options) {
  if (!UsesTls(options)) return std::shared_ptr<grpc::ServerCredentials>();
  auto pems = ReadAll(options);
  if (!pems.ok()) return pems.status();
  if (pems->cert.empty()) {
    return absl::InvalidArgumentError("the scheduler's TLS needs --tls_cert and --tls_key");
  }
  grpc::SslServerCredentialsOptions ssl(
      pems->ca.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                       : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  ssl.pem_root_certs = pems->ca;
  ssl.pem_key_cert_pairs.push_back({pems->key, pems->cert});
  return grpc::SslServerCredentials(ssl);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const Options& options) {
  if (!UsesTls(options)) return std::shared_ptr<grpc::ChannelCredentials>();
  auto pems = ReadAll(options);
  if (!pems.ok()) return pems.status();
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = pems->ca;
  ssl.pem_private_key = pems->key;
  ssl.pem_cert_chain = pems->cert;
  return grpc::SslCredentials(ssl);
}

}  // namespace gangrun::launcher
