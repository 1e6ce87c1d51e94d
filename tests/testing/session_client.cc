#include "tests/testing/session_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

namespace gangrun::testing {

int DialLoopback(int port, std::chrono::seconds receive_timeout) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval timeout{static_cast<time_t>(receive_timeout.count()), 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

bool SendAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

bool ClosedByPeer(int fd) {
  char buffer[256];
  while (true) {
    ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n == 0) return true;
    if (n < 0) return errno == ECONNRESET;
  }
}

std::pair<int, std::string> ReadFrame(int fd) {
  auto read_exactly = [fd](char* to, size_t size) {
    while (size > 0) {
      ssize_t n = recv(fd, to, size, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      to += n;
      size -= static_cast<size_t>(n);
    }
    return true;
  };
  unsigned char header[rpc::kFrameHeaderBytes];
  if (!read_exactly(reinterpret_cast<char*>(header), sizeof(header))) return {0, ""};
  const size_t length = (size_t{header[0]} << 24) | (size_t{header[1]} << 16) |
                        (size_t{header[2]} << 8) | size_t{header[3]};
  std::string payload(length, '\0');
  if (!read_exactly(payload.data(), length)) return {0, ""};
  return {header[4], payload};
}

std::string Frame(rpc::FrameType type, const google::protobuf::MessageLite& message) {
  std::string out;
  rpc::AppendFrame(out, type, message.SerializeAsString());
  return out;
}

SessionClient::SessionClient(int port, std::chrono::seconds receive_timeout)
    : fd_(DialLoopback(port, receive_timeout)) {}

SessionClient::~SessionClient() {
  if (fd_ >= 0) close(fd_);
}

bool SessionClient::Send(std::string_view bytes) {
  sent_.append(bytes);
  return fd_ >= 0 && SendAll(fd_, bytes);
}

namespace {

bool SendEach(SessionClient& client, const std::string& bytes, bool byte_by_byte) {
  if (!byte_by_byte) return client.Send(bytes);
  for (char byte : bytes) {
    if (!client.Send(std::string_view(&byte, 1))) return false;
  }
  return true;
}

}  // namespace

SessionClient::Opened SessionClient::Open(const std::string& token, uint64_t session,
                                          const std::string& key, uint64_t acked,
                                          bool byte_by_byte) {
  Opened opened;
  rpc::Handshake handshake;
  handshake.node_nonce = rpc::RandomBytes(rpc::kNonceBytes);
  handshake.resume = session;
  v1::SessionHello hello;
  hello.set_nonce(handshake.node_nonce);
  hello.set_resume(session);
  hello.set_has_token(!token.empty());
  if (!SendEach(*this, std::string(rpc::kSessionMagic) + Frame(rpc::FrameType::kHello, hello),
                byte_by_byte)) {
    return opened;
  }
  auto [type, payload] = ReadFrame(fd_);
  if (type == static_cast<int>(rpc::FrameType::kRefused)) {
    opened.refused.ParseFromString(payload);
    return opened;
  }
  v1::SessionChallenge challenge;
  if (type != static_cast<int>(rpc::FrameType::kChallenge) || !challenge.ParseFromString(payload)) {
    return opened;
  }
  handshake.scheduler_nonce = challenge.nonce();
  handshake.run_id = challenge.run_id();
  const std::string token_key = rpc::TokenKey(token);
  const std::string proof_key = session != 0 ? key : token_key;
  v1::SessionOpen open;
  open.set_proof(rpc::NodeProof(proof_key, handshake));
  open.set_acked(acked);
  open.set_can_keep_quiet(can_keep_quiet_);
  if (!SendEach(*this, Frame(rpc::FrameType::kOpen, open), byte_by_byte)) return opened;
  const rpc::FrameKeys keys = rpc::DeriveFrameKeys(proof_key, handshake);
  sealer_.emplace(keys.node_to_scheduler);
  opener_.emplace(keys.scheduler_to_node);
  std::tie(type, payload) = ReadFrame(fd_);
  if (type == static_cast<int>(rpc::FrameType::kRefused)) {
    opened.refused.ParseFromString(payload);
    return opened;
  }
  std::string_view body;
  v1::SessionAccepted accepted;
  if (type != static_cast<int>(rpc::FrameType::kAccepted) ||
      !opener_->Open(rpc::FrameType::kAccepted, payload, &body) ||
      !accepted.ParseFromArray(body.data(), static_cast<int>(body.size()))) {
    return opened;
  }
  opened.accepted = true;
  opened.session = accepted.session();
  opened.acked = accepted.acked();
  opened.quiet_watermark = accepted.quiet_watermark();
  opened.quiet_pong_timeout_ms = accepted.quiet_pong_timeout_ms();
  opened.key = session != 0 ? key : rpc::ResumeKey(token_key, handshake);
  opened.scheduler_proven =
      rpc::MacsEqual(accepted.proof(), rpc::SchedulerProof(token_key, handshake));
  return opened;
}

bool SessionClient::SendEvent(v1::NodeEvent event, std::optional<uint64_t> seq, bool byte_by_byte) {
  if (!sealer_) return false;
  event.set_seq(seq.value_or(next_seq_));
  next_seq_ = event.seq() + 1;
  std::string frame;
  rpc::AppendFrame(frame, rpc::FrameType::kEvent,
                   sealer_->Seal(rpc::FrameType::kEvent, event.SerializeAsString()));
  return SendEach(*this, frame, byte_by_byte);
}

bool SessionClient::SendPing(uint64_t acked, bool sparse_pongs, size_t padding) {
  if (!sealer_) return false;
  v1::SessionAck ack;
  ack.set_acked(acked);
  ack.set_sparse_pongs(sparse_pongs);
  if (padding > 0) ack.set_padding(std::string(padding, '\0'));
  std::string frame;
  rpc::AppendFrame(frame, rpc::FrameType::kPing,
                   sealer_->Seal(rpc::FrameType::kPing, ack.SerializeAsString()));
  return Send(frame);
}

bool SessionClient::SendTick(bool counted) {
  if (!sealer_) return false;
  if (counted) sealer_->Skip();
  std::string frame;
  rpc::AppendFrame(frame, rpc::FrameType::kTick, {});
  return Send(frame);
}

std::pair<int, std::string> SessionClient::ReadSealed() {
  auto [type, payload] = ReadFrame(fd_);
  std::string_view body;
  if (type == 0 || !opener_ || !opener_->Open(static_cast<rpc::FrameType>(type), payload, &body)) {
    return {0, ""};
  }
  return {type, std::string(body)};
}

std::optional<v1::NodeCommand> SessionClient::ReadCommand() {
  while (true) {
    auto [type, body] = ReadSealed();
    if (type == 0) return std::nullopt;
    if (type != static_cast<int>(rpc::FrameType::kCommand)) continue;
    v1::NodeCommand command;
    if (!command.ParseFromString(body)) return std::nullopt;
    return command;
  }
}

v1::NodeEvent TestJoin(int node_rank) {
  v1::NodeEvent join;
  join.mutable_join()->set_node_name("n" + std::to_string(node_rank));
  join.mutable_join()->set_host_address("127.0.0.1");
  join.mutable_join()->set_free_port(40000 + node_rank);
  join.mutable_join()->set_local_worker_num(1);
  join.mutable_join()->set_node_rank(node_rank);
  return join;
}

}  // namespace gangrun::testing
