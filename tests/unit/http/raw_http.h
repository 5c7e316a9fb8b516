#pragma once
// Test helper: speaks raw bytes over TCP, for requests no well-behaved client would send.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <string>
#include <string_view>

namespace gpumeter::testing {

class RawConnection {
 public:
  explicit RawConnection(int port, const char* ip = "127.0.0.1") {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    timeval tv{5, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    ::inet_pton(AF_INET, ip, &addr.sin_addr);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  }
  ~RawConnection() {
    if (fd_ >= 0) ::close(fd_);
  }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  bool connected() const { return connected_; }

  bool send(std::string_view data) {
    while (!data.empty()) {
      ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  // Reads one response: the headers, then Content-Length bytes of body (none for HEAD). The client
  // does not half-close: cpp-httplib treats a half-closed peer as gone and answers nothing.
  std::string read_response(bool head = false) {
    std::string out;
    size_t header_end;
    while ((header_end = out.find("\r\n\r\n")) == std::string::npos) {
      if (!read_more(out)) return out;
    }
    header_end += 4;
    size_t body = 0;
    const size_t cl = out.find("Content-Length: ");
    if (!head && cl != std::string::npos && cl < header_end) body = std::stoul(out.substr(cl + 16));
    while (out.size() < header_end + body) {
      if (!read_more(out)) break;
    }
    return out;
  }

  // Reads until the server closes the connection (or 5 s pass without data).
  std::string read_until_close() {
    std::string out;
    while (read_more(out)) {
    }
    return out;
  }

 private:
  bool read_more(std::string& out) {
    char buf[8192];
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) return false;
    out.append(buf, static_cast<size_t>(n));
    return true;
  }

  int fd_ = -1;
  bool connected_ = false;
};

// The status code of the first response in `raw`, or 0 when there is none.
inline int first_status(std::string_view raw) {
  if (!raw.starts_with("HTTP/1.1 ") || raw.size() < 12) return 0;
  return std::stoi(std::string(raw.substr(9, 3)));
}

}  // namespace gpumeter::testing
