#include "rpc/test_pki.h"

#include <cstdlib>
#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace shardps {

void ShellOrFail(const std::string& command) {
  const int rc = std::system(("(" + command + ") >/dev/null 2>&1").c_str());
  if (rc != 0) ADD_FAILURE() << "failed (" << rc << "): " << command;
}

TestPki::TestPki(std::string dir, std::string ca) : dir_(std::move(dir)), ca_(std::move(ca)) {
  ShellOrFail(absl::StrCat("openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=", ca_,
                           " -keyout ", dir_, "/", ca_, ".key -out ", dir_, "/", ca_, ".crt"));
}

void TestPki::Issue(const std::string& name, const CertOptions& options) {
  const std::string base = absl::StrCat(dir_, "/", name);
  const std::string sans =
      absl::StrCat("subjectAltName=IP:127.0.0.1,DNS:localhost",
                   options.uri.empty() ? "" : ",URI:" + options.uri,
                   options.extra_sans.empty() ? "" : "," + options.extra_sans);
  std::ofstream(base + ".ext") << sans << "\n";
  ShellOrFail(absl::StrCat("openssl req -newkey rsa:2048 -nodes -subj /CN=", name, " -keyout ",
                           base, ".key -out ", base, ".csr"));
  if (!options.expired) {
    ShellOrFail(absl::StrCat("openssl x509 -req -in ", base, ".csr -CA ", ca_file(), " -CAkey ",
                             dir_, "/", ca_, ".key -CAcreateserial -days 2 -extfile ", base,
                             ".ext -out ", base, ".crt"));
    return;
  }
  // `openssl x509` cannot back-date a certificate; `openssl ca` can, with a database.
  const std::string db = absl::StrCat(dir_, "/", ca_, "-db");
  ShellOrFail(absl::StrCat("mkdir -p ", db, " && touch ", db, "/index.txt && ",
                           "{ [ -f ", db, "/serial ] || echo 1000 > ", db, "/serial; }"));
  std::ofstream(db + "/ca.cnf") << "[ca]\ndefault_ca = sect\n[sect]\n"
                                << "database = " << db << "/index.txt\n"
                                << "new_certs_dir = " << db << "\n"
                                << "certificate = " << ca_file() << "\n"
                                << "private_key = " << dir_ << "/" << ca_ << ".key\n"
                                << "serial = " << db << "/serial\n"
                                << "default_md = sha256\npolicy = any\nunique_subject = no\n"
                                << "[any]\ncommonName = supplied\n";
  std::ofstream(base + ".cnf") << "[ext]\n" << sans << "\n";
  ShellOrFail(absl::StrCat("openssl ca -batch -config ", db, "/ca.cnf -in ", base, ".csr -out ",
                           base, ".crt -startdate 20200101000000Z -enddate 20200102000000Z ",
                           "-extfile ", base, ".cnf -extensions ext"));
}

std::string TestPki::ca_file() const { return absl::StrCat(dir_, "/", ca_, ".crt"); }
std::string TestPki::cert(const std::string& name) const {
  return absl::StrCat(dir_, "/", name, ".crt");
}
std::string TestPki::key(const std::string& name) const {
  return absl::StrCat(dir_, "/", name, ".key");
}

TlsOptions TestPki::Options(const std::string& name) const {
  TlsOptions o;
  o.ca_file = ca_file();
  if (!name.empty()) {
    o.cert_file = cert(name);
    o.key_file = key(name);
  }
  return o;
}

}  // namespace shardps
