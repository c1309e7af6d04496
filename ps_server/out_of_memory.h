// A request that needs more memory than the ps has fails with RESOURCE_EXHAUSTED instead of
// taking the ps down: every store call runs inside Guarded, which turns std::bad_alloc into
// that status. Every update allocates (and copies blocks on write) before it writes, so a
// request that fails this way has changed nothing.
//
// Thread-safety: pure functions.
#ifndef SHARDPS_PS_SERVER_OUT_OF_MEMORY_H_
#define SHARDPS_PS_SERVER_OUT_OF_MEMORY_H_

#include <new>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "ps_server/shard.h"

namespace shardps {

// What a request that ran out of memory answers: RESOURCE_EXHAUSTED naming `what`.
absl::Status OutOfMemory(absl::string_view what);

// Runs `fn` (returning absl::Status), turning std::bad_alloc into OutOfMemory(what).
template <typename Fn>
absl::Status Guarded(absl::string_view what, Fn&& fn) {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return OutOfMemory(what);
  }
}

// The same for a request on one shard ("push to shard 's'"), the message built only on
// failure (the data path pays for no string).
template <typename Fn>
absl::Status Guarded(absl::string_view kind, absl::string_view shard, Fn&& fn) {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return OutOfMemory(absl::StrCat(kind, " ", QuotedShard(shard)));
  }
}

}  // namespace shardps

#endif  // SHARDPS_PS_SERVER_OUT_OF_MEMORY_H_
