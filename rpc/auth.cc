#include "rpc/auth.h"

#include <openssl/evp.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/security/auth_context.h"
#include "grpcpp/security/credentials.h"

namespace shardps {
namespace {

constexpr size_t kMinTokenLength = 16;
constexpr char kSpiffePrefix[] = "spiffe://shardps/";

std::string Digest(absl::string_view token) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(token.data(), token.size(), out, &length, EVP_sha256(), nullptr);
  return std::string(reinterpret_cast<const char*>(out), length);
}

// The client token file's token: its first line, trimmed.
absl::StatusOr<std::string> LoadToken(const std::string& path) {
  std::optional<std::string> text = ReadConfigFile(path);
  if (!text.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--auth_token_file=", path, ": cannot read the file"));
  }
  std::string token(absl::StripAsciiWhitespace(text->substr(0, text->find('\n'))));
  if (token.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--auth_token_file=", path, ": the file holds no token (its first line "
                     "is empty)"));
  }
  if (absl::c_any_of(token, [](char c) { return c < 0x21 || c > 0x7e; })) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--auth_token_file=", path, ": the token has a space or a non-printable character"));
  }
  return token;
}

struct ProcessAuthState {
  bool enforce = false;
  bool tls = false;
  bool client_auth = false;
  std::optional<TokenTable> tokens;
  std::string tokens_file;
  bool sends_token = false;
};

// The settings, immutable once published: every call reads them without a lock. Each
// SetProcessAuth publishes a new one; the old ones stay reachable (tests set several).
std::atomic<const ProcessAuthState*> current{nullptr};

const ProcessAuthState& State() {
  static const ProcessAuthState* const off = new ProcessAuthState();
  const ProcessAuthState* s = current.load(std::memory_order_acquire);
  return s != nullptr ? *s : *off;
}

void Publish(ProcessAuthState state) {
  static absl::Mutex mu(absl::kConstInit);
  static auto* const published = new std::vector<std::unique_ptr<const ProcessAuthState>>();
  absl::MutexLock lock(&mu);
  published->push_back(std::make_unique<const ProcessAuthState>(std::move(state)));
  current.store(published->back().get(), std::memory_order_release);
}

}  // namespace

void AuthOptions::AddFlags(FlagParser* flags, bool server) {
  if (const char* v = NonEmptyEnv("SHARDPS_AUTH_TOKENS_FILE"); v != nullptr && server) {
    tokens_file = v;
  }
  if (const char* v = NonEmptyEnv("SHARDPS_AUTH_TOKEN_FILE")) token_file = v;
  if (server) {
    flags->AddString("auth_tokens_file", &tokens_file,
                     "file of \"TOKEN ROLE\" lines: callers sending a listed bearer token get its "
                     "role, and roles are enforced (needs TLS; env SHARDPS_AUTH_TOKENS_FILE)");
  }
  flags->AddString("auth_token_file", &token_file,
                   "file holding this process's bearer token, sent on every call it makes "
                   "(needs TLS; env SHARDPS_AUTH_TOKEN_FILE)");
}

absl::Status AuthOptions::Validate(const TlsOptions& tls) const {
  if (!tokens_file.empty()) {
    if (!tls.can_serve()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--auth_tokens_file=", tokens_file, " needs TLS (--tls_cert_file, --tls_key_file, "
          "--tls_ca_file): gRPC sends tokens only over TLS"));
    }
    absl::StatusOr<TokenTable> table = TokenTable::Load(tokens_file);
    if (!table.ok()) return table.status();
  }
  if (!token_file.empty()) {
    if (!tls.enabled()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--auth_token_file=", token_file, " needs TLS (--tls_ca_file): a token is never sent "
          "in plaintext"));
    }
    absl::StatusOr<std::string> token = LoadToken(token_file);
    if (!token.ok()) return token.status();
  }
  return absl::OkStatus();
}

absl::StatusOr<TokenTable> TokenTable::Parse(absl::string_view text, absl::string_view path) {
  TokenTable table;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    if (const size_t hash = line.find('#'); hash != absl::string_view::npos) {
      line = line.substr(0, hash);
    }
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    const std::string where = absl::StrCat("--auth_tokens_file=", path, " line ", line_number);
    if (fields.size() != 2) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": expected \"TOKEN ROLE\", got ", fields.size(), " fields"));
    }
    std::optional<Role> role = ParseRole(fields[1]);
    if (!role.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": unknown role \"", fields[1],
                       "\" (admin, chief, ps, worker, evaluator, reader)"));
    }
    if (fields[0].size() < kMinTokenLength) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": the token is ", fields[0].size(),
                                                     " characters, at least ", kMinTokenLength,
                                                     " are needed (openssl rand -hex 32)"));
    }
    if (!table.entries_.emplace(Digest(fields[0]), Entry{*role, line_number}).second) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": the token is listed twice"));
    }
  }
  if (table.entries_.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--auth_tokens_file=", path, ": no token in the file"));
  }
  return table;
}

