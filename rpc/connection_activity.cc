#include "rpc/connection_activity.h"

#include <arpa/inet.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/numbers.h"

namespace gangrun::rpc {
namespace {

constexpr int kTcpEstablished = 1;  // TCP_ESTABLISHED in the kernel's enumeration of states

std::string Format(int family, const void* address, int port) {
  char text[INET6_ADDRSTRLEN] = {};
  if (family == AF_INET6) {
    const auto* v6 = static_cast<const in6_addr*>(address);
    if (!IN6_IS_ADDR_V4MAPPED(v6)) {
      if (inet_ntop(AF_INET6, v6, text, sizeof(text)) == nullptr) return "";
      return "[" + std::string(text) + "]:" + std::to_string(port);
    }
    address = &v6->s6_addr[12];
  }
  if (inet_ntop(AF_INET, address, text, sizeof(text)) == nullptr) return "";
  return std::string(text) + ":" + std::to_string(port);
}

// The connection's tcp_info, if the message carries one (INET_DIAG_INFO).
const tcp_info* InfoOf(const nlmsghdr* header, const inet_diag_msg* diag, size_t* length) {
  const int attributes_length =
      static_cast<int>(header->nlmsg_len) - static_cast<int>(NLMSG_LENGTH(sizeof(*diag)));
  int remaining = attributes_length;
  for (const auto* attribute = reinterpret_cast<const rtattr*>(diag + 1);
       RTA_OK(attribute, remaining); attribute = RTA_NEXT(attribute, remaining)) {
    if (attribute->rta_type == INET_DIAG_INFO) {
      *length = RTA_PAYLOAD(attribute);
      return static_cast<const tcp_info*>(RTA_DATA(attribute));
    }
  }
  return nullptr;
}

absl::Status Error(const std::string& what) {
  return absl::UnavailableError(what + ": " + std::strerror(errno));
}

// A sock_diag socket; the kernel answers at once, but a read never blocks the scheduler's
// strand for more than a second whatever happens.
int OpenNetlink() {
  const int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (fd < 0) return -1;
  timeval timeout = {1, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  return fd;
}

}  // namespace

ConnectionActivityReader::ConnectionActivityReader(int local_port)
    : port_(local_port), fd_(OpenNetlink()) {}

ConnectionActivityReader::~ConnectionActivityReader() {
  if (fd_ >= 0) close(fd_);
}

absl::StatusOr<ConnectionActivity> ConnectionActivityReader::Read() {
  if (port_ <= 0 || port_ > 65535) {
    return absl::InvalidArgumentError("not a port: " + std::to_string(port_));
  }
  if (fd_ < 0) {
    fd_ = OpenNetlink();
    if (fd_ < 0) return Error("cannot open a sock_diag netlink socket");
  }
  ConnectionActivity activity;
  for (int family : {AF_INET, AF_INET6}) {
    absl::Status dumped = Dump(family, activity);
    if (!dumped.ok()) {
      // A half-read answer would confuse the next request: start again on a new socket.
      close(fd_);
      fd_ = -1;
      return dumped;
    }
  }
  return activity;
}

// Dumps one address family's established connections on the port into `out`.
absl::Status ConnectionActivityReader::Dump(int family, ConnectionActivity& out) {
  const int port = port_;
  // The kernel filters by local port: "sport >= port && sport <= port" in inet_diag's
  // bytecode (a jump past the program's end rejects the socket).
  struct Request {
    nlmsghdr header;
    inet_diag_req_v2 request;
    nlattr filter_attribute;
    inet_diag_bc_op filter[4];
  } message = {};
  const auto port16 = static_cast<uint16_t>(port);
  message.filter[0] = {INET_DIAG_BC_S_GE, 8, 20};
  message.filter[1] = {0, 0, port16};
  message.filter[2] = {INET_DIAG_BC_S_LE, 8, 12};
  message.filter[3] = {0, 0, port16};
  message.filter_attribute.nla_type = INET_DIAG_REQ_BYTECODE;
  message.filter_attribute.nla_len = sizeof(nlattr) + sizeof(message.filter);
  message.header.nlmsg_len = sizeof(message);
  message.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  message.header.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  message.request.sdiag_family = static_cast<uint8_t>(family);
  message.request.sdiag_protocol = IPPROTO_TCP;
  message.request.idiag_states = 1u << kTcpEstablished;
  message.request.idiag_ext = 1u << (INET_DIAG_INFO - 1);
  sockaddr_nl kernel = {};
  kernel.nl_family = AF_NETLINK;
  if (sendto(fd_, &message, sizeof(message), 0, reinterpret_cast<sockaddr*>(&kernel),
             sizeof(kernel)) != static_cast<ssize_t>(sizeof(message))) {
    return Error("cannot send a sock_diag request");
  }
  std::vector<char> buffer(64 * 1024);
  while (true) {
    const ssize_t received = recv(fd_, buffer.data(), buffer.size(), 0);
    if (received < 0 && errno == EINTR) continue;
    if (received <= 0) return Error("cannot read the sock_diag answer");
    int remaining = static_cast<int>(received);
    for (auto* header = reinterpret_cast<const nlmsghdr*>(buffer.data());
         NLMSG_OK(header, remaining); header = NLMSG_NEXT(header, remaining)) {
      if (header->nlmsg_type == NLMSG_DONE) return absl::OkStatus();
      if (header->nlmsg_type == NLMSG_ERROR) {
        const auto* error = static_cast<const nlmsgerr*>(NLMSG_DATA(header));
        errno = -error->error;
        return Error("the kernel refused a sock_diag request");
      }
      if (header->nlmsg_len < NLMSG_LENGTH(sizeof(inet_diag_msg))) continue;
      const auto* diag = static_cast<const inet_diag_msg*>(NLMSG_DATA(header));
      if (ntohs(diag->id.idiag_sport) != port) continue;  // the filter already did this
      size_t length = 0;
      const tcp_info* info = InfoOf(header, diag, &length);
      // tcpi_last_data_recv has been in tcp_info since Linux 2.6.
      if (info == nullptr ||
          length < offsetof(tcp_info, tcpi_last_data_recv) + sizeof(info->tcpi_last_data_recv)) {
        continue;
      }
      const std::string remote =
          Format(diag->idiag_family, diag->id.idiag_dst, ntohs(diag->id.idiag_dport));
      if (!remote.empty()) out[remote] = std::chrono::milliseconds(info->tcpi_last_data_recv);
    }
  }
}

std::string PeerEndpoint(const std::string& grpc_peer) {
  std::string text;
  int family = 0;
  if (grpc_peer.rfind("ipv4:", 0) == 0) {
    family = AF_INET;
  } else if (grpc_peer.rfind("ipv6:", 0) == 0) {
    family = AF_INET6;
  } else {
    return "";
  }
  // URI escapes (gRPC writes "ipv6:%5B::1%5D:80" in some versions).
  const std::string rest = grpc_peer.substr(5);
  for (size_t i = 0; i < rest.size(); ++i) {
    if (rest[i] == '%' && i + 2 < rest.size() && rest.compare(i, 3, "%5B") == 0) {
      text += '[';
      i += 2;
    } else if (rest[i] == '%' && i + 2 < rest.size() && rest.compare(i, 3, "%5D") == 0) {
      text += ']';
      i += 2;
    } else {
      text += rest[i];
    }
  }
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos) return "";
  int port = 0;
  if (!absl::SimpleAtoi(text.substr(colon + 1), &port) || port <= 0 || port > 65535) return "";
  std::string host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  host = host.substr(0, host.find('%'));  // a link-local address's zone
  in6_addr address = {};
  if (inet_pton(family, host.c_str(), &address) != 1) return "";
  return Format(family, &address, port);
}

}  // namespace gangrun::rpc
