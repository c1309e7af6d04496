// Who is calling: a caller's role (rpc/access.h) from its client certificate or its token,
// and the process-wide settings that decide whether roles are enforced.
//
// A role comes from, in this order:
//   1. a bearer token ("authorization: Bearer TOKEN" metadata, which gRPC sends only over
//      TLS) found in the server's --auth_tokens_file: lines of "TOKEN ROLE", '#' comments;
//      a token that is sent but not in the file is refused, whatever the certificate says;
//   2. the client certificate's URI SAN spiffe://shardps/<role> or
//      spiffe://shardps/<role>/<index> (deploy/certs.sh and the Kubernetes Certificates write
//      it), checked by TLS against --tls_ca_file.
// Roles are enforced when the server requires client certificates (--tls_client_auth) or has
// a tokens file; otherwise (plaintext, or TLS without either) any caller that reaches the port
// may make any call, and the daemon says so when it starts.
//
// Flags, each also from the environment (the flag wins):
//   --auth_tokens_file  SHARDPS_AUTH_TOKENS_FILE  servers: the token -> role file
//   --auth_token_file   SHARDPS_AUTH_TOKEN_FILE   clients: the file holding this process's
//                                                 token, sent on every call
// Both need TLS: a token is an addition to TLS, never a replacement for it.
//
// Thread-safety: AuthOptions and TokenTable are plain values. SetProcessAuth is called once
// from main() (after SetProcessTls) before any server or channel is made; the rest may then
// be called from any thread.
#ifndef SHARDPS_RPC_AUTH_H_
#define SHARDPS_RPC_AUTH_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/flags.h"
#include "grpcpp/server_context.h"
#include "rpc/access.h"
#include "rpc/tls.h"

namespace shardps {

struct AuthOptions {
  std::string tokens_file;  // server side
  std::string token_file;   // client side

  // Takes the environment's values as defaults, then registers the flags (a flag given wins).
  // `server`: whether this process serves (only then --auth_tokens_file).
  void AddFlags(FlagParser* flags, bool server = true);
  // INVALID_ARGUMENT naming the flag and file: a file that cannot be read, is empty, or has a
  // malformed line (which line, why); a token file set without TLS (`tls`).
  absl::Status Validate(const TlsOptions& tls) const;
};

// The server's token -> role table.
class TokenTable {
 public:
  // Parses `text` (the file's contents; `path` names it in errors): "TOKEN ROLE" lines, '#'
  // starts a comment. INVALID_ARGUMENT naming the file and line for an unknown role, a line
  // without both fields, a token shorter than 16 characters, a token listed twice, or a file
  // with no token at all.
  static absl::StatusOr<TokenTable> Parse(absl::string_view text, absl::string_view path);
  static absl::StatusOr<TokenTable> Load(const std::string& path);

  // The token's role and its line; nullopt when the table has no such token. Tokens are kept
  // as SHA-256 digests, so a lookup's time does not depend on how much of a guess matches.
  struct Entry {
    Role role;
    int line;
  };
  std::optional<Entry> Find(absl::string_view token) const;
  size_t size() const { return entries_.size(); }

 private:
  absl::flat_hash_map<std::string, Entry> entries_;  // digest -> entry
};

// A caller as the gate knows it.
struct CallerIdentity {
  std::optional<Role> role;  // nullopt: not established (roles off, or refused)
  std::string source;        // "certificate spiffe://shardps/worker/3", "token (line 4)", ""
};

// The role named by a URI SAN "spiffe://shardps/<role>[/<index>]"; nullopt for any other URI.
std::optional<Role> RoleFromSpiffeUri(absl::string_view uri);

// The process's server-side authorization, from its flags: `tls` as validated, `auth` as
// validated. Loads the tokens file (its errors as Validate's) and, for clients, the token
// (sent on every call through rpc/tls.h's ProcessChannelCredentials).
absl::Status SetProcessAuth(const AuthOptions& auth, const TlsOptions& tls);

// Whether this process's servers enforce roles.
bool ProcessEnforcesRoles();
// One line for the daemon's start: how callers are identified, or that anyone may call.
std::string DescribeProcessAuth();

// The caller of `ctx`: OK with its identity (role unset when roles are off); UNAUTHENTICATED
// when roles are on and the caller has no identity, an unknown token, or a certificate that
// names no shardps role.
absl::StatusOr<CallerIdentity> IdentifyCaller(const grpc::CallbackServerContext& ctx);

// For tests: the process's settings back to their start (roles off, no token).
void ResetProcessAuthForTesting();

}  // namespace shardps

#endif  // SHARDPS_RPC_AUTH_H_
