#include "model/dlrm/dlrm_spec.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"

namespace shardps {
namespace {

constexpr char kPrefix[] = "dlrm:";
constexpr int kDefaultDim = 16;

absl::string_view PoolingName(DlrmPooling p) { return p == DlrmPooling::kMean ? "mean" : "sum"; }
absl::string_view InteractionName(DlrmInteraction i) {
  return i == DlrmInteraction::kDot ? "dot" : "concat";
}

absl::Status KeyError(absl::string_view key, absl::string_view value, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("dlrm spec: key \"", key, "\" value \"", value, "\": ", why));
}

absl::StatusOr<int> ParseInt(absl::string_view key, absl::string_view value, int lo, int hi) {
  int v = 0;
  if (!absl::SimpleAtoi(value, &v)) return KeyError(key, value, "not an integer");
  if (v < lo || v > hi) {
    return KeyError(key, value, absl::StrCat("out of range [", lo, ", ", hi, "]"));
  }
  return v;
}

absl::StatusOr<std::vector<int>> ParseWidths(absl::string_view key, absl::string_view value) {
  std::vector<int> widths;
  if (value.empty()) return widths;
  for (absl::string_view part : absl::StrSplit(value, ',')) {
    ASSIGN_OR_RETURN(int w, ParseInt(key, part, 1, kDlrmMaxWidth));
    widths.push_back(w);
  }
  if (widths.size() > kDlrmMaxLayers) {
    return KeyError(key, value, absl::StrCat("more than ", kDlrmMaxLayers, " layers"));
  }
  return widths;
}

absl::StatusOr<DlrmPooling> ParsePooling(absl::string_view key, absl::string_view value) {
  if (value == "sum") return DlrmPooling::kSum;
  if (value == "mean") return DlrmPooling::kMean;
  return KeyError(key, value, "expected sum or mean");
}

absl::Status CheckWidths(absl::string_view field, const std::vector<int>& widths) {
  if (widths.size() > kDlrmMaxLayers) {
    return absl::InvalidArgumentError(
        absl::StrCat("dlrm spec: ", field, " has ", widths.size(), " layers, more than ",
                     kDlrmMaxLayers));
  }
  for (size_t l = 0; l < widths.size(); ++l) {
    if (widths[l] < 1 || widths[l] > kDlrmMaxWidth) {
      return absl::InvalidArgumentError(absl::StrCat("dlrm spec: ", field, "[", l, "] = ",
                                                     widths[l], " is outside [1, ",
                                                     kDlrmMaxWidth, "]"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

int DlrmSpec::BottomOutputWidth() const { return bottom.empty() ? num_dense : bottom.back(); }

int DlrmSpec::VectorsWidth() const {
  int w = BottomOutputWidth();
  for (const DlrmTableSpec& t : tables) w += t.dim;
  return w;
}

int DlrmSpec::NumVectors() const {
  return static_cast<int>(tables.size()) + (num_dense > 0 ? 1 : 0);
}

int DlrmSpec::InteractionWidth() const {
  if (interaction == DlrmInteraction::kConcat) return VectorsWidth();
  const int n = NumVectors();
  return BottomOutputWidth() + n * (n - 1) / 2;
}

int DlrmSpec::TableColumn(int t) const {
  int col = BottomOutputWidth();
  for (int i = 0; i < t; ++i) col += tables[i].dim;
  return col;
}

int64_t DlrmParamInfo::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

absl::Status ValidateDlrmSpec(const DlrmSpec& spec) {
  if (spec.num_dense < 0 || spec.num_dense > kDlrmMaxWidth) {
    return absl::InvalidArgumentError(absl::StrCat("dlrm spec: num_dense = ", spec.num_dense,
                                                   " is outside [0, ", kDlrmMaxWidth, "]"));
  }
  if (spec.tables.size() > kDlrmMaxTables) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dlrm spec: ", spec.tables.size(), " tables, more than ", kDlrmMaxTables));
  }
  RETURN_IF_ERROR(CheckWidths("bottom", spec.bottom));
  RETURN_IF_ERROR(CheckWidths("top", spec.top));
  if (spec.num_dense == 0 && !spec.bottom.empty()) {
    return absl::InvalidArgumentError(
        "dlrm spec: bottom MLP given but the data has no dense features (num_dense = 0)");
  }
  std::set<std::string> names;
  for (size_t t = 0; t < spec.tables.size(); ++t) {
    const DlrmTableSpec& table = spec.tables[t];
    if (table.name.empty() || table.name.find_first_of("=;, \t\n") != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("dlrm spec: table ", t, " has a bad name \"", table.name,
                       "\" (empty, or one of '=;,' or whitespace in it)"));
    }
    if (!names.insert(table.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("dlrm spec: table name \"", table.name, "\" is used twice"));
    }
    if (table.dim < 1 || table.dim > kDlrmMaxDim) {
      return absl::InvalidArgumentError(absl::StrCat("dlrm spec: table \"", table.name,
                                                     "\" dim = ", table.dim,
                                                     " is outside [1, ", kDlrmMaxDim, "]"));
    }
    if (table.vocab_size < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "dlrm spec: table \"", table.name, "\" vocab_size = ", table.vocab_size, " < 0"));
    }
  }
  if (spec.VectorsWidth() == 0) {
    return absl::InvalidArgumentError(
        "dlrm spec: no dense features and no tables: the top MLP has no input");
  }
  if (spec.interaction == DlrmInteraction::kDot) {
    const int d = spec.num_dense > 0 ? spec.BottomOutputWidth()
                                     : (spec.tables.empty() ? 0 : spec.tables[0].dim);
    const std::string first = spec.num_dense > 0
                                  ? std::string("the bottom output")
                                  : absl::StrCat("table \"", spec.tables[0].name, "\"");
    for (const DlrmTableSpec& table : spec.tables) {
      if (table.dim != d) {
        return absl::InvalidArgumentError(absl::StrCat(
            "dlrm spec: interaction=dot needs one dimension for all vectors, but table \"",
            table.name, "\" has dim ", table.dim, " and ", first, " has ", d));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<DlrmSpec> ParseDlrmSpec(absl::string_view text, int num_dense,
                                       absl::Span<const DlrmTableSchema> tables) {
  absl::string_view body = text;
  if (!absl::ConsumePrefix(&body, kPrefix)) {
    return absl::InvalidArgumentError(
        absl::StrCat("dlrm spec \"", text, "\" does not start with \"", kPrefix, "\""));
  }
  DlrmSpec spec;
  spec.num_dense = num_dense;
  absl::flat_hash_map<std::string, int> table_index;
  for (const DlrmTableSchema& t : tables) {
    table_index.emplace(t.name, static_cast<int>(spec.tables.size()));
    DlrmTableSpec ts;
    ts.name = t.name;
    ts.vocab_size = t.vocab_size;
    spec.tables.push_back(ts);
  }
  int dim = kDefaultDim;
  DlrmPooling pooling = DlrmPooling::kSum;
  std::map<int, int> table_dim;
  std::map<int, DlrmPooling> table_pooling;
  std::set<std::string> seen;
  for (absl::string_view item : absl::StrSplit(body, ';', absl::SkipEmpty())) {
    const size_t eq = item.find('=');
    if (eq == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("dlrm spec: \"", item, "\" is not key=value"));
    }
    const absl::string_view key = item.substr(0, eq);
    const absl::string_view value = item.substr(eq + 1);
    if (!seen.insert(std::string(key)).second) return KeyError(key, value, "repeated key");
    if (key == "bottom") {
      ASSIGN_OR_RETURN(spec.bottom, ParseWidths(key, value));
    } else if (key == "top") {
      ASSIGN_OR_RETURN(spec.top, ParseWidths(key, value));
    } else if (key == "interaction") {
      if (value == "concat") {
        spec.interaction = DlrmInteraction::kConcat;
      } else if (value == "dot") {
        spec.interaction = DlrmInteraction::kDot;
      } else {
        return KeyError(key, value, "expected concat or dot");
      }
    } else if (key == "pooling") {
      ASSIGN_OR_RETURN(pooling, ParsePooling(key, value));
    } else if (key == "dim") {
      ASSIGN_OR_RETURN(dim, ParseInt(key, value, 1, kDlrmMaxDim));
    } else if (absl::StartsWith(key, "dim.") || absl::StartsWith(key, "pooling.")) {
      const size_t dot = key.find('.');
      const std::string name(key.substr(dot + 1));
      auto it = table_index.find(name);
      if (it == table_index.end()) {
        return KeyError(key, value, absl::StrCat("no table named \"", name, "\" in the data"));
      }
      if (key[0] == 'd') {
        ASSIGN_OR_RETURN(table_dim[it->second], ParseInt(key, value, 1, kDlrmMaxDim));
      } else {
        ASSIGN_OR_RETURN(table_pooling[it->second], ParsePooling(key, value));
      }
    } else {
      return KeyError(key, value,
                      "unknown key (expected bottom, top, interaction, pooling, dim, "
                      "dim.<table> or pooling.<table>)");
    }
  }
  for (size_t t = 0; t < spec.tables.size(); ++t) {
    auto d = table_dim.find(static_cast<int>(t));
    spec.tables[t].dim = d != table_dim.end() ? d->second : dim;
    auto p = table_pooling.find(static_cast<int>(t));
    spec.tables[t].pooling = p != table_pooling.end() ? p->second : pooling;
  }
  RETURN_IF_ERROR(ValidateDlrmSpec(spec));
  return spec;
}

std::string DlrmSpecToString(const DlrmSpec& spec) {
  const int dim = spec.tables.empty() ? kDefaultDim : spec.tables[0].dim;
  const DlrmPooling pooling = spec.tables.empty() ? DlrmPooling::kSum : spec.tables[0].pooling;
  std::string out = absl::StrCat(kPrefix, "bottom=", absl::StrJoin(spec.bottom, ","),
                                 ";top=", absl::StrJoin(spec.top, ","),
                                 ";interaction=", InteractionName(spec.interaction),
                                 ";pooling=", PoolingName(pooling), ";dim=", dim);
  for (const DlrmTableSpec& t : spec.tables) {
    if (t.dim != dim) absl::StrAppend(&out, ";dim.", t.name, "=", t.dim);
    if (t.pooling != pooling) absl::StrAppend(&out, ";pooling.", t.name, "=", PoolingName(t.pooling));
  }
  return out;
}

std::vector<DlrmParamInfo> DlrmDenseParams(const DlrmSpec& spec) {
  std::vector<DlrmParamInfo> params;
  auto add_mlp = [&params](absl::string_view prefix, int in, const std::vector<int>& widths) {
    for (size_t l = 0; l < widths.size(); ++l) {
      params.push_back({absl::StrCat(prefix, "_", l, "/kernel"), {in, widths[l]}});
      params.push_back({absl::StrCat(prefix, "_", l, "/bias"), {widths[l]}});
      in = widths[l];
    }
  };
  add_mlp("bottom", spec.num_dense, spec.bottom);
  std::vector<int> top = spec.top;
  top.push_back(1);
  add_mlp("top", spec.InteractionWidth(), top);
  return params;
}

absl::Status CheckDlrmDenseParams(const DlrmSpec& spec,
                                  absl::Span<const absl::Span<const float>> params) {
  const std::vector<DlrmParamInfo> infos = DlrmDenseParams(spec);
  if (params.size() != infos.size()) {
    return absl::InvalidArgumentError(absl::StrCat("dlrm: ", params.size(),
                                                   " dense parameters given, the spec has ",
                                                   infos.size()));
  }
  for (size_t i = 0; i < infos.size(); ++i) {
    if (params[i].data() == nullptr ||
        static_cast<int64_t>(params[i].size()) != infos[i].num_elements()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "dlrm: dense parameter ", infos[i].name, " has ", params[i].size(),
          params[i].data() == nullptr ? " floats (null)" : " floats", ", its shape {",
          absl::StrJoin(infos[i].shape, ", "), "} needs ", infos[i].num_elements()));
    }
  }
  return absl::OkStatus();
}

}  // namespace shardps
