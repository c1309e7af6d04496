#include "client/variable_layout.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/error_detail.h"
#include "common/status_macros.h"

namespace shardps {
namespace {

int64_t NumElements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// A discovered dense variable's shards, sorted, must cover its rows exactly once.
absl::Status CheckRowsTiled(const std::string& name, VariableLayout* layout) {
  std::sort(layout->shards.begin(), layout->shards.end(),
            [](const VariableLayout::Shard& a, const VariableLayout::Shard& b) {
              return a.row_offset < b.row_offset;
            });
  int64_t next = 0;
  for (const auto& shard : layout->shards) {
    if (shard.row_offset != next) {
      return absl::FailedPreconditionError(absl::StrCat(
          "variable \"", name, "\": shards do not tile its rows (expected a shard at row ", next,
          ", found \"", shard.spec.name(), "\" at row ", shard.row_offset,
          "); is a ps task missing?"));
    }
    next += shard.rows;
  }
  if (next != layout->rows) {
    return absl::FailedPreconditionError(absl::StrCat("variable \"", name, "\": shards cover ",
                                                      next, " of ", layout->rows,
                                                      " rows; is a ps task missing?"));
  }
  return absl::OkStatus();
}

// A discovered dynamic table's shards, sorted, must hold every bucket exactly once. A shard
// may hold none (one added to a running table, which bucket moves then fill): empty shards at
// one place go after the shard that ends there, in part order.
absl::Status CheckBucketsTiled(VariableLayout* layout) {
  std::sort(layout->shards.begin(), layout->shards.end(),
            [](const VariableLayout::Shard& a, const VariableLayout::Shard& b) {
              return std::make_tuple(a.buckets.begin, a.buckets.end, a.spec.part()) <
                     std::make_tuple(b.buckets.begin, b.buckets.end, b.spec.part());
            });
  int32_t next = 0;
  for (const auto& shard : layout->shards) {
    if (shard.buckets.begin != next || shard.spec.dynamic().num_buckets() != layout->num_buckets) {
      return absl::FailedPreconditionError(absl::StrCat(
          "dynamic table \"", layout->name, "\": shards do not tile its ", layout->num_buckets,
          " buckets (expected a shard from bucket ", next, ", found \"", shard.spec.name(),
          "\" holding [", shard.buckets.begin, ", ", shard.buckets.end, ") of ",
          shard.spec.dynamic().num_buckets(), "); is a ps task missing?"));
    }
    next = shard.buckets.end;
  }
  if (next != layout->num_buckets) {
    return absl::FailedPreconditionError(
        absl::StrCat("dynamic table \"", layout->name, "\": shards hold buckets [0, ", next,
                     ") of ", layout->num_buckets, "; is a ps task missing?"));
  }
  return absl::OkStatus();
}

}  // namespace

VariableLayout MakeLayout(const std::string& name, const std::vector<int64_t>& shape) {
  VariableLayout layout;
  layout.name = name;
  layout.shape = shape;
  if (shape.size() == 2 && shape[0] == 0) {  // a dynamic table: [0, dim]
    layout.row_width = shape[1];
    return layout;
  }
  layout.num_elements = NumElements(shape);
  layout.rows = shape.empty() ? 1 : shape[0];
  layout.row_width = layout.num_elements / layout.rows;
  return layout;
}

absl::Status CheckVariableDef(const VariableDef& def) {
  if (def.name.empty()) return absl::InvalidArgumentError("variable name is empty");
  for (size_t i = def.dynamic.has_value() ? 1 : 0; i < def.shape.size(); ++i) {
    if (def.shape[i] <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("variable \"", def.name, "\": shape[", i,
                                                     "] is ", def.shape[i],
                                                     "; dimensions must be positive"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<VariableLayout> PlaceDense(const VariableDef& def, const Partitioner& partitioner,
                                          Placer* placer, int num_ps,
                                          std::vector<CreateShardsRequest>* requests) {
  std::vector<ShardSlice> slices;
  if (def.shape.empty()) {
    slices.push_back(ShardSlice{def.name, 0, 1, 0, {}});
  } else {
    absl::StatusOr<int> n = partitioner.NumShards(def.shape, DataType::kFloat32);
    if (!n.ok()) return Annotate(n.status(), absl::StrCat("variable \"", def.name, "\""));
    ASSIGN_OR_RETURN(slices, SliceVariable(def.name, def.shape, *n));
  }
  VariableLayout layout = MakeLayout(def.name, def.shape);
  for (const ShardSlice& slice : slices) {
    ShardSpec spec;
    spec.set_name(slice.name);
    spec.set_variable(def.name);
    spec.set_part(slice.part);
    spec.set_num_parts(slice.num_parts);
    spec.set_row_offset(slice.row_offset);
    for (int64_t d : slice.shape) spec.mutable_shape()->add_dim(d);
    for (int64_t d : def.shape) spec.mutable_full_shape()->add_dim(d);
    *spec.mutable_initializer() = def.initializer;
    *spec.mutable_optimizer() = def.optimizer;
    *spec.mutable_update() = def.update;
    int64_t shard_rows = slice.shape.empty() ? 1 : slice.shape[0];
    int ps = placer->Place(shard_rows * layout.row_width * 4);
    if (ps < 0 || ps >= num_ps) {
      return absl::InternalError(absl::StrCat("placer chose ps ", ps, " of ", num_ps));
    }
    *(*requests)[ps].add_shards() = spec;
    layout.shards.push_back({spec, ps, slice.row_offset, shard_rows});
  }
  return layout;
}

absl::StatusOr<VariableLayout> PlaceDynamic(const VariableDef& def, int num_ps,
                                            std::vector<CreateShardsRequest>* requests) {
  const DynamicTableDef& d = *def.dynamic;
  const std::string where = absl::StrCat("dynamic table \"", def.name, "\": ");
  if (def.shape.size() != 2 || def.shape[0] != 0 || def.shape[1] <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, "shape must be [0, dim] with dim > 0, got [", absl::StrJoin(def.shape, ","), "]"));
  }
  if (d.num_buckets < num_ps) {
    return absl::InvalidArgumentError(absl::StrCat(where, "num_buckets ", d.num_buckets,
                                                   " is below the ", num_ps,
                                                   " ps tasks it is spread over"));
  }
  if (d.max_rows < 0 || d.ttl_steps < 0 || d.admit_after < 0 || d.admit_after > 255) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "max_rows (", d.max_rows, ") and ttl_steps (", d.ttl_steps,
                     ") must be >= 0 and admit_after (", d.admit_after, ") in [0, 255]"));
  }
  VariableLayout layout = MakeLayout(def.name, def.shape);
  layout.dynamic = true;
  layout.num_buckets = d.num_buckets;
  const std::vector<BucketRange> ranges = SplitBuckets(d.num_buckets, num_ps);
  for (int p = 0; p < num_ps; ++p) {
    ShardSpec spec;
    spec.set_name(num_ps == 1 ? def.name : absl::StrCat(def.name, "/part_", p));
    spec.set_variable(def.name);
    spec.set_part(p);
    spec.set_num_parts(num_ps);
    for (int64_t dim : def.shape) {
      spec.mutable_shape()->add_dim(dim);
      spec.mutable_full_shape()->add_dim(dim);
    }
    *spec.mutable_initializer() = def.initializer;
    *spec.mutable_optimizer() = def.optimizer;
    *spec.mutable_update() = def.update;
    DynamicSpec* dyn = spec.mutable_dynamic();
    dyn->set_num_buckets(d.num_buckets);
    dyn->set_bucket_begin(ranges[p].begin);
    dyn->set_bucket_end(ranges[p].end);
    dyn->set_admit_after(d.admit_after);
    dyn->set_ttl_steps(d.ttl_steps);
    // The table's budget in shares of its buckets, rounded up (no shard gets 0: no budget).
    dyn->set_max_rows(d.max_rows == 0
                          ? 0
                          : (d.max_rows * (ranges[p].end - ranges[p].begin) + d.num_buckets - 1) /
                                d.num_buckets);
    *(*requests)[p].add_shards() = spec;
    layout.shards.push_back({spec, p, 0, 0, ranges[p]});
  }
  return layout;
}

