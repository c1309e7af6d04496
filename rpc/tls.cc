#include "rpc/tls.h"

#include <stdlib.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <thread>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_credentials_options.h"

namespace shardps {
namespace {


// "1", "true", "yes" / "0", "false", "no" (any case).
bool ParseBool(absl::string_view text, bool* out) {
  const std::string v = absl::AsciiStrToLower(text);
  if (v == "1" || v == "true" || v == "yes") {
    *out = true;
    return true;
  }
  if (v == "0" || v == "false" || v == "no") {
    *out = false;
    return true;
  }
  return false;
}

// The file's text, or an error naming the flag.
absl::Status CheckPemFile(const char* flag, const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, "=", path, ": cannot read the file (", what, ")"));
  }
  std::stringstream text;
  text << in.rdbuf();
  if (!absl::StrContains(text.str(), "-----BEGIN ")) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, "=", path, ": no PEM block in it (", what, ")"));
  }
  return absl::OkStatus();
}

// The host of "host:port" or "[v6]:port".
std::string HostOf(const std::string& address) {
  if (absl::StartsWith(address, "[")) {
    const size_t close = address.find(']');
    return close == std::string::npos ? address : address.substr(1, close - 1);
  }
  const size_t colon = address.rfind(':');
  return colon == std::string::npos ? address : address.substr(0, colon);
}

bool IsLoopback(const std::string& host) {
  return host == "localhost" || host == "::1" || absl::StartsWith(host, "127.");
}


// Whether `cert_pem`'s first certificate and `key_pem`'s private key are a pair.
bool PairMatches(const std::string& cert_pem, const std::string& key_pem) {
  BIO* cert_bio = BIO_new_mem_buf(cert_pem.data(), static_cast<int>(cert_pem.size()));
  BIO* key_bio = BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size()));
  X509* cert = cert_bio != nullptr ? PEM_read_bio_X509(cert_bio, nullptr, nullptr, nullptr) : nullptr;
  EVP_PKEY* key =
      key_bio != nullptr ? PEM_read_bio_PrivateKey(key_bio, nullptr, nullptr, nullptr) : nullptr;
  const bool matches = cert != nullptr && key != nullptr && X509_check_private_key(cert, key) == 1;
  EVP_PKEY_free(key);
  X509_free(cert);
  BIO_free(key_bio);
  BIO_free(cert_bio);
  return matches;
}

bool WriteFile(const std::string& path, const std::string& text, mode_t mode) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) return false;
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  return ::close(fd) == 0 && done == text.size();
}

// A copy of a certificate and key that gRPC's file watcher reads instead of the originals:
// the pair is copied only when the two match, so a rotation caught half way (a new
// certificate beside the old key, the state between an operator's two copies) keeps the old
// pair in use instead of breaking every handshake (gRPC 1.51's watcher takes whatever it
// reads). Each matching pair goes to a directory of its own and a symbolic link is swapped to
// it; the watcher's own check of the files' modification times around its reads catches a
// swap between its two reads. Lives as long as the process.
class PairMirror {
 public:
  static PairMirror* Start(const std::string& cert_file, const std::string& key_file,
                           int64_t refresh_s) {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp",
                                       "/shardps-tls-XXXXXX");
    if (::mkdtemp(pattern.data()) == nullptr) return nullptr;
    auto* mirror = new PairMirror(cert_file, key_file, pattern);
    mirror->Refresh();
    std::thread([mirror, refresh_s] {
      while (true) {
        std::this_thread::sleep_for(std::chrono::seconds(refresh_s));
        mirror->Refresh();
      }
    }).detach();
    return mirror;
  }
  std::string cert_path() const { return dir_ + "/current/tls.crt"; }
  std::string key_path() const { return dir_ + "/current/tls.key"; }

 private:
  PairMirror(std::string cert_file, std::string key_file, std::string dir)
      : cert_file_(std::move(cert_file)), key_file_(std::move(key_file)), dir_(std::move(dir)) {}

  void Refresh() {
    std::optional<std::string> cert = ReadConfigFile(cert_file_);
    std::optional<std::string> key = ReadConfigFile(key_file_);
    if (!cert.has_value() || !key.has_value()) return;
    if (*cert == cert_ && *key == key_) return;
    if (!PairMatches(*cert, *key)) return;  // half written: keep the pair in use
    const std::string generation = absl::StrCat(dir_, "/", ++generation_);
    if (::mkdir(generation.c_str(), 0700) != 0) return;
    if (!WriteFile(generation + "/tls.crt", *cert, 0644) ||
        !WriteFile(generation + "/tls.key", *key, 0600)) {
      return;
    }
    const std::string link = dir_ + "/current.new";
    ::unlink(link.c_str());
    if (::symlink(std::to_string(generation_).c_str(), link.c_str()) != 0) return;
    if (::rename(link.c_str(), (dir_ + "/current").c_str()) != 0) return;
    cert_ = *std::move(cert);
    key_ = *std::move(key);
    // The generation before the one replaced may still be being read: keep two.
    if (generation_ > 2) {
      const std::string old = absl::StrCat(dir_, "/", generation_ - 2);
      ::unlink((old + "/tls.crt").c_str());
      ::unlink((old + "/tls.key").c_str());
      ::rmdir(old.c_str());
    }
  }

  const std::string cert_file_;
  const std::string key_file_;
  const std::string dir_;
  int64_t generation_ = 0;
  std::string cert_;
  std::string key_;
};

