#include "python/ext/metrics_port.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "python/ext/errors.h"
#include "rpc/grpc_util.h"
#include "rpc/metrics_endpoint.h"
#include "rpc/tls.h"

namespace shardps {
namespace python {

MetricsPort::MetricsPort(const TfConfig& config, int port, const std::string& what) {
  if (port == 0) return;
  if (port < 0 || port > 65535) {
    ThrowStatus(absl::InvalidArgumentError(
        absl::StrCat(what, ": metrics_port must be 0 to 65535, got ", port)));
  }
  // The task's host, as the daemons bind theirs; loopback when TF_CONFIG names none.
  const std::string address = config.TaskAddress().empty() ? "127.0.0.1:0" : config.TaskAddress();
  const std::string listen = ValueOrThrow(ListenAddress(address, ""));
  const std::string host = listen.substr(0, listen.rfind(':'));
  absl::StatusOr<std::unique_ptr<metrics::HttpServer>> server =
      ServeMetrics(&registry_, host, port, ProcessTls());
  if (!server.ok()) {
    ThrowStatus(absl::Status(server.status().code(),
                             absl::StrCat(what, ": ", server.status().message())));
  }
  server_ = *std::move(server);
  url_ = MetricsUrl(host, *server_, ProcessTls());
}

}  // namespace python
}  // namespace shardps
