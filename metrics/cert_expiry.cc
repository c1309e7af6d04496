// SecondsUntilExpiry: see cert_expiry.h.
#include "metrics/cert_expiry.h"

#include <openssl/asn1.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cstdio>
#include <ctime>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace shardps {
namespace metrics {

absl::StatusOr<double> SecondsUntilExpiry(const std::string& pem_file, absl::Time now) {
  FILE* file = std::fopen(pem_file.c_str(), "r");
  if (file == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("cannot read certificate file ", pem_file));
  }
  X509* cert = PEM_read_X509(file, nullptr, nullptr, nullptr);
  std::fclose(file);
  if (cert == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("no certificate in ", pem_file));
  }
  int days = 0;
  int seconds = 0;
  ASN1_TIME* at_now = ASN1_TIME_set(nullptr, absl::ToTimeT(now));
  const int ok = ASN1_TIME_diff(&days, &seconds, at_now, X509_get0_notAfter(cert));
  ASN1_TIME_free(at_now);
  X509_free(cert);
  if (ok != 1) {
    return absl::InvalidArgumentError(absl::StrCat("bad expiry time in ", pem_file));
  }
  return days * 86400.0 + seconds;
}

}  // namespace metrics
}  // namespace shardps
