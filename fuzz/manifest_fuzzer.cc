// Fuzz target: checkpoint manifests (checkpoint/manifest.h). The input is manifest.json. A
// manifest that parses must be written back by ManifestToJson as a manifest that parses to
// the same text again.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/string_view.h"
#include "checkpoint/manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view json(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<shardps::Manifest> manifest = shardps::ParseManifest(json, "manifest.json");
  if (!manifest.ok()) return 0;
  for (const shardps::ManifestVariable& v : manifest->variables) {
    if (manifest->FindVariable(v.name) == nullptr) std::abort();
    for (const shardps::ManifestShard& s : v.shards) {
      if (manifest->FindFile(s.file) == nullptr) std::abort();
    }
  }
  const std::string text = shardps::ManifestToJson(*manifest);
  absl::StatusOr<shardps::Manifest> again = shardps::ParseManifest(text, "manifest.json");
  if (!again.ok()) {
    std::fprintf(stderr, "ManifestToJson wrote a manifest ParseManifest refuses: %s\n%s\n",
                 again.status().ToString().c_str(), text.c_str());
    std::abort();
  }
  if (shardps::ManifestToJson(*again) != text) {
    std::fprintf(stderr, "a manifest does not round-trip:\n%s\n", text.c_str());
    std::abort();
  }
  return 0;
}
