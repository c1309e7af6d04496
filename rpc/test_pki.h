// Test-only: a CA and certificates signed by it, made with openssl in a directory (the way an
// operator would make them), for the TLS and roles tests.
//
// Thread-safety: not thread-safe; used from a test's main thread.
#ifndef SHARDPS_RPC_TEST_PKI_H_
#define SHARDPS_RPC_TEST_PKI_H_

#include <string>

#include "rpc/tls.h"

namespace shardps {

class TestPki {
 public:
  // Makes the CA `ca` (DIR/CA.crt, DIR/CA.key), valid 2 days.
  TestPki(std::string dir, std::string ca);

  struct CertOptions {
    // An extra URI subject alternative name ("spiffe://shardps/worker/0"); empty: none.
    std::string uri;
    // A certificate whose validity ended in 2020 (openssl ca -startdate/-enddate).
    bool expired = false;
    // More subject alternative names, openssl's form ("IP:127.5.6.7,DNS:ps-0").
    std::string extra_sans;
  };
  // A certificate NAME (DIR/NAME.crt, DIR/NAME.key) signed by this CA, naming 127.0.0.1 and
  // localhost. Fails the test when openssl fails.
  void Issue(const std::string& name, const CertOptions& options);
  void Issue(const std::string& name) { Issue(name, CertOptions()); }

  std::string ca_file() const;
  std::string cert(const std::string& name) const;
  std::string key(const std::string& name) const;

  // Options with this CA and, unless `name` is empty, NAME's certificate and key.
  TlsOptions Options(const std::string& name) const;

 private:
  std::string dir_;
  std::string ca_;
};

// Runs a shell command, failing the test (ADD_FAILURE) on a non-zero exit.
void ShellOrFail(const std::string& command);

}  // namespace shardps

#endif  // SHARDPS_RPC_TEST_PKI_H_
