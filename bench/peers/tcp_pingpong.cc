// The floor of a small message's round trip between two hosts: 8-byte
// ping-pongs over one TCP connection (TCP_NODELAY, the server echoes),
// timed one by one; prints the median and 10th/90th percentile round trip.
//   tcp_pingpong server PORT
//   tcp_pingpong client ADDRESS PORT [ROUNDS] [BYTES]
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

bool Exactly(int fd, char* p, size_t n, bool send_it) {
  while (n > 0) {
    const ssize_t k = send_it ? ::send(fd, p, n, MSG_NOSIGNAL) : ::recv(fd, p, n, 0);
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

void NoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

int Server(int port) {
  const int l = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (bind(l, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || listen(l, 1) != 0) {
    std::perror("tcp_pingpong: listen");
    return 1;
  }
  const int c = accept(l, nullptr, nullptr);
  NoDelay(c);
  std::vector<char> buf(1 << 20);
  uint64_t bytes = 0;
  if (!Exactly(c, reinterpret_cast<char*>(&bytes), sizeof(bytes), false) || bytes > buf.size()) return 1;
  while (Exactly(c, buf.data(), bytes, false) && Exactly(c, buf.data(), bytes, true)) {
  }
  return 0;
}

int Client(const char* host, int port, int rounds, uint64_t bytes) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(host, std::to_string(port).c_str(), &hints, &res) != 0) return 1;
  int c = -1;
  for (int tries = 0; tries < 100; ++tries) {  // the server may not be up yet
    c = socket(res->ai_family, SOCK_STREAM, 0);
    if (connect(c, res->ai_addr, res->ai_addrlen) == 0) break;
    close(c);
    c = -1;
    usleep(20000);
  }
  freeaddrinfo(res);
  if (c < 0) return 1;
  NoDelay(c);
  std::vector<char> buf(bytes, 'x');
  if (!Exactly(c, reinterpret_cast<char*>(&bytes), sizeof(bytes), true)) return 1;
  std::vector<double> us;
  for (int i = 0; i < rounds + rounds / 10; ++i) {
    const auto t = std::chrono::steady_clock::now();
    if (!Exactly(c, buf.data(), bytes, true) || !Exactly(c, buf.data(), bytes, false)) return 1;
    if (i >= rounds / 10) us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t).count());
  }
  std::sort(us.begin(), us.end());
  std::printf("round trip of %llu B: median %.2f us, p10 %.2f us, p90 %.2f us (%d rounds)\n",
              static_cast<unsigned long long>(bytes), us[us.size() / 2], us[us.size() / 10], us[us.size() * 9 / 10],
              rounds);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 3 && std::string(argv[1]) == "server") return Server(std::atoi(argv[2]));
  if (argc >= 4 && std::string(argv[1]) == "client") {
    return Client(argv[2], std::atoi(argv[3]), argc > 4 ? std::atoi(argv[4]) : 20000,
                  argc > 5 ? std::strtoull(argv[5], nullptr, 10) : 8);
  }
  std::fprintf(stderr, "usage: %s server PORT | client ADDRESS PORT [ROUNDS] [BYTES]\n", argv[0]);
  return 2;
}
