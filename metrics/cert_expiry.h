// Seconds until a PEM certificate file's first certificate expires (negative once it has),
// for the shardps_certificate_expiry_seconds gauge every daemon serves.
//
// Thread-safety: a pure function of the file; call it from any thread.
#ifndef SHARDPS_METRICS_CERT_EXPIRY_H_
#define SHARDPS_METRICS_CERT_EXPIRY_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace shardps {
namespace metrics {

// INVALID_ARGUMENT naming the file when it cannot be read or holds no certificate.
absl::StatusOr<double> SecondsUntilExpiry(const std::string& pem_file, absl::Time now);

}  // namespace metrics
}  // namespace shardps

#endif  // SHARDPS_METRICS_CERT_EXPIRY_H_
