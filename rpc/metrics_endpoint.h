// ServeMetrics: a process's Prometheus endpoint, as every daemon and the Python package's
// worker and evaluator serve it (--metrics_port, SHARDPS_METRICS_PORT): `registry` rendered at
// /metrics on host:port, with the process's TLS (client certificates when it requires them),
// under the binding rule (plaintext beyond loopback only with --insecure), and a gauge of the
// seconds until each of its certificates expires (read at each scrape, so a renewal shows).
//
// Thread-safety: call once per registry; the server renders on its own thread.
#ifndef SHARDPS_RPC_METRICS_ENDPOINT_H_
#define SHARDPS_RPC_METRICS_ENDPOINT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "metrics/http_server.h"
#include "metrics/registry.h"
#include "rpc/tls.h"

namespace shardps {

// INVALID_ARGUMENT (a bad configuration: exit 2) when the binding rule refuses host:port;
// UNAVAILABLE when it cannot bind. `registry` must outlive the server.
absl::StatusOr<std::unique_ptr<metrics::HttpServer>> ServeMetrics(metrics::Registry* registry,
                                                                  const std::string& host,
                                                                  int port,
                                                                  const TlsOptions& tls);

// "https://host:port/metrics" (or http) of a started server, for the start line.
std::string MetricsUrl(const std::string& host, const metrics::HttpServer& server,
                       const TlsOptions& tls);

}  // namespace shardps

#endif  // SHARDPS_RPC_METRICS_ENDPOINT_H_
