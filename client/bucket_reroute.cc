#include "client/bucket_reroute.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "absl/base/config.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/error_detail.h"
#include "common/status_macros.h"

namespace shardps {

bool IsBucketMoved(const absl::Status& status) {
  return status.code() == absl::StatusCode::kAborted &&
         DetailKind(status) == ErrorDetail::BUCKET_MOVED;
}

bool IsBucketMoving(const absl::Status& status) {
  if (!IsBucketMoved(status)) return false;
  const std::optional<ErrorDetail> detail = GetDetail(status);
  return detail.has_value() && detail->moving();
}

int FirstUnapplied(const absl::Status& status, int items) {
  const std::optional<ErrorDetail> detail = GetDetail(status);
  if (!detail.has_value()) return 0;
  return std::clamp(detail->batch_item(), 0, std::max(0, items - 1));
}

absl::StatusOr<std::vector<std::pair<int, PushRowsRequest>>> RerouteRowPushes(
    const std::vector<const PushRowsRequest*>& unapplied, const VariableLayout& layout,
    bool sync, int64_t max_rows,
    const std::function<uint64_t(const std::string& shard, int64_t chunk)>& id_for) {
  static_assert(ABSL_IS_LITTLE_ENDIAN, "ids_bytes holds little-endian int64s");
  std::vector<std::pair<int, PushRowsRequest>> out;
  if (unapplied.empty()) return out;
  const int64_t width = layout.row_width;
  const size_t row_bytes = static_cast<size_t>(width) * sizeof(float);
  // Every key once, its row summed over the requests (a key is in one request, but a sum
  // keeps a repeated one right).
  std::vector<int64_t> keys;
  std::vector<float> rows;
  absl::flat_hash_map<int64_t, size_t> at;
  std::map<std::string, int64_t> base_versions;
  std::map<std::string, bool> refused_shards;
  for (const PushRowsRequest* r : unapplied) {
    if (r->ids_bytes().size() % sizeof(int64_t) != 0 || !r->ids().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("rerouting a push to ", r->shard(), ": ids must be in ids_bytes"));
    }
    const size_t n = r->ids_bytes().size() / sizeof(int64_t);
    if (r->data().size() != n * row_bytes) {
      return absl::InvalidArgumentError(absl::StrCat("rerouting a push to ", r->shard(), ": ",
                                                     n, " ids and ", r->data().size(),
                                                     " bytes of rows of width ", width));
    }
    refused_shards[r->shard()] = true;
    if (r->base_version() != 0) base_versions[r->shard()] = r->base_version();
    for (size_t k = 0; k < n; ++k) {
      int64_t key;
      std::memcpy(&key, r->ids_bytes().data() + k * sizeof(int64_t), sizeof(key));
      const float* row = reinterpret_cast<const float*>(r->data().data() + k * row_bytes);
      auto [it, fresh] = at.try_emplace(key, keys.size());
      if (fresh) {
        keys.push_back(key);
        rows.insert(rows.end(), row, row + width);
      } else {
        float* sum = rows.data() + it->second * static_cast<size_t>(width);
        for (int64_t j = 0; j < width; ++j) sum[j] += row[j];
      }
    }
  }
  std::vector<std::vector<int64_t>> shard_keys(layout.shards.size());
  std::vector<std::vector<int64_t>> shard_positions(layout.shards.size());
  RETURN_IF_ERROR(RouteRows(layout, keys, /*every_shard=*/false,
                            [&](int shard, std::vector<int64_t> local,
                                std::vector<int64_t> positions) {
                              shard_keys[shard] = std::move(local);
                              shard_positions[shard] = std::move(positions);
                            }));
  const PushRowsRequest& first = *unapplied.front();
  for (size_t s = 0; s < layout.shards.size(); ++s) {
    const std::string& name = layout.shards[s].spec.name();
    const int64_t n = static_cast<int64_t>(shard_keys[s].size());
    if (n == 0 && !(sync && refused_shards.count(name) > 0)) continue;
    const int64_t per = sync ? std::max<int64_t>(1, n) : std::max<int64_t>(1, max_rows);
    const int64_t chunks = std::max<int64_t>(1, (n + per - 1) / per);
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t begin = c * per;
      const int64_t end = std::min(n, begin + per);
      PushRowsRequest request;
      request.set_request_id(id_for(name, c));
      request.set_shard(name);
      request.mutable_ids_bytes()->assign(
          reinterpret_cast<const char*>(shard_keys[s].data() + begin),
          static_cast<size_t>(end - begin) * sizeof(int64_t));
      std::string* data = request.mutable_data();
      data->resize(static_cast<size_t>(end - begin) * row_bytes);
      for (int64_t k = begin; k < end; ++k) {
        std::memcpy(&(*data)[static_cast<size_t>(k - begin) * row_bytes],
                    rows.data() + shard_positions[s][k] * width, row_bytes);
      }
      if (first.has_sync()) *request.mutable_sync() = first.sync();
      request.set_generation(first.generation());
      auto base = base_versions.find(name);
      request.set_base_version(base == base_versions.end() ? 0 : base->second);
      if (first.has_step()) request.set_step(first.step());
      request.set_routing_version(layout.routing_version);
      out.emplace_back(layout.shards[s].ps, std::move(request));
    }
  }
  return out;
}

}  // namespace shardps
