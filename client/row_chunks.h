// How PsClient cuts one shard's share of a row call (PullRows, PushRows) into requests of
// bounded size, so that no ordinary call approaches the ps's reply bound
// (ShardStore::Options::max_reply_bytes) or gRPC's message sizes, however many ids a caller
// passes.
//
// Thread-safety: a pure function.
#ifndef SHARDPS_CLIENT_ROW_CHUNKS_H_
#define SHARDPS_CLIENT_ROW_CHUNKS_H_

#include <cstdint>
#include <vector>

namespace shardps {

// One request's rows: ids (local to the shard) and, for each, its position in the caller's
// ids (where its row is read from or written to).
struct RowChunk {
  std::vector<int64_t> ids;
  std::vector<int64_t> positions;
};

// Splits `ids` (with `positions`, as long) into chunks of at most `max_rows` rows (at least
// one row each; max_rows < 1 counts as 1). Ids that fit in one chunk stay one chunk, in
// their order. Otherwise:
//  - !keep_duplicates_together: consecutive runs of the ids, in order.
//  - keep_duplicates_together: every occurrence of an id goes to the same chunk, in order of
//    appearance, ids in order of their first appearance; so a ps that sums a request's
//    duplicates before one update (PushRows) updates each row once, with the same sum. A
//    chunk holds more than max_rows rows only when one id alone occurs more often.
// The result depends only on the arguments, so the chunks of a re-run push (and the request
// ids derived from their index) are the same.
std::vector<RowChunk> SplitRows(std::vector<int64_t> ids, std::vector<int64_t> positions,
                                int64_t max_rows, bool keep_duplicates_together);

}  // namespace shardps

#endif  // SHARDPS_CLIENT_ROW_CHUNKS_H_
