#include "client/bucket_move_testing.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/error_detail.h"
#include "common/status_macros.h"

namespace shardps {
namespace testing {

absl::Status CutOffMove(PsClient* client, const VariableLayout& layout, int from, int to,
                        int32_t bucket, bool drop, absl::Duration freeze) {
  const VariableLayout::Shard& source = layout.shards[from];
  const VariableLayout::Shard& target = layout.shards[to];
  auto request = [&](MoveBucketsRequest::Op op, const VariableLayout::Shard& shard) {
    MoveBucketsRequest r;
    r.set_op(op);
    r.set_shard(shard.spec.name());
    r.add_buckets(bucket);
    return r;
  };
  auto call = [&](const VariableLayout::Shard& shard, const MoveBucketsRequest& r,
                  MoveBucketsResponse* response) {
    return Annotate(client->MoveBuckets(shard.ps, r, response),
                    absl::StrCat(MoveBucketsRequest::Op_Name(r.op()), " of bucket ", bucket,
                                 " on ", shard.spec.name()));
  };
  uint32_t since = 0;
  for (bool last : {false, true}) {
    MoveBucketsRequest out = request(MoveBucketsRequest::EXPORT, source);
    out.set_since_epoch(since);
    if (last) {
      out.set_freeze(true);
      out.set_freeze_ms(absl::ToInt64Milliseconds(freeze));
    }
    MoveBucketsResponse exported;
    RETURN_IF_ERROR(call(source, out, &exported));
    MoveBucketsRequest in = request(MoveBucketsRequest::STAGE, target);
    in.set_since_epoch(since);
    in.set_keys(exported.keys());
    in.set_last_steps(exported.last_steps());
    in.set_values(exported.values());
    *in.mutable_deleted_keys() = exported.deleted_keys();
    MoveBucketsResponse staged;
    RETURN_IF_ERROR(call(target, in, &staged));
    since = exported.epoch();
  }
  if (!drop) return absl::OkStatus();
  MoveBucketsRequest d = request(MoveBucketsRequest::DROP, source);
  d.set_routing_version(layout.routing_version + 1);
  d.set_to_ps(target.ps);
  MoveBucketsResponse dropped;
  return call(source, d, &dropped);
}

}  // namespace testing
}  // namespace shardps
