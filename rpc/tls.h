// Transport security for every gRPC server and channel of a process: TLS with the server's
// certificate checked against a CA, mutual TLS as an option, certificates re-read from their
// files while the process runs (gRPC's FileWatcherCertificateProvider: cert-manager renews a
// mounted Secret in place by an atomic swap, and a pair that is half written is not taken).
//
// Flags in etcd's shape, each also from the environment (the flag wins):
//   --tls_cert_file  SHARDPS_TLS_CERT_FILE   this process's certificate chain (PEM)
//   --tls_key_file   SHARDPS_TLS_KEY_FILE    its private key (PEM)
//   --tls_ca_file    SHARDPS_TLS_CA_FILE     the CA bundle peers' certificates are checked with
//   --tls_client_auth SHARDPS_TLS_CLIENT_AUTH servers require a client certificate signed by
//                                            the CA (mutual TLS)
//   --tls_refresh_s  SHARDPS_TLS_REFRESH_S   how often the files are read again (60)
//   --insecure       SHARDPS_INSECURE        allow plaintext beyond loopback
// The same files serve the process's outgoing channels: a client presents its certificate
// (when it has one) and checks the server's against the CA.
//
// Thread-safety: TlsOptions is plain data. SetProcessTls is called once from main() before any
// channel is made; ProcessChannelCredentials may then be called from any thread.
#ifndef SHARDPS_RPC_TLS_H_
#define SHARDPS_RPC_TLS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/flags.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"

namespace shardps {

struct TlsOptions {
  std::string cert_file;
  std::string key_file;
  std::string ca_file;
  bool client_auth = false;
  int64_t refresh_s = 60;
  bool insecure = false;

  // Whether this process speaks TLS (a CA to check servers with, or a certificate to serve).
  bool enabled() const { return !ca_file.empty() || !cert_file.empty(); }
  // Whether its servers can: a certificate and its key.
  bool can_serve() const { return !cert_file.empty() && !key_file.empty(); }

  // Takes the environment's values as the defaults, then registers the flags above on `flags`
  // (so a flag given wins).
  void AddFlags(FlagParser* flags);
  // INVALID_ARGUMENT naming the flag or variable: one of the environment's that does not
  // parse (SHARDPS_TLS_REFRESH_S=x, SHARDPS_TLS_CLIENT_AUTH=maybe), a certificate without its
  // key or the reverse, client auth without a CA to check clients with, a refresh below 1 s,
  // a file that cannot be read or holds no PEM block.
  absl::Status Validate() const;

  // What AddFlags found wrong in the environment ("": nothing).
  std::string environment_error;
};

// The value of environment variable `name`, or null when it is unset or empty (the flags'
// defaults here and in rpc/auth.h).
const char* NonEmptyEnv(const char* name);
// The whole file at `path`, or nullopt when it cannot be read (certificate and token files).
std::optional<std::string> ReadConfigFile(const std::string& path);

// Credentials from `options` (REQUIRES: Validate passed). A server without a certificate, or a
// process with TLS off, gets the insecure kind.
std::shared_ptr<grpc::ServerCredentials> ServerCredentialsFor(const TlsOptions& options);
std::shared_ptr<grpc::ChannelCredentials> ChannelCredentialsFor(const TlsOptions& options);

// The binding rule: a server listening on `listen_address` (host:port as bound) beyond
// loopback without TLS is refused unless `insecure` (FAILED_PRECONDITION naming the address and
// the flags that fix it).
absl::Status CheckBinding(const std::string& listen_address, const TlsOptions& options);

// The process's TLS, for every channel rpc/grpc_util.h's NewChannel makes and every server
// the process starts. Until set: plaintext.
void SetProcessTls(const TlsOptions& options);
TlsOptions ProcessTls();
// Call credentials sent on every call of the process's channels (rpc/auth.h's token), on top
// of its TLS; null: none. gRPC sends them only over TLS.
void SetProcessCallCredentials(std::shared_ptr<grpc::CallCredentials> call);
std::shared_ptr<grpc::ChannelCredentials> ProcessChannelCredentials();

}  // namespace shardps

#endif  // SHARDPS_RPC_TLS_H_