absl::StatusOr<TokenTable> TokenTable::Load(const std::string& path) {
  std::optional<std::string> text = ReadConfigFile(path);
  if (!text.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--auth_tokens_file=", path, ": cannot read the file"));
  }
  return Parse(*text, path);
}

std::optional<TokenTable::Entry> TokenTable::Find(absl::string_view token) const {
  auto it = entries_.find(Digest(token));
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

std::optional<Role> RoleFromSpiffeUri(absl::string_view uri) {
  if (!absl::ConsumePrefix(&uri, kSpiffePrefix)) return std::nullopt;
  const size_t slash = uri.find('/');
  std::optional<Role> role = ParseRole(uri.substr(0, slash));
  if (!role.has_value()) return std::nullopt;
  if (slash != absl::string_view::npos) {
    absl::string_view index = uri.substr(slash + 1);
    if (index.empty() || index.find('/') != absl::string_view::npos) return std::nullopt;
  }
  return role;
}

absl::Status SetProcessAuth(const AuthOptions& auth, const TlsOptions& tls) {
  if (absl::Status s = auth.Validate(tls); !s.ok()) return s;
  ProcessAuthState state;
  state.tls = tls.can_serve();
  state.client_auth = tls.can_serve() && tls.client_auth;
  if (!auth.tokens_file.empty()) {
    absl::StatusOr<TokenTable> table = TokenTable::Load(auth.tokens_file);
    if (!table.ok()) return table.status();
    state.tokens = *std::move(table);
    state.tokens_file = auth.tokens_file;
  }
  state.enforce = state.client_auth || state.tokens.has_value();
  if (!auth.token_file.empty()) {
    absl::StatusOr<std::string> token = LoadToken(auth.token_file);
    if (!token.ok()) return token.status();
    SetProcessCallCredentials(grpc::AccessTokenCredentials(*token));
    state.sends_token = true;
  }
  Publish(std::move(state));
  return absl::OkStatus();
}

bool ProcessEnforcesRoles() {
  return State().enforce;
}

std::string DescribeProcessAuth() {
  const ProcessAuthState& s = State();
  if (!s.enforce) {
    return s.tls ? "roles off (no --tls_client_auth, no --auth_tokens_file): any client that "
                   "completes TLS may make any call"
                 : "roles off (plaintext): any client that reaches the port may make any call";
  }
  std::string how;
  if (s.tokens.has_value()) {
    how = absl::StrCat("tokens of ", s.tokens_file, " (", s.tokens->size(), ")");
  }
  if (s.client_auth || s.tls) {
    absl::StrAppend(&how, how.empty() ? "" : ", then ",
                    "client certificates' spiffe://shardps/<role> URIs");
  }
  return absl::StrCat("roles on: callers identified by ", how);
}

absl::StatusOr<CallerIdentity> IdentifyCaller(const grpc::CallbackServerContext& ctx) {
  const ProcessAuthState& s = State();
  if (!s.enforce) return CallerIdentity{};
  const auto& metadata = ctx.client_metadata();
  if (auto it = metadata.find("authorization"); it != metadata.end() && s.tokens.has_value()) {
    absl::string_view value(it->second.data(), it->second.size());
    if (!absl::ConsumePrefix(&value, "Bearer ")) {
      return absl::UnauthenticatedError(
          "the call's authorization metadata is not \"Bearer TOKEN\"");
    }
    std::optional<TokenTable::Entry> entry = s.tokens->Find(value);
    if (!entry.has_value()) {
      return absl::UnauthenticatedError(
          "the call's bearer token is not in this server's --auth_tokens_file");
    }
    return CallerIdentity{entry->role, absl::StrCat("token (line ", entry->line, ")")};
  }
  std::shared_ptr<const grpc::AuthContext> auth = ctx.auth_context();
  if (auth != nullptr && auth->IsPeerAuthenticated()) {
    for (const grpc::string_ref& uri : auth->FindPropertyValues(GRPC_PEER_URI_PROPERTY_NAME)) {
      const absl::string_view text(uri.data(), uri.size());
      if (std::optional<Role> role = RoleFromSpiffeUri(text)) {
        return CallerIdentity{*role, absl::StrCat("certificate ", text)};
      }
    }
    std::string subject;
    for (const grpc::string_ref& v : auth->FindPropertyValues(GRPC_X509_SUBJECT_PROPERTY_NAME)) {
      subject.assign(v.data(), v.size());
    }
    return absl::UnauthenticatedError(absl::StrCat(
        "the client certificate (", subject.empty() ? "no subject" : subject,
        ") names no shardps role: it needs a URI SAN spiffe://shardps/<role>[/<index>]"));
  }
  return absl::UnauthenticatedError(
      s.tokens.has_value()
          ? "no identity: send a bearer token (--auth_token_file) or present a client "
            "certificate naming spiffe://shardps/<role>"
          : "no identity: present a client certificate naming spiffe://shardps/<role>");
}

void ResetProcessAuthForTesting() {
  SetProcessCallCredentials(nullptr);
  Publish(ProcessAuthState());
}

}  // namespace shardps
