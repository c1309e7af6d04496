#include "ps_server/out_of_memory.h"

namespace shardps {

absl::Status OutOfMemory(absl::string_view what) {
  return absl::ResourceExhaustedError(
      absl::StrCat(what, ": the ps ran out of memory; nothing was changed by this request"));
}

}  // namespace shardps
