// RequestIds: the ids of a client's mutating requests (the ps detects a retried duplicate by
// its id). Fresh ids are this client's random high 32 bits and a counter, so two clients'
// ids do not meet; a push with PushOptions::idempotency_key gets ids derived from the key
// and what each request covers, the same in every process, so that a step re-run by another
// worker is recognised by the ps as a duplicate.
//
// Thread-safety: thread-safe.
#ifndef SHARDPS_CLIENT_REQUEST_IDS_H_
#define SHARDPS_CLIENT_REQUEST_IDS_H_

#include <atomic>
#include <cstdint>
#include <string>

#include "client/ps_client_types.h"

namespace shardps {

class RequestIds {
 public:
  RequestIds();

  // A fresh id (never 0).
  uint64_t Next();
  // Next() when options.idempotency_key is 0, else the id of the request of a push with
  // that key to `shard` of `variable` at `row_begin` (a row push's chunk c: -1 - c). Never 0.
  uint64_t ForPush(const PushOptions& options, const std::string& variable,
                   const std::string& shard, int64_t row_begin);

 private:
  uint64_t base_ = 0;
  std::atomic<uint64_t> next_{0};
};

}  // namespace shardps

#endif  // SHARDPS_CLIENT_REQUEST_IDS_H_