// The mirror of a pair, one per pair for the process (made on first use).
PairMirror* MirrorOf(const TlsOptions& options) {
  static absl::Mutex mu(absl::kConstInit);
  static auto* mirrors = new std::map<std::pair<std::string, std::string>, PairMirror*>();
  absl::MutexLock lock(&mu);
  PairMirror*& mirror = (*mirrors)[{options.cert_file, options.key_file}];
  if (mirror == nullptr) mirror = PairMirror::Start(options.cert_file, options.key_file, options.refresh_s);
  return mirror;
}

// The provider of `options`' identity (through its mirror) and CA; the CA only when it has no
// certificate.
std::shared_ptr<grpc::experimental::CertificateProviderInterface> ProviderFor(
    const TlsOptions& options) {
  const auto refresh = static_cast<unsigned int>(options.refresh_s);
  if (!options.can_serve()) {
    return std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(options.ca_file,
                                                                                 refresh);
  }
  PairMirror* mirror = MirrorOf(options);
  const std::string cert = mirror != nullptr ? mirror->cert_path() : options.cert_file;
  const std::string key = mirror != nullptr ? mirror->key_path() : options.key_file;
  return std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      key, cert, options.ca_file, refresh);
}

// The process's setting: made once, never destroyed (channels may be made until exit).
struct ProcessSetting {
  TlsOptions options;
  std::shared_ptr<grpc::ChannelCredentials> channel;  // null: plaintext
  std::shared_ptr<grpc::CallCredentials> call;        // null: none
  std::shared_ptr<grpc::ChannelCredentials> composed;  // channel + call, when both
};

void Compose(ProcessSetting& s) {
  s.composed = s.channel != nullptr && s.call != nullptr
                   ? grpc::CompositeChannelCredentials(s.channel, s.call)
                   : nullptr;
}
absl::Mutex process_mu(absl::kConstInit);
ProcessSetting& ProcessState() ABSL_EXCLUSIVE_LOCKS_REQUIRED(process_mu) {
  static auto* const state = new ProcessSetting();
  return *state;
}

}  // namespace

