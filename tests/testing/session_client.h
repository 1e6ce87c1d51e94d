#pragma once
// A node session driven by hand, byte by byte if need be: a blocking TCP client that speaks
// gangrun's session framing (docs/WIRE.md) with the real codec and crypto, and records every
// byte it sends, so that tests can act as hostile peers (replays, forged frames, floods,
// partial frames) against a real scheduler. A 10 s receive timeout unless told otherwise: a
// broken server fails the test, it does not hang it.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "gangrun/v1/session.pb.h"
#include "rpc/frame_format.h"
#include "rpc/session_auth.h"

namespace gangrun::testing {

// A blocking TCP connection to 127.0.0.1:`port` whose reads give up after `receive_timeout`;
// -1 when it cannot connect.
int DialLoopback(int port, std::chrono::seconds receive_timeout = std::chrono::seconds(10));
bool SendAll(int fd, std::string_view bytes);
// True when the peer closes the connection (EOF or a reset) within the receive timeout;
// anything it sends first is skipped.
bool ClosedByPeer(int fd);
// Reads one frame: its type and payload; type 0 when the connection ended first.
std::pair<int, std::string> ReadFrame(int fd);
// One frame's bytes.
std::string Frame(rpc::FrameType type, const google::protobuf::MessageLite& message);

class SessionClient {
 public:
  explicit SessionClient(int port, std::chrono::seconds receive_timeout = std::chrono::seconds(10));
  ~SessionClient();
  SessionClient(const SessionClient&) = delete;
  SessionClient& operator=(const SessionClient&) = delete;

  int fd() const { return fd_; }
  bool connected() const { return fd_ >= 0; }
  // Every byte sent so far, in order (a recording of the session as a wire tap sees it).
  const std::string& sent() const { return sent_; }
  bool Send(std::string_view bytes);

  struct Opened {
    bool accepted = false;
    v1::SessionRefused refused;  // when not accepted and the scheduler said why
    uint64_t session = 0;
    std::string key;  // the session's resume key
    uint64_t acked = 0;
    uint32_t quiet_watermark = 0;  // the scheduler asked this client to keep quiet
    uint32_t quiet_pong_timeout_ms = 0;
    bool scheduler_proven = false;  // the acceptance carried the scheduler's proof of the token
  };
  // The next Open says the client can keep quiet (docs/WIRE.md).
  void CanKeepQuiet() { can_keep_quiet_ = true; }
  // The whole handshake with `token` (a new session when `session` is 0, else a resume with
  // `key`). With `byte_by_byte` every byte goes out on its own.
  Opened Open(const std::string& token, uint64_t session = 0, const std::string& key = "",
              uint64_t acked = 0, bool byte_by_byte = false);
  // After Open: a sealed event (its seq set to the next one unless `seq` is given), a ping.
  bool SendEvent(v1::NodeEvent event, std::optional<uint64_t> seq = std::nullopt,
                 bool byte_by_byte = false);
  bool SendPing(uint64_t acked, bool sparse_pongs = false, size_t padding = 0);
  // A quiet session's tick; `counted` false sends one the sealer does not count (a tick
  // added on the way, as the scheduler's tag index sees it).
  bool SendTick(bool counted = true);
  // The next sealed frame, opened: its type and body; type 0 when the connection ended or the
  // tag did not match.
  std::pair<int, std::string> ReadSealed();
  // The next command (pongs skipped); nullopt when the connection ended first.
  std::optional<v1::NodeCommand> ReadCommand();

 private:
  int fd_ = -1;
  std::string sent_;
  std::optional<rpc::FrameSealer> sealer_;
  std::optional<rpc::FrameOpener> opener_;
  uint64_t next_seq_ = 1;
  bool can_keep_quiet_ = false;
};

// A join request for a 2-worker test job: node "n<rank>" with one worker.
v1::NodeEvent TestJoin(int node_rank);

}  // namespace gangrun::testing
