#include "rpc/metrics_endpoint.h"

#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/log.h"
#include "metrics/cert_expiry.h"

namespace shardps {

absl::StatusOr<std::unique_ptr<metrics::HttpServer>> ServeMetrics(metrics::Registry* registry,
                                                                  const std::string& host,
                                                                  int port,
                                                                  const TlsOptions& tls) {
  metrics::HttpServerOptions options;
  options.host = host;
  options.port = port;
  if (absl::Status binding = CheckBinding(absl::StrCat(host, ":", port), tls); !binding.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("metrics port: ", binding.message()));
  }
  if (tls.can_serve()) {
    options.cert_file = tls.cert_file;
    options.key_file = tls.key_file;
    options.ca_file = tls.ca_file;
    options.client_auth = tls.client_auth;
  }
  std::vector<std::pair<std::string, std::string>> files;
  if (!tls.cert_file.empty()) files.emplace_back("cert", tls.cert_file);
  if (!tls.ca_file.empty()) files.emplace_back("ca", tls.ca_file);
  if (!files.empty()) {
    // Read at each scrape: a renewed certificate shows at once.
    absl::Status added = registry->AddCallbackGauge(
        "shardps_certificate_expiry_seconds",
        "Seconds until the TLS certificate in each file (cert: this process's, ca: the CA's) "
        "expires; negative once it has.",
        {"file", "path"}, [files](metrics::Sink* sink) {
          for (const auto& [kind, path] : files) {
            absl::StatusOr<double> seconds = metrics::SecondsUntilExpiry(path, absl::Now());
            if (seconds.ok()) sink->Add({kind, path}, *seconds);
          }
        });
    if (!added.ok()) LogError() << added.message();
  }
  return metrics::HttpServer::Start(options, [registry] { return registry->Render(); });
}

std::string MetricsUrl(const std::string& host, const metrics::HttpServer& server,
                       const TlsOptions& tls) {
  return absl::StrCat(tls.can_serve() ? "https://" : "http://", host, ":", server.port(),
                      "/metrics");
}

}  // namespace shardps
