#include "rpc/call_auth.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/message.h>
#include <grpcpp/impl/codegen/client_unary_call.h>
#include <grpcpp/impl/codegen/rpc_method.h>

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gangrun/v1/call.grpc.pb.h"
#include "rpc/session_auth.h"

namespace gangrun::rpc {
namespace {

constexpr std::string_view kCallLabel = "gangrun/v3 call";
constexpr std::string_view kChallengeLabel = "gangrun/v3 challenge";
constexpr size_t kChallengeMacBytes = 16;
// serial, milliseconds since the server's epoch, MAC: 8 + 8 + 16 bytes, in hex.
constexpr size_t kChallengeHexChars = 2 * (8 + 8 + kChallengeMacBytes);
// The longest a channel waits for a challenge before its call goes without one (and fails).
constexpr std::chrono::seconds kChallengeWait{10};

std::string Uint64Bytes(uint64_t value) {
  std::string bytes(8, '\0');
  for (int i = 7; i >= 0; --i, value >>= 8) bytes[i] = static_cast<char>(value & 0xff);
  return bytes;
}

uint64_t BytesUint64(std::string_view bytes) {
  uint64_t value = 0;
  for (char c : bytes.substr(0, 8)) value = (value << 8) | static_cast<unsigned char>(c);
  return value;
}

std::string CallMac(std::string_view key, std::string_view challenge, std::string_view number,
                    std::string_view method, const std::string* request) {
  // A call with a request and one without are told apart (a stream's "" is not an empty body).
  return absl::BytesToHexString(
      Mac(key, {kCallLabel, challenge, number, method, request != nullptr ? "request" : "stream",
                request != nullptr ? *request : ""}));
}

// What a channel's calls share: the challenge they number their calls on.
struct ChannelChallenge {
  common::Mutex mu;
  std::string challenge ABSL_GUARDED_BY(mu);
  std::chrono::steady_clock::time_point asked ABSL_GUARDED_BY(mu);
  uint64_t number ABSL_GUARDED_BY(mu) = 0;
};

const std::string& ChallengeMethod() {
  static const std::string* path = new std::string(MethodPath<v1::CallAuth>("Challenge"));
  return *path;
}

class Interceptor : public grpc::experimental::Interceptor {
 public:
  Interceptor(const std::string& token, std::shared_ptr<ChannelChallenge> shared,
              grpc::experimental::ClientRpcInfo* info)
      : token_(token), shared_(std::move(shared)), info_(info) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    using grpc::experimental::InterceptionHookPoints;
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      // A unary or server-streaming call sends its one request in the same batch.
      std::optional<std::string> request;
      if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_MESSAGE)) {
        if (const void* message = methods->GetSendMessage()) {
          request = RequestBytes(*static_cast<const google::protobuf::Message*>(message));
        }
      }
      auto [challenge, number] = Next();
      methods->GetSendInitialMetadata()->insert(
          {"authorization", CallCredential(token_, challenge, number, info_->method(),
                                           request ? &*request : nullptr)});
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_STATUS)) {
      // A refusal, or a server that went away (a new one may be there next): ask anew.
      const grpc::Status* status = methods->GetRecvStatus();
      if (status != nullptr && (status->error_code() == grpc::StatusCode::UNAUTHENTICATED ||
                                status->error_code() == grpc::StatusCode::UNAVAILABLE)) {
        common::MutexLock lock(&shared_->mu);
        shared_->challenge.clear();
      }
    }
    methods->Proceed();
  }

 private:
  // The channel's challenge (asked for when it has none or it is kChallengeReuse old) and
  // this call's number on it.
  std::pair<std::string, uint64_t> Next() {
    common::MutexLock lock(&shared_->mu);
    const auto now = std::chrono::steady_clock::now();
    if (shared_->challenge.empty() || now - shared_->asked >= kChallengeReuse) {
      shared_->challenge = Ask();
      shared_->asked = now;
      shared_->number = 0;
    }
    return {shared_->challenge, ++shared_->number};
  }

  // CallAuth.Challenge on the call's own channel, waiting no longer than the call may. A
  // server that cannot be reached gives none; the call then fails as it would anyway.
  std::string Ask() {
    grpc::ClientContext context;
    auto deadline = std::chrono::system_clock::now() + kChallengeWait;
    if (info_->client_context() != nullptr) {
      deadline = std::min(deadline, info_->client_context()->deadline());
    }
    context.set_deadline(deadline);
    static const grpc::internal::RpcMethod method(ChallengeMethod().c_str(),
                                                  grpc::internal::RpcMethod::NORMAL_RPC);
    v1::ChallengeRequest request;
    v1::ChallengeReply reply;
    const grpc::Status status =
        grpc::internal::BlockingUnaryCall(info_->channel(), method, &context, request, &reply);
    return status.ok() ? reply.challenge() : "";
  }

  const std::string& token_;
  std::shared_ptr<ChannelChallenge> shared_;
  grpc::experimental::ClientRpcInfo* info_;
};

