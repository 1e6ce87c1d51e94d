#include "rpc/call_auth.h"

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "rpc/session_auth.h"

namespace gangrun::rpc {
namespace {

constexpr std::string_view kCallLabel = "gangrun/v2 call";

std::string CallMac(std::string_view key, std::string_view method, std::string_view time,
                    std::string_view nonce) {
  return absl::BytesToHexString(Mac(key, {kCallLabel, method, time, nonce}));
}

class Interceptor : public grpc::experimental::Interceptor {
 public:
  Interceptor(const std::string& token, std::string method) : token_(token), method_(method) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->insert(
          {"authorization", CallCredential(token_, method_, UnixMillis())});
    }
    methods->Proceed();
  }

 private:
  const std::string& token_;
  std::string method_;
};

class InterceptorFactory : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit InterceptorFactory(std::string token) : token_(std::move(token)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo* info) override {
    return new Interceptor(token_, info->method() != nullptr ? info->method() : "");
  }

 private:
  std::string token_;
};

}  // namespace

int64_t UnixMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string CallCredential(std::string_view token, std::string_view method, int64_t unix_ms) {
  const std::string time = std::to_string(unix_ms);
  const std::string nonce = absl::BytesToHexString(RandomBytes(kNonceBytes));
  return std::string(kCallAuthScheme) + " t=" + time + ",n=" + nonce +
         ",m=" + CallMac(TokenKey(token), method, time, nonce);
}

std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface> CallAuthInterceptor(
    std::string token) {
  if (token.empty()) return nullptr;
  return std::make_unique<InterceptorFactory>(std::move(token));
}

CallAuthenticator::CallAuthenticator(std::string token) : token_(std::move(token)) {}

const std::string& CallAuthenticator::Key() {
  std::call_once(key_once_, [this] { key_ = TokenKey(token_); });
  return key_;
}

absl::Status CallAuthenticator::Check(const grpc::ServerContextBase& context,
                                      std::string_view method) {
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  const std::string_view credential = it == metadata.end()
                                          ? std::string_view()
                                          : std::string_view(it->second.data(), it->second.size());
  return CheckCredential(credential, method, UnixMillis());
}

absl::Status CallAuthenticator::CheckCredential(std::string_view credential,
                                                std::string_view method, int64_t now_unix_ms) {
  if (token_.empty()) {
    if (credential.empty()) return absl::OkStatus();
    return absl::UnauthenticatedError(
        "this job has no token, but the call carries one (a token mismatch)");
  }
  if (credential.empty()) return absl::UnauthenticatedError("the call carries no token");
  absl::string_view rest(credential.data(), credential.size());
  if (!absl::ConsumePrefix(&rest,
                           absl::string_view(kCallAuthScheme.data(), kCallAuthScheme.size())) ||
      !absl::ConsumePrefix(&rest, " ")) {
    return absl::UnauthenticatedError("the call's credential is not gangrun's");
  }
  absl::string_view time, nonce, mac;
  for (absl::string_view field : absl::StrSplit(rest, ',')) {
    if (absl::ConsumePrefix(&field, "t=")) time = field;
    if (absl::ConsumePrefix(&field, "n=")) nonce = field;
    if (absl::ConsumePrefix(&field, "m=")) mac = field;
  }
  int64_t sent_ms = 0;
  if (!absl::SimpleAtoi(time, &sent_ms) || nonce.size() != 2 * kNonceBytes || mac.empty()) {
    return absl::UnauthenticatedError("the call's credential is malformed");
  }
  const std::string_view time_text(time.data(), time.size());
  const std::string_view nonce_text(nonce.data(), nonce.size());
  if (!MacsEqual(std::string_view(mac.data(), mac.size()),
                 CallMac(Key(), method, time_text, nonce_text))) {
    return absl::UnauthenticatedError("wrong or missing token");
  }
  const int64_t window = std::chrono::milliseconds(kMaxClockSkew).count();
  if (sent_ms < now_unix_ms - window || sent_ms > now_unix_ms + window) {
    return absl::UnauthenticatedError(
        "the call was made " + std::to_string((now_unix_ms - sent_ms) / 1000) +
        " s from this host's time: a replay, or the hosts' clocks differ by more than " +
        std::to_string(kMaxClockSkew.count()) + " s");
  }
  common::MutexLock lock(&mu_);
  while (!expiry_.empty() && expiry_.front().first < now_unix_ms) {
    nonces_.erase(expiry_.front().second);
    expiry_.pop_front();
  }
  const std::string seen(nonce_text);
  if (nonces_.count(seen) > 0) {
    return absl::UnauthenticatedError("the call replays an earlier one");
  }
  if (nonces_.size() >= kMaxNonces) {
    return absl::UnavailableError("too many calls in the last " +
                                  std::to_string(2 * kMaxClockSkew.count()) + " s; try again");
  }
  nonces_.insert(seen);
  // Remembered until the time it carries can no longer pass the window check.
  expiry_.emplace_back(std::max(sent_ms + window, expiry_.empty() ? 0 : expiry_.back().first),
                       seen);
  return absl::OkStatus();
}

}  // namespace gangrun::rpc
