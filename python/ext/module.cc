// shardps._core: the C++ side of the shardps Python package (python/shardps), over the same
// client library the daemons use (client/ps_client.h).
#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>

#include "python/ext/client.h"
#include "python/ext/errors.h"
#include "python/ext/evaluator.h"
#include "python/ext/worker.h"
#include "rpc/auth.h"
#include "rpc/tls.h"

namespace py = pybind11;

PYBIND11_MODULE(_core, m) {
  m.doc() = "shardps' C++ core: use the shardps package, not this module.";
  shardps::python::DefineClient(m);
  shardps::python::DefineWorker(m);
  shardps::python::DefineEvaluator(m);
  // The process's TLS (rpc/tls.h), as a daemon's flags set it: every channel made after it
  // (clients, the worker's and evaluator's calls to the chief) and every server it starts.
  m.def(
      "_set_tls",
      [](const std::string& cert_file, const std::string& key_file, const std::string& ca_file,
         bool client_auth, int64_t refresh_s, const std::string& token_file,
         const std::string& tokens_file, bool insecure) {
        shardps::TlsOptions options;
        options.cert_file = cert_file;
        options.key_file = key_file;
        options.ca_file = ca_file;
        options.client_auth = client_auth;
        options.refresh_s = refresh_s;
        options.insecure = insecure;
        shardps::python::ThrowIfError(options.Validate());
        shardps::AuthOptions auth;
        auth.token_file = token_file;
        auth.tokens_file = tokens_file;
        shardps::python::ThrowIfError(auth.Validate(options));
        shardps::SetProcessTls(options);
        shardps::python::ThrowIfError(shardps::SetProcessAuth(auth, options));
      },
      py::arg("cert_file"), py::arg("key_file"), py::arg("ca_file"), py::arg("client_auth"),
      py::arg("refresh_s"), py::arg("token_file") = "", py::arg("tokens_file") = "",
      py::arg("insecure") = false);
}