class InterceptorFactory : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit InterceptorFactory(std::string token) : token_(std::move(token)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo* info) override {
    // The challenge itself goes without a credential.
    if (info->method() == nullptr || info->method() == ChallengeMethod()) return nullptr;
    return new Interceptor(token_, shared_, info);
  }

 private:
  std::string token_;
  std::shared_ptr<ChannelChallenge> shared_ = std::make_shared<ChannelChallenge>();
};

}  // namespace

class CallAuthenticator::Service : public v1::CallAuth::CallbackService {
 public:
  explicit Service(CallAuthenticator& auth) : auth_(auth) {}
  grpc::ServerUnaryReactor* Challenge(grpc::CallbackServerContext* context,
                                      const v1::ChallengeRequest*,
                                      v1::ChallengeReply* reply) override {
    reply->set_challenge(auth_.NewChallenge(std::chrono::steady_clock::now()));
    auto* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

 private:
  CallAuthenticator& auth_;
};

std::string RequestBytes(const google::protobuf::Message& request) {
  std::string bytes;
  google::protobuf::io::StringOutputStream stream(&bytes);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  request.SerializeToCodedStream(&coded);
  coded.Trim();
  return bytes;
}

std::string CallCredential(std::string_view token, std::string_view challenge, uint64_t number,
                           std::string_view method, const std::string* request) {
  const std::string number_text = std::to_string(number);
  return std::string(kCallAuthScheme) + " c=" + std::string(challenge) + ",k=" + number_text +
         ",m=" + CallMac(TokenKey(token), challenge, number_text, method, request);
}

std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface> CallAuthInterceptor(
    std::string token) {
  if (token.empty()) return nullptr;
  return std::make_unique<InterceptorFactory>(std::move(token));
}

CallAuthenticator::CallAuthenticator(std::string token)
    : token_(std::move(token)),
      secret_(RandomBytes(32)),
      epoch_(std::chrono::steady_clock::now()),
      service_(std::make_unique<Service>(*this)) {}

CallAuthenticator::~CallAuthenticator() = default;

grpc::Service* CallAuthenticator::service() { return service_.get(); }

const std::string& CallAuthenticator::Key() {
  std::call_once(key_once_, [this] { key_ = TokenKey(token_); });
  return key_;
}

std::string CallAuthenticator::NewChallenge(std::chrono::steady_clock::time_point now) {
  uint64_t serial;
  {
    common::MutexLock lock(&mu_);
    serial = next_serial_++;
  }
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - epoch_).count();
  const std::string body = Uint64Bytes(serial) + Uint64Bytes(static_cast<uint64_t>(ms));
  return absl::BytesToHexString(
      body + Mac(secret_, {kChallengeLabel, body}).substr(0, kChallengeMacBytes));
}

size_t CallAuthenticator::ChallengesInUse() {
  common::MutexLock lock(&mu_);
  return in_use_.size();
}

