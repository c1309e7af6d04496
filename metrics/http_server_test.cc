// Tests of the /metrics HTTP server: plaintext, TLS, and TLS with client certificates.
#include "metrics/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rpc/test_pki.h"

namespace shardps {
namespace metrics {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  return fd;
}

std::string GetPlain(int port, const std::string& request) {
  const int fd = Connect(port);
  send(fd, request.data(), request.size(), 0);
  std::string answer;
  char buffer[4096];
  for (ssize_t n; (n = recv(fd, buffer, sizeof(buffer), 0)) > 0;) answer.append(buffer, n);
  close(fd);
  return answer;
}

// "" when the handshake fails.
std::string GetTls(int port, const std::string& ca, const std::string& cert,
                   const std::string& key) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL_CTX_load_verify_locations(ctx, ca.c_str(), nullptr);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  if (!cert.empty()) {
    SSL_CTX_use_certificate_chain_file(ctx, cert.c_str());
    SSL_CTX_use_PrivateKey_file(ctx, key.c_str(), SSL_FILETYPE_PEM);
  }
  const int fd = Connect(port);
  SSL* ssl = SSL_new(ctx);
  SSL_set_fd(ssl, fd);
  SSL_set_tlsext_host_name(ssl, "localhost");
  std::string answer;
  if (SSL_connect(ssl) == 1) {
    const std::string request = "GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n";
    SSL_write(ssl, request.data(), static_cast<int>(request.size()));
    char buffer[4096];
    for (int n; (n = SSL_read(ssl, buffer, sizeof(buffer))) > 0;) answer.append(buffer, n);
  }
  SSL_free(ssl);
  SSL_CTX_free(ctx);
  close(fd);
  return answer;
}

std::string Render() { return "up 1\n"; }

TEST(HttpServerTest, ServesMetricsOverPlaintext) {
  auto server = HttpServer::Start(HttpServerOptions(), Render);
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_GT((*server)->port(), 0);
  const std::string answer = GetPlain((*server)->port(), "GET /metrics HTTP/1.1\r\n\r\n");
  EXPECT_THAT(answer, StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(answer, HasSubstr("Content-Type: text/plain; version=0.0.4"));
  EXPECT_THAT(answer, HasSubstr("\r\n\r\nup 1\n"));
  EXPECT_THAT(GetPlain((*server)->port(), "GET / HTTP/1.1\r\n\r\n"), StartsWith("HTTP/1.1 404"));
}

TEST(HttpServerTest, AnswersBadRequests) {
  EXPECT_THAT(HttpAnswer("POST /metrics HTTP/1.1\r\n\r\n", Render), StartsWith("HTTP/1.1 405"));
  EXPECT_THAT(HttpAnswer("hello\r\n\r\n", Render), StartsWith("HTTP/1.1 400"));
  EXPECT_THAT(HttpAnswer("GET /metrics?x=1 HTTP/1.0\r\n\r\n", Render),
              StartsWith("HTTP/1.1 200"));
  const std::string head = HttpAnswer("HEAD /metrics HTTP/1.1\r\n\r\n", Render);
  EXPECT_THAT(head, HasSubstr("Content-Length: 5\r\n"));
  EXPECT_EQ(head.find("up 1"), std::string::npos);
}

TEST(HttpServerTest, RefusesATakenPort) {
  auto first = HttpServer::Start(HttpServerOptions(), Render);
  ASSERT_TRUE(first.ok());
  HttpServerOptions options;
  options.port = (*first)->port();
  auto second = HttpServer::Start(options, Render);
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(std::string(second.status().message()),
              HasSubstr(absl::StrCat("127.0.0.1:", options.port)));
}

TEST(HttpServerTest, ServesTlsAndChecksClientCertificates) {
  TestPki pki(std::getenv("TEST_TMPDIR"), "CA");
  pki.Issue("server");
  pki.Issue("scraper");
  HttpServerOptions options;
  options.cert_file = pki.cert("server");
  options.key_file = pki.key("server");
  {
    auto server = HttpServer::Start(options, Render);
    ASSERT_TRUE(server.ok());
    EXPECT_THAT(GetTls((*server)->port(), pki.ca_file(), "", ""), HasSubstr("\r\n\r\nup 1\n"));
    // A plaintext request gets no answer from a TLS server.
    EXPECT_EQ(GetPlain((*server)->port(), "GET /metrics HTTP/1.1\r\n\r\n").find("up 1"),
              std::string::npos);
  }
  options.ca_file = pki.ca_file();
  options.client_auth = true;
  auto server = HttpServer::Start(options, Render);
  ASSERT_TRUE(server.ok());
  EXPECT_EQ(GetTls((*server)->port(), pki.ca_file(), "", ""), "");
  EXPECT_THAT(
      GetTls((*server)->port(), pki.ca_file(), pki.cert("scraper"), pki.key("scraper")),
      HasSubstr("\r\n\r\nup 1\n"));
}

}  // namespace
}  // namespace metrics
}  // namespace shardps
