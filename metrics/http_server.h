// HttpServer: serves /metrics (the text a callback renders) over HTTP/1.1, with TLS when
// given a certificate: one thread, one connection at a time, each closed after its answer (a
// Prometheus scrape every few seconds is all it is for). The certificate, key and CA files are
// read again for each connection, so a renewed certificate is served without a restart. With
// client_auth, a client must present a certificate the CA signed.
//
// Thread-safety: Start and the destructor from one thread; render runs on the server's thread.
#ifndef SHARDPS_METRICS_HTTP_SERVER_H_
#define SHARDPS_METRICS_HTTP_SERVER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace shardps {
namespace metrics {

struct HttpServerOptions {
  // An IP or name to bind ("localhost": 127.0.0.1); "0.0.0.0" or "::" for all interfaces.
  std::string host = "127.0.0.1";
  int port = 0;                    // 0: the kernel chooses (port() says which)
  // TLS: both or neither (plaintext).
  std::string cert_file;
  std::string key_file;
  std::string ca_file;     // with client_auth: the CA clients' certificates are checked with
  bool client_auth = false;
};

class HttpServer {
 public:
  // Binds and starts serving. UNAVAILABLE naming the address when it cannot bind.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(HttpServerOptions options,
                                                           std::function<std::string()> render);
  ~HttpServer();  // stops and joins the thread
  int port() const { return port_; }

 private:
  HttpServer(HttpServerOptions options, std::function<std::string()> render, int fd, int port);
  void Loop();
  void Handle(int fd);

  const HttpServerOptions options_;
  const std::function<std::string()> render_;
  const int listen_fd_;
  const int port_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// The HTTP/1.1 answer to one request's head ("GET /metrics HTTP/1.1\r\n..."): 200 with the
// body for GET or HEAD of /metrics, 404 for another path, 405 for another method, 400 for a
// head that is not HTTP.
std::string HttpAnswer(const std::string& request_head,
                       const std::function<std::string()>& render);

}  // namespace metrics
}  // namespace shardps

#endif  // SHARDPS_METRICS_HTTP_SERVER_H_
