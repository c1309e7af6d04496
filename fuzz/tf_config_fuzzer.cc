// Fuzz target: TF_CONFIG parsing (common/tf_config.h). The input is the JSON text. A config
// that parses is read back through every accessor, and the address of each of its tasks
// must be found again by Address().
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/string_view.h"
#include "common/tf_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view json(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<shardps::TfConfig> config = shardps::ParseTfConfig(json);
  if (!config.ok()) return 0;
  (void)config->DebugString();
  (void)config->TaskAddress();
  for (const auto& [type, tasks] : config->cluster) {
    if (config->NumTasks(type) != static_cast<int>(tasks.size())) std::abort();
    for (int i = 0; i < static_cast<int>(tasks.size()); ++i) {
      absl::StatusOr<std::string> address = config->Address(type, i);
      if (!address.ok() || *address != tasks[static_cast<size_t>(i)]) {
        std::fprintf(stderr, "Address(%s, %d) does not give the cluster's address back\n",
                     type.c_str(), i);
        std::abort();
      }
    }
    if (config->Address(type, static_cast<int>(tasks.size())).ok()) std::abort();
  }
  return 0;
}
