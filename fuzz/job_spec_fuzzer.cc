// Fuzz target: job files (coordinator/job_spec.h). The input is the job file's JSON, parsed
// with an unknown worker count (0) and with 4 workers; also as the value of the "optimizer"
// and "kernel_initializer" fields alone. A job file that parses must round-trip as
// ParseJobSpec documents: ParseJobSpec(JobSpecToJson(spec), 0) gives the same spec back.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/string_view.h"
#include "coordinator/job_spec.h"

namespace {

void CheckRoundTrip(const shardps::JobSpec& spec) {
  const std::string json = shardps::JobSpecToJson(spec);
  absl::StatusOr<shardps::JobSpec> again = shardps::ParseJobSpec(json, 0);
  if (!again.ok()) {
    std::fprintf(stderr, "JobSpecToJson wrote a job file ParseJobSpec refuses: %s\n%s\n",
                 again.status().ToString().c_str(), json.c_str());
    std::abort();
  }
  const std::string json_again = shardps::JobSpecToJson(*again);
  if (json_again != json) {
    std::fprintf(stderr, "a job file does not round-trip:\n%s\n%s\n", json.c_str(),
                 json_again.c_str());
    std::abort();
  }
  (void)shardps::JobSpecToJson(spec, 2);
  (void)shardps::StepsInFlight(spec);
  (void)shardps::ApplyOwnGradient(spec);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view json(reinterpret_cast<const char*>(data), size);
  for (int workers : {0, 4}) {
    absl::StatusOr<shardps::JobSpec> spec = shardps::ParseJobSpec(json, workers);
    if (spec.ok()) CheckRoundTrip(*spec);
  }
  (void)shardps::ParseOptimizerField(json, "optimizer");
  (void)shardps::ParseInitializerField(json, "kernel_initializer", 42);
  return 0;
}
