#include "rpc/credentials.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <sys/stat.h>

#include <atomic>
#include <cctype>
#include <fstream>
#include <memory>
#include <sstream>

#include "absl/strings/strip.h"
#include "common/env_names.h"
#include "common/logging.h"

namespace gangrun::rpc {
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

absl::StatusOr<Pems> ReadAll(const Access& access) {
  Pems pems;
  auto cert = ReadPem("tls_cert", access.tls_cert);
  if (!cert.ok()) return cert.status();
  auto key = ReadPem("tls_key", access.tls_key);
  if (!key.ok()) return key.status();
  auto ca = ReadPem("tls_ca", access.tls_ca);
  if (!ca.ok()) return ca.status();
  return Pems{*cert, *key, *ca};
}

using X509Ptr = std::unique_ptr<X509, decltype(&X509_free)>;
using KeyPtr = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;

// The first certificate of a PEM file, or null.
X509Ptr ReadCertificate(const std::string& path) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_file(path.c_str(), "r"), BIO_free);
  if (!bio) return X509Ptr(nullptr, X509_free);
  return X509Ptr(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr), X509_free);
}

KeyPtr ReadPrivateKey(const std::string& path) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_file(path.c_str(), "r"), BIO_free);
  if (!bio) return KeyPtr(nullptr, EVP_PKEY_free);
  // An empty passphrase callback: an encrypted key fails here instead of prompting.
  return KeyPtr(PEM_read_bio_PrivateKey(
                    bio.get(), nullptr, [](char*, int, int, void*) { return 0; }, nullptr),
                EVP_PKEY_free);
}

void WarnIfReadableByOthers(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || (st.st_mode & 077) == 0) return;
  common::Logger("launcher")
      ->warn("--token_file {} can be read by other users (mode {:o}); chmod 600 it", path,
             st.st_mode & 0777);
}

}  // namespace

const std::vector<AccessOption>& AccessOptions() {
  static const std::vector<AccessOption> options = {
      {"token", "the job's shared secret (visible in ps: prefer --token_file or GANGRUN_TOKEN)",
       &Access::token},
      {"token_file", "file holding the job's shared secret", &Access::token_file},
      {"tls_cert", "TLS certificate (PEM)", &Access::tls_cert},
      {"tls_key", "TLS private key (PEM)", &Access::tls_key},
      {"tls_ca", "TLS CA bundle (PEM); enables mutual TLS", &Access::tls_ca},
  };
  return options;
}

std::string AccessOption::variable() const {
  std::string upper = name;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return env::kPrefix + upper;
}

absl::Status CheckTlsFiles(const Access& access) {
  // Without TLS files nothing here touches OpenSSL (whose error strings cost a launch ~0.3 ms).
  if (access.tls_cert.empty() && access.tls_ca.empty()) return absl::OkStatus();
  ERR_clear_error();
  if (!access.tls_cert.empty()) {
    X509Ptr cert = ReadCertificate(access.tls_cert);
    if (!cert) {
      return absl::InvalidArgumentError("--tls_cert '" + access.tls_cert +
                                        "' holds no PEM certificate");
    }
    if (X509_cmp_current_time(X509_get0_notAfter(cert.get())) < 0) {
      return absl::InvalidArgumentError("the certificate in --tls_cert '" + access.tls_cert +
                                        "' has expired");
    }
    if (!access.tls_key.empty()) {
      KeyPtr key = ReadPrivateKey(access.tls_key);
      if (!key) {
        return absl::InvalidArgumentError("--tls_key '" + access.tls_key +
                                          "' holds no unencrypted PEM private key");
      }
      if (X509_check_private_key(cert.get(), key.get()) != 1) {
        return absl::InvalidArgumentError("--tls_key '" + access.tls_key +
                                          "' does not belong to the certificate in --tls_cert '" +
                                          access.tls_cert + "'");
      }
    }
  }
  if (!access.tls_ca.empty() && !ReadCertificate(access.tls_ca)) {
    return absl::InvalidArgumentError("--tls_ca '" + access.tls_ca + "' holds no PEM certificate");
  }
  ERR_clear_error();
  return absl::OkStatus();
}

absl::StatusOr<std::string> ResolveToken(const Access& access) {
  if (!access.token.empty() || access.token_file.empty()) return access.token;
  WarnIfReadableByOthers(access.token_file);
  std::ifstream in(access.token_file);
  std::stringstream content;
  content << in.rdbuf();
  std::string token(absl::StripAsciiWhitespace(content.str()));
  if (token.empty()) {
    return absl::InvalidArgumentError("--token_file '" + access.token_file +
                                      "' is empty or unreadable");
  }
  return token;
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const Access& access) {
  if (!access.uses_tls()) return std::shared_ptr<grpc::ServerCredentials>();
  auto pems = ReadAll(access);
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
    const Access& access) {
  if (!access.uses_tls()) return std::shared_ptr<grpc::ChannelCredentials>();
  auto pems = ReadAll(access);
  if (!pems.ok()) return pems.status();
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = pems->ca;
  ssl.pem_private_key = pems->key;
  ssl.pem_cert_chain = pems->cert;
  return grpc::SslCredentials(ssl);
}

// A token a guess can find: the scheduler's proof of the token lets whoever records one
// opening test guesses offline (docs/WIRE.md), so its strength is its length. 32 characters
// hold 128 bits as hex, the least a generated token has (`gangrun generate token`: 256).
constexpr size_t kShortestStrongToken = 32;

void WarnIfWeakToken(const std::string& token) {
  if (token.empty() || token.size() >= kShortestStrongToken) return;
  static std::atomic<bool> said{false};  // once per process, whatever reads the token again
  if (said.exchange(true)) return;
  common::Logger("launcher")
      ->warn(
          "the token has {} characters: a short token can be guessed offline from one "
          "recorded connection; use {} hex digits or more (gangrun generate token makes one)",
          token.size(), kShortestStrongToken);
}

}  // namespace gangrun::rpc
