// CallBatches: groups the chunks of a pull or push by ps into batches of at most `max_bytes`
// (and at least one chunk) each: one call per ps for a step's many small shards, several
// calls in parallel for a large transfer. `Batch` is default-constructible with an int64_t
// `bytes` member (0 at first).
//
// Thread-safety: not thread-safe (one operation's, while it is built).
#ifndef SHARDPS_CLIENT_CALL_BATCHES_H_
#define SHARDPS_CLIENT_CALL_BATCHES_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace shardps {

template <typename Batch>
class CallBatches {
 public:
  CallBatches(int num_ps, int64_t max_bytes)
      : open_(static_cast<size_t>(num_ps)), max_(max_bytes) {}

  // The batch for a chunk of `bytes` bound for ps `ps`: the ps's open batch, or a new one
  // when the chunk would take a non-empty open batch past max_bytes.
  Batch* For(int ps, int64_t bytes) {
    Batch*& open = open_[static_cast<size_t>(ps)];
    if (open == nullptr || (open->bytes > 0 && open->bytes + bytes > max_)) {
      all_.emplace_back(ps, std::make_unique<Batch>());
      open = all_.back().second.get();
    }
    open->bytes += bytes;
    return open;
  }

  size_t size() const { return all_.size(); }

  // Every batch with its ps, in the order they were made, handing over their ownership.
  std::vector<std::pair<int, std::unique_ptr<Batch>>> Take() { return std::move(all_); }

 private:
  std::vector<Batch*> open_;
  std::vector<std::pair<int, std::unique_ptr<Batch>>> all_;
  const int64_t max_;
};

}  // namespace shardps

#endif  // SHARDPS_CLIENT_CALL_BATCHES_H_
