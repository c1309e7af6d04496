// Tests of SecondsUntilExpiry on certificates openssl made.
#include "metrics/cert_expiry.h"

#include <cstdlib>
#include <fstream>

#include "gtest/gtest.h"
#include "rpc/test_pki.h"

namespace shardps {
namespace metrics {
namespace {

TEST(CertExpiryTest, CountsDownToNotAfter) {
  const std::string dir = std::getenv("TEST_TMPDIR");
  TestPki pki(dir, "CA");  // valid 2 days
  TestPki::CertOptions expired;
  expired.expired = true;
  pki.Issue("old", expired);
  const absl::Time now = absl::Now();
  absl::StatusOr<double> ca = SecondsUntilExpiry(pki.ca_file(), now);
  ASSERT_TRUE(ca.ok()) << ca.status();
  EXPECT_GT(*ca, 86400.0);
  EXPECT_LE(*ca, 2 * 86400.0 + 60);
  absl::StatusOr<double> later = SecondsUntilExpiry(pki.ca_file(), now + absl::Hours(1));
  ASSERT_TRUE(later.ok());
  EXPECT_NEAR(*ca - *later, 3600.0, 1.0);
  absl::StatusOr<double> old = SecondsUntilExpiry(pki.cert("old"), now);
  ASSERT_TRUE(old.ok());
  EXPECT_LT(*old, 0);
}

TEST(CertExpiryTest, NamesAFileWithoutACertificate) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/empty.pem";
  std::ofstream(path) << "not a certificate\n";
  absl::StatusOr<double> expiry = SecondsUntilExpiry(path, absl::Now());
  ASSERT_FALSE(expiry.ok());
  EXPECT_NE(expiry.status().message().find(path), std::string::npos);
  EXPECT_FALSE(SecondsUntilExpiry(path + ".missing", absl::Now()).ok());
}

}  // namespace
}  // namespace metrics
}  // namespace shardps