absl::StatusOr<std::map<std::string, VariableLayout>> LayoutsFromShards(
    const std::vector<ListShardsResponse>& responses) {
  std::map<std::string, VariableLayout> layouts;
  for (int p = 0; p < static_cast<int>(responses.size()); ++p) {
    for (const ShardInfo& info : responses[p].shards()) {
      const ShardSpec& spec = info.spec();
      auto it = layouts.find(spec.variable());
      if (it == layouts.end()) {
        std::vector<int64_t> shape(spec.full_shape().dim().begin(), spec.full_shape().dim().end());
        it = layouts.emplace(spec.variable(), MakeLayout(spec.variable(), shape)).first;
      }
      if (spec.has_dynamic()) {
        it->second.dynamic = true;
        it->second.num_buckets = spec.dynamic().num_buckets();
        it->second.routing_version = std::max(it->second.routing_version, info.routing_version());
        it->second.shards.push_back(
            {spec, p, 0, 0,
             BucketRange{spec.dynamic().bucket_begin(), spec.dynamic().bucket_end()}});
        continue;
      }
      int64_t rows = spec.shape().dim_size() == 0 ? 1 : spec.shape().dim(0);
      it->second.shards.push_back({spec, p, spec.row_offset(), rows});
    }
  }
  for (auto& [name, layout] : layouts) {
    if (layout.dynamic) {
      RETURN_IF_ERROR(CheckBucketsTiled(&layout));
      continue;
    }
    RETURN_IF_ERROR(CheckRowsTiled(name, &layout));
  }
  return layouts;
}

