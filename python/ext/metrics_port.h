// MetricsPort: the Prometheus endpoint of a shardps.Worker or shardps.Evaluator, as the
// daemons serve theirs (rpc/metrics_endpoint.h): a registry the task's metrics go into, served
// at /metrics on the task's host and `port` with the process's TLS, under the binding rule.
//
// Thread-safety: the registry is thread-safe; construct and destroy from one thread.
#ifndef SHARDPS_PYTHON_EXT_METRICS_PORT_H_
#define SHARDPS_PYTHON_EXT_METRICS_PORT_H_

#include <memory>
#include <string>

#include "common/tf_config.h"
#include "metrics/http_server.h"
#include "metrics/registry.h"

namespace shardps {
namespace python {

class MetricsPort {
 public:
  // Serves at once; `port` 0 serves nothing (registry() still counts). Raises ValueError
  // (the binding rule, naming `what`) or the error of a port that cannot be bound.
  MetricsPort(const TfConfig& config, int port, const std::string& what);

  metrics::Registry* registry() { return &registry_; }
  // "http(s)://host:port/metrics", or "" when not serving.
  const std::string& url() const { return url_; }

 private:
  metrics::Registry registry_;
  std::unique_ptr<metrics::HttpServer> server_;
  std::string url_;
};

}  // namespace python
}  // namespace shardps

#endif  // SHARDPS_PYTHON_EXT_METRICS_PORT_H_
