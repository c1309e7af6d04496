// HttpServer: see http_server.h.
#include "metrics/http_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstring>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace shardps {
namespace metrics {

namespace {

constexpr size_t kMaxHead = 8192;

std::string Response(int code, const char* reason, const std::string& content_type,
                     const std::string& body, bool head_only) {
  return absl::StrCat("HTTP/1.1 ", code, " ", reason, "\r\nContent-Type: ", content_type,
                      "\r\nContent-Length: ", body.size(), "\r\nConnection: close\r\n\r\n",
                      head_only ? "" : body);
}

// A connection, plain or TLS.
class Conn {
 public:
  explicit Conn(int fd) : fd_(fd) {}
  ~Conn() {
    if (ssl_ != nullptr) {
      SSL_shutdown(ssl_);
      SSL_free(ssl_);
    }
    if (ctx_ != nullptr) SSL_CTX_free(ctx_);
  }
  bool StartTls(const HttpServerOptions& options) {
    ctx_ = SSL_CTX_new(TLS_server_method());
    if (ctx_ == nullptr) return false;
    SSL_CTX_set_min_proto_version(ctx_, TLS1_2_VERSION);
    if (SSL_CTX_use_certificate_chain_file(ctx_, options.cert_file.c_str()) != 1 ||
        SSL_CTX_use_PrivateKey_file(ctx_, options.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
      return false;
    }
    if (options.client_auth) {
      if (SSL_CTX_load_verify_locations(ctx_, options.ca_file.c_str(), nullptr) != 1) {
        return false;
      }
      SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
    }
    ssl_ = SSL_new(ctx_);
    if (ssl_ == nullptr) return false;
    SSL_set_fd(ssl_, fd_);
    return SSL_accept(ssl_) == 1;
  }
  ssize_t Read(char* buffer, size_t size) {
    if (ssl_ != nullptr) return SSL_read(ssl_, buffer, static_cast<int>(size));
    return recv(fd_, buffer, size, 0);
  }
  bool Write(const std::string& data) {
    size_t done = 0;
    while (done < data.size()) {
      const ssize_t n =
          ssl_ != nullptr
              ? SSL_write(ssl_, data.data() + done, static_cast<int>(data.size() - done))
              : send(fd_, data.data() + done, data.size() - done, MSG_NOSIGNAL);
      if (n <= 0) return false;
      done += static_cast<size_t>(n);
    }
    return true;
  }

 private:
  const int fd_;
  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
};

}  // namespace

std::string HttpAnswer(const std::string& request_head,
                       const std::function<std::string()>& render) {
  const std::string line = request_head.substr(0, request_head.find("\r\n"));
  std::vector<std::string> parts = absl::StrSplit(line, ' ');
  if (parts.size() != 3 || !absl::StartsWith(parts[2], "HTTP/1.")) {
    return Response(400, "Bad Request", "text/plain", "bad request\n", false);
  }
  const bool head = parts[0] == "HEAD";
  if (parts[0] != "GET" && !head) {
    return Response(405, "Method Not Allowed", "text/plain", "only GET\n", false);
  }
  const std::string path = parts[1].substr(0, parts[1].find('?'));
  if (path != "/metrics") {
    return Response(404, "Not Found", "text/plain", "only /metrics\n", head);
  }
  return Response(200, "OK", "text/plain; version=0.0.4; charset=utf-8", render(), head);
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(
    HttpServerOptions options, std::function<std::string()> render) {
  const std::string address = absl::StrCat(options.host, ":", options.port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(options.port);
  std::string host = options.host;
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  // gRPC binds "localhost" on the loopback addresses only; a scraper asks 127.0.0.1 first.
  if (host == "localhost") host = "127.0.0.1";
  if (int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    return absl::UnavailableError(
        absl::StrCat("metrics server: cannot resolve ", address, ": ", gai_strerror(rc)));
  }
  int fd = -1;
  std::string error = "no address";
  for (addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) continue;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 16) == 0) break;
    error = strerror(errno);
    close(fd);
    fd = -1;
  }
  freeaddrinfo(found);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("metrics server: cannot listen on ", address, ": ", error));
  }
  sockaddr_storage bound{};
  socklen_t length = sizeof(bound);
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length);
  const int bound_port =
      bound.ss_family == AF_INET6
          ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
          : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  std::unique_ptr<HttpServer> server(
      new HttpServer(std::move(options), std::move(render), fd, bound_port));
  server->thread_ = std::thread([s = server.get()] { s->Loop(); });
  return server;
}

HttpServer::HttpServer(HttpServerOptions options, std::function<std::string()> render, int fd,
                       int port)
    : options_(std::move(options)), render_(std::move(render)), listen_fd_(fd), port_(port) {}

HttpServer::~HttpServer() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  close(listen_fd_);
}

void HttpServer::Loop() {
  while (!stop_.load()) {
    pollfd poll_fd{listen_fd_, POLLIN, 0};
    if (poll(&poll_fd, 1, 100) <= 0) continue;
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    // A slow or silent client cannot hold the server for long.
    timeval timeout{5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
    Handle(fd);
    close(fd);
  }
}

void HttpServer::Handle(int fd) {
  Conn conn(fd);
  if (!options_.cert_file.empty() && !conn.StartTls(options_)) {
    ERR_clear_error();
    return;
  }
  std::string head;
  char buffer[1024];
  while (head.find("\r\n\r\n") == std::string::npos && head.size() < kMaxHead) {
    const ssize_t n = conn.Read(buffer, sizeof(buffer));
    if (n <= 0) return;
    head.append(buffer, static_cast<size_t>(n));
  }
  conn.Write(HttpAnswer(head, render_));
}

}  // namespace metrics
}  // namespace shardps