absl::Status CallAuthenticator::Check(const grpc::ServerContextBase& context,
                                      std::string_view method,
                                      const google::protobuf::Message* request) {
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  const std::string_view credential = it == metadata.end()
                                          ? std::string_view()
                                          : std::string_view(it->second.data(), it->second.size());
  // Serialized only when there is a credential to check it against.
  std::optional<std::string> bytes;
  if (request != nullptr && !credential.empty() && !token_.empty()) bytes = RequestBytes(*request);
  return CheckCredential(credential, method, bytes ? &*bytes : nullptr,
                         std::chrono::steady_clock::now());
}

absl::Status CallAuthenticator::CheckCredential(std::string_view credential,
                                                std::string_view method, const std::string* request,
                                                std::chrono::steady_clock::time_point now) {
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
  absl::string_view challenge, number_text, mac;
  for (absl::string_view field : absl::StrSplit(rest, ',')) {
    if (absl::ConsumePrefix(&field, "c=")) challenge = field;
    if (absl::ConsumePrefix(&field, "k=")) number_text = field;
    if (absl::ConsumePrefix(&field, "m=")) mac = field;
  }
  if (challenge.empty()) {
    // The channel could not ask (the server was not there yet): a retry asks again.
    return absl::UnavailableError("the call carries no challenge of this server; ask again");
  }
  uint64_t number = 0;
  if (challenge.size() != kChallengeHexChars || !absl::SimpleAtoi(number_text, &number) ||
      number == 0 || mac.empty()) {
    return absl::UnauthenticatedError("the call's credential is malformed");
  }
  const std::string_view challenge_text(challenge.data(), challenge.size());
  if (!MacsEqual(
          std::string_view(mac.data(), mac.size()),
          CallMac(Key(), challenge_text, std::string_view(number_text.data(), number_text.size()),
                  method, request))) {
    return absl::UnauthenticatedError("wrong or missing token");
  }
  // The caller knows the token; is the challenge this server's, and recent?
  const std::string raw = absl::HexStringToBytes(challenge);
  const std::string_view body = std::string_view(raw).substr(0, 16);
  if (!MacsEqual(std::string_view(raw).substr(16),
                 Mac(secret_, {kChallengeLabel, body}).substr(0, kChallengeMacBytes))) {
    return absl::UnauthenticatedError(
        "the call was made for another server (or before this one started): a replay");
  }
  const auto made = epoch_ + std::chrono::milliseconds(BytesUint64(body.substr(8)));
  if (now - made > kChallengeLife) {
    return absl::UnavailableError("the call's challenge is more than " +
                                  std::to_string(kChallengeLife.count()) + " s old; ask again");
  }
  common::MutexLock lock(&mu_);
  return Remember(BytesUint64(body.substr(0, 8)), number);
}

absl::Status CallAuthenticator::Remember(uint64_t serial, uint64_t number) {
  auto it = in_use_.find(serial);
  if (it == in_use_.end()) {
    if (serial <= forgotten_up_to_) {
      return absl::UnavailableError(
          "the call's challenge was forgotten (too many in use); ask again");
    }
    if (in_use_.size() >= kMaxChallengesInUse) {
      forgotten_up_to_ = std::max(forgotten_up_to_, in_use_.begin()->first);
      in_use_.erase(in_use_.begin());
      if (serial <= forgotten_up_to_) {
        return absl::UnavailableError(
            "the call's challenge was forgotten (too many in use); ask again");
      }
    }
    it = in_use_.emplace(serial, InUse{}).first;
  }
  InUse& use = it->second;
  if (number > use.highest) {
    const uint64_t shift = number - use.highest;
    use.seen = shift >= kReplayWindow ? std::bitset<kReplayWindow>() : use.seen << shift;
    use.highest = number;
    use.seen.set(0);
    return absl::OkStatus();
  }
  const uint64_t behind = use.highest - number;
  if (behind >= kReplayWindow) {
    return absl::UnauthenticatedError("the call replays an earlier one (or came far too late)");
  }
  if (use.seen.test(behind)) return absl::UnauthenticatedError("the call replays an earlier one");
  use.seen.set(behind);
  return absl::OkStatus();
}

}  // namespace gangrun::rpc