const char* NonEmptyEnv(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

std::optional<std::string> ReadConfigFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void TlsOptions::AddFlags(FlagParser* flags) {
  if (const char* v = NonEmptyEnv("SHARDPS_TLS_CERT_FILE")) cert_file = v;
  if (const char* v = NonEmptyEnv("SHARDPS_TLS_KEY_FILE")) key_file = v;
  if (const char* v = NonEmptyEnv("SHARDPS_TLS_CA_FILE")) ca_file = v;
  if (const char* v = NonEmptyEnv("SHARDPS_TLS_CLIENT_AUTH");
      v != nullptr && !ParseBool(v, &client_auth)) {
    environment_error = absl::StrCat("SHARDPS_TLS_CLIENT_AUTH=", v, ": expected true or false");
  }
  if (const char* v = NonEmptyEnv("SHARDPS_INSECURE"); v != nullptr && !ParseBool(v, &insecure)) {
    environment_error = absl::StrCat("SHARDPS_INSECURE=", v, ": expected true or false");
  }
  if (const char* v = NonEmptyEnv("SHARDPS_TLS_REFRESH_S");
      v != nullptr && !absl::SimpleAtoi(v, &refresh_s)) {
    environment_error = absl::StrCat("SHARDPS_TLS_REFRESH_S=", v, ": expected whole seconds");
  }
  flags->AddString("tls_cert_file", &cert_file,
                   "this process's TLS certificate chain, PEM (env SHARDPS_TLS_CERT_FILE); "
                   "with --tls_key_file its servers speak TLS");
  flags->AddString("tls_key_file", &key_file,
                   "the private key of --tls_cert_file, PEM (env SHARDPS_TLS_KEY_FILE)");
  flags->AddString("tls_ca_file", &ca_file,
                   "the CA bundle that peers' certificates are checked with, PEM (env "
                   "SHARDPS_TLS_CA_FILE); with it this process's channels speak TLS");
  flags->AddBool("tls_client_auth", &client_auth,
                 "servers require a client certificate signed by --tls_ca_file: mutual TLS "
                 "(env SHARDPS_TLS_CLIENT_AUTH)");
  flags->AddInt("tls_refresh_s", &refresh_s,
                "seconds between reads of the certificate files: a rotated pair is taken "
                "without a restart (env SHARDPS_TLS_REFRESH_S)");
  flags->AddBool("insecure", &insecure,
                 "allow serving plaintext beyond loopback (env SHARDPS_INSECURE); without TLS "
                 "a daemon listens only on loopback unless given this");
}

absl::Status TlsOptions::Validate() const {
  if (!environment_error.empty()) return absl::InvalidArgumentError(environment_error);
  if (cert_file.empty() != key_file.empty()) {
    return absl::InvalidArgumentError(
        cert_file.empty() ? "--tls_key_file is set without --tls_cert_file (its certificate)"
                          : "--tls_cert_file is set without --tls_key_file (its private key)");
  }
  if (client_auth && ca_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls_client_auth needs --tls_ca_file: the CA that client certificates are checked with");
  }
  if (!cert_file.empty() && ca_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls_cert_file needs --tls_ca_file too: this process's own channels check the "
        "servers they call against it");
  }
  if (refresh_s < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tls_refresh_s must be >= 1, got ", refresh_s));
  }
  if (!cert_file.empty()) {
    if (absl::Status s = CheckPemFile("tls_cert_file", cert_file, "a certificate"); !s.ok()) {
      return s;
    }
    if (absl::Status s = CheckPemFile("tls_key_file", key_file, "a private key"); !s.ok()) {
      return s;
    }
    if (!PairMatches(ReadConfigFile(cert_file).value_or(""), ReadConfigFile(key_file).value_or(""))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--tls_cert_file=", cert_file, " and --tls_key_file=", key_file,
          " are not a pair (the key is not the certificate's, or one does not parse)"));
    }
  }
  if (!ca_file.empty()) {
    if (absl::Status s = CheckPemFile("tls_ca_file", ca_file, "a CA bundle"); !s.ok()) return s;
  }
  return absl::OkStatus();
}

std::shared_ptr<grpc::ServerCredentials> ServerCredentialsFor(const TlsOptions& options) {
  if (!options.can_serve()) return grpc::InsecureServerCredentials();
  grpc::experimental::TlsServerCredentialsOptions tls(ProviderFor(options));
  tls.watch_identity_key_cert_pairs();
  tls.watch_root_certs();
  // Without --tls_client_auth a client may still present a certificate (its role, later);
  // one that it presents must be the CA's.
  tls.set_cert_request_type(options.client_auth
                                ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                : GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY);
  return grpc::experimental::TlsServerCredentials(tls);
}

std::shared_ptr<grpc::ChannelCredentials> ChannelCredentialsFor(const TlsOptions& options) {
  if (!options.enabled()) return grpc::InsecureChannelCredentials();
  grpc::experimental::TlsChannelCredentialsOptions tls;
  tls.set_certificate_provider(ProviderFor(options));
  tls.watch_root_certs();
  if (options.can_serve()) tls.watch_identity_key_cert_pairs();
  tls.set_verify_server_certs(true);
  return grpc::experimental::TlsCredentials(tls);
}

absl::Status CheckBinding(const std::string& listen_address, const TlsOptions& options) {
  if (options.can_serve() || options.insecure || IsLoopback(HostOf(listen_address))) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "refusing to serve plaintext on ", listen_address,
      ", which is not loopback: give --tls_cert_file, --tls_key_file and --tls_ca_file "
      "(deploy/certs.sh makes them), or --insecure on a network you trust"));
}

void SetProcessTls(const TlsOptions& options) {
  std::shared_ptr<grpc::ChannelCredentials> channel = ChannelCredentialsFor(options);
  absl::MutexLock lock(&process_mu);
  ProcessState().options = options;
  ProcessState().channel = std::move(channel);
  Compose(ProcessState());
}

void SetProcessCallCredentials(std::shared_ptr<grpc::CallCredentials> call) {
  absl::MutexLock lock(&process_mu);
  ProcessState().call = std::move(call);
  Compose(ProcessState());
}

TlsOptions ProcessTls() {
  absl::MutexLock lock(&process_mu);
  return ProcessState().options;
}

std::shared_ptr<grpc::ChannelCredentials> ProcessChannelCredentials() {
  absl::MutexLock lock(&process_mu);
  if (ProcessState().composed != nullptr) return ProcessState().composed;
  if (ProcessState().channel != nullptr) return ProcessState().channel;
  return grpc::InsecureChannelCredentials();
}

}  // namespace shardps
