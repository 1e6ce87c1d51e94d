#include "node/progress_channel.h"

#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cstring>

#include "common/logging.h"
#include "node/progress.h"

namespace gangrun::node {

using boost::asio::local::datagram_protocol;

ProgressChannel::ProgressChannel(boost::asio::io_context& io, std::string dir, Handler on_datagram)
    : io_(io), dir_(std::move(dir)), on_datagram_(std::move(on_datagram)), window_(io) {}

ProgressChannel::~ProgressChannel() {
  *alive_ = false;
  for (size_t i = 0; i < slots_.size(); ++i) {
    boost::system::error_code ignored;
    if (slots_[i].socket) slots_[i].socket->close(ignored);
    unlink(PathFor(static_cast<int>(i)).c_str());
  }
}

std::string ProgressChannel::PathFor(int slot) const { return dir_ + "/p" + std::to_string(slot); }

absl::Status ProgressChannel::Open(int slots) {
  for (int i = static_cast<int>(slots_.size()); i < slots; ++i) {
    const std::string path = PathFor(i);
    unlink(path.c_str());
    auto socket = std::make_unique<datagram_protocol::socket>(io_);
    boost::system::error_code ec;
    socket->open(datagram_protocol(), ec);
    if (!ec) socket->bind(datagram_protocol::endpoint(path), ec);
    if (!ec) socket->non_blocking(true, ec);
    if (!ec) {
      const int on = 1;
      if (setsockopt(socket->native_handle(), SOL_SOCKET, SO_PASSCRED, &on, sizeof(on)) != 0) {
        ec = boost::system::error_code(errno, boost::system::system_category());
      }
    }
    if (ec) {
      return absl::InternalError("cannot bind the progress socket " + path + ": " + ec.message());
    }
    Slot slot;
    slot.socket = std::move(socket);
    slots_.push_back(std::move(slot));
    Wait(i);
  }
  return absl::OkStatus();
}

void ProgressChannel::Wait(int slot) {
  slots_[slot].socket->async_wait(datagram_protocol::socket::wait_read,
                                  [this, slot, alive = alive_](boost::system::error_code ec) {
                                    if (!*alive || ec) return;
                                    Drain(slot);
                                  });
}

void ProgressChannel::ReadNow(int slot) {
  if (slot < 0 || slot >= static_cast<int>(slots_.size()) || slots_[slot].paused) return;
  ReadAvailable(slot);  // the pending wait stays armed
}

void ProgressChannel::Drain(int slot) {
  if (!ReadAvailable(slot)) return;
  Slot& s = slots_[slot];
  if (s.read_this_second >= kBudgetPerSecond) {
    s.paused = true;
    ResumeAfter();
    return;
  }
  Wait(slot);
}

bool ProgressChannel::ReadAvailable(int slot) {
  Slot& s = slots_[slot];
  char buffer[kMaxProgressDatagram + 1];
  const int fd = s.socket->native_handle();
  const auto now = std::chrono::steady_clock::now();
  if (now - s.second_started >= std::chrono::seconds(1)) {
    s.second_started = now;
    s.read_this_second = 0;
  }
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(ucred))];
  while (s.read_this_second < kBudgetPerSecond) {
    iovec iov = {buffer, sizeof(buffer)};
    msghdr message = {};
    message.msg_iov = &iov;
    message.msg_iovlen = 1;
    message.msg_control = control;
    message.msg_controllen = sizeof(control);
    ssize_t n = recvmsg(fd, &message, MSG_TRUNC);
    if (n < 0) {
      if (errno == EINTR) continue;
      break;  // EAGAIN: drained
    }
    pid_t sender = 0;
    for (cmsghdr* c = CMSG_FIRSTHDR(&message); c != nullptr; c = CMSG_NXTHDR(&message, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS) {
        ucred credentials;
        std::memcpy(&credentials, CMSG_DATA(c), sizeof(credentials));
        sender = credentials.pid;
      }
    }
    ++s.read_this_second;
    ++received_;
    // A cut datagram keeps one byte too many, so that it is rejected as too long.
    const size_t length = std::min(static_cast<size_t>(n), sizeof(buffer));
    auto alive = alive_;
    on_datagram_(slot, sender, absl::string_view(buffer, length));
    if (!*alive) return false;
  }
  return true;
}

void ProgressChannel::ResumeAfter() {
  if (window_armed_) return;
  window_armed_ = true;
  window_.expires_after(std::chrono::seconds(1));
  window_.async_wait([this, alive = alive_](boost::system::error_code ec) {
    if (!*alive || ec) return;
    window_armed_ = false;
    for (size_t i = 0; i < slots_.size(); ++i) {
      if (!slots_[i].paused) continue;
      slots_[i].paused = false;
      Drain(static_cast<int>(i));
      if (!*alive) return;
    }
  });
}

}  // namespace gangrun::node