std::vector<std::string> DynamicTableNames(const std::vector<VariableDef>& defs) {
  std::vector<std::string> tables;
  for (const VariableDef& def : defs) {
    if (def.dynamic.has_value()) tables.push_back(def.name);
  }
  return tables;
}

absl::Status CheckDenseSize(const VariableLayout& layout, const char* what, size_t floats) {
  if (layout.dynamic) {
    return absl::InvalidArgumentError(
        absl::StrCat("variable \"", layout.name, "\" is a dynamic table: it has no whole value to ",
                     what, "; read and write it by key (PullRowsAsync, PushRowsAsync)"));
  }
  if (static_cast<int64_t>(floats) != layout.num_elements) {
    return absl::InvalidArgumentError(
        absl::StrCat("variable \"", layout.name, "\": ", what, " needs ", layout.num_elements,
                     " floats (shape [", absl::StrJoin(layout.shape, ","), "]), got ", floats));
  }
  return absl::OkStatus();
}

int64_t MaxRows(int64_t width, int64_t max_chunk_bytes) {
  return std::max<int64_t>(1, max_chunk_bytes / (width * static_cast<int64_t>(sizeof(float))));
}

void ForEachChunk(
    const VariableLayout& layout, int64_t max_chunk_bytes,
    absl::FunctionRef<void(const VariableLayout::Shard& shard, int64_t row_begin, int64_t row_end)>
        fn) {
  int64_t row_bytes = layout.row_width * 4;
  int64_t rows_per_chunk = std::max<int64_t>(1, max_chunk_bytes / row_bytes);
  for (const VariableLayout::Shard& shard : layout.shards) {
    for (int64_t begin = 0; begin < shard.rows; begin += rows_per_chunk) {
      fn(shard, begin, std::min(shard.rows, begin + rows_per_chunk));
    }
  }
}

absl::Status RouteRows(
    const VariableLayout& layout, absl::Span<const int64_t> ids, bool every_shard,
    absl::FunctionRef<void(int shard, std::vector<int64_t> local, std::vector<int64_t> positions)>
        fn) {
  std::vector<std::vector<int64_t>> local(layout.shards.size());
  std::vector<std::vector<int64_t>> positions(layout.shards.size());
  // Random ids spread evenly: room for a fair share and some, so that few vectors regrow.
  const size_t share = ids.size() / layout.shards.size() + ids.size() / 16 + 16;
  for (size_t s = 0; s < layout.shards.size(); ++s) {
    local[s].reserve(share);
    positions[s].reserve(share);
  }
  if (layout.dynamic) {
    // Keys stay keys: the ps finds their rows. Shards are in bucket order.
    for (size_t i = 0; i < ids.size(); ++i) {
      const int32_t bucket = BucketOf(ids[i], layout.num_buckets);
      auto it = std::upper_bound(
          layout.shards.begin(), layout.shards.end(), bucket,
          [](int32_t b, const VariableLayout::Shard& s) { return b < s.buckets.begin; });
      const size_t shard = (it - layout.shards.begin()) - 1;
      local[shard].push_back(ids[i]);
      positions[shard].push_back(i);
    }
  }
  for (size_t i = 0; !layout.dynamic && i < ids.size(); ++i) {
    int64_t id = ids[i];
    if (id < 0 || id >= layout.rows) {
      return absl::InvalidArgumentError(absl::StrCat("variable \"", layout.name, "\": row id ", id,
                                                     " at position ", i, " is out of range [0, ",
                                                     layout.rows, ")"));
    }
    // Shards are in row order: the last one whose offset is <= id.
    auto it = std::upper_bound(
        layout.shards.begin(), layout.shards.end(), id,
        [](int64_t v, const VariableLayout::Shard& s) { return v < s.row_offset; });
    size_t shard = (it - layout.shards.begin()) - 1;
    local[shard].push_back(id - layout.shards[shard].row_offset);
    positions[shard].push_back(i);
  }
  for (size_t s = 0; s < layout.shards.size(); ++s) {
    if (every_shard || !local[s].empty()) fn(s, std::move(local[s]), std::move(positions[s]));
  }
  return absl::OkStatus();
}

}  // namespace shardps
