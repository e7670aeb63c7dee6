#include "transport/net/internal/shared.h"

#include <limits.h>
#include <sys/socket.h>

#include <cstdlib>
#include <cstring>

namespace ringo::transport::net::shared {

Notice ToNotice(const base::Status& why, int self_rank, uint64_t seq) {
  FaultNotice n;
  WriteFaultNotice(n, why, self_rank, seq);
  Notice w{};
  w.origin = n.origin;
  w.code = n.code;
  w.seq = n.seq;
  std::memcpy(w.text, n.text, sizeof(w.text));
  return w;
}

base::Status FromNotice(const Notice& w, const std::string& where, int peer_rank) {
  FaultNotice n;
  n.origin = w.origin;
  n.code = w.code;
  n.seq = w.seq;
  std::memcpy(n.text, w.text, sizeof(n.text));
  n.text[sizeof(n.text) - 1] = '\0';
  n.set.store(1);
  return NoticeStatus(n, where, peer_rank, INT_MAX);
}

void PutAddress(const SocketAddress& a, uint16_t* family, uint16_t* port, uint8_t addr[16]) {
  *family = a.storage.ss_family;
  std::memset(addr, 0, 16);
  if (*family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&a.storage);
    *port = in->sin_port;
    std::memcpy(addr, &in->sin_addr, 4);
  } else {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&a.storage);
    *port = in6->sin6_port;
    std::memcpy(addr, &in6->sin6_addr, 16);
  }
}

SocketAddress GetAddress(uint16_t family, uint16_t port, const uint8_t addr[16]) {
  SocketAddress to;
  if (family == AF_INET) {
    auto* a = reinterpret_cast<sockaddr_in*>(&to.storage);
    a->sin_family = AF_INET;
    a->sin_port = port;
    std::memcpy(&a->sin_addr, addr, 4);
    to.length = sizeof(sockaddr_in);
  } else {
    auto* a = reinterpret_cast<sockaddr_in6*>(&to.storage);
    a->sin6_family = AF_INET6;
    a->sin6_port = port;
    std::memcpy(&a->sin6_addr, addr, 16);
    to.length = sizeof(sockaddr_in6);
  }
  return to;
}

std::string PeerAddressOf(int fd) {
  SocketAddress a;
  a.length = sizeof(a.storage);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&a.storage), &a.length) != 0) return "?";
  return a.ToString();
}

bool NameListSelects(const std::string& spec, const std::string& name, int port) {
  if (spec.empty()) return true;
  std::string list = spec;
  const bool exclude = list[0] == '^';
  if (exclude) list = list.substr(1);
  const bool exact = !list.empty() && list[0] == '=';
  if (exact) list = list.substr(1);
  bool matched = false;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = list.find(',', start);
    std::string item = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    int want_port = -1;
    const size_t colon = port >= 0 ? item.find(':') : std::string::npos;
    if (colon != std::string::npos) {
      want_port = std::atoi(item.c_str() + colon + 1);
      item = item.substr(0, colon);
    }
    if (!item.empty()) {
      const bool name_ok = exact ? name == item : name.compare(0, item.size(), item) == 0;
      matched = matched || (name_ok && (want_port < 0 || want_port == port));
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return exclude ? !matched : matched;
}

}  // namespace ringo::transport::net::shared
