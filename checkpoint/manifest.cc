#include "checkpoint/manifest.h"

#include <tuple>

#include <algorithm>
#include <limits>
#include <set>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "checkpoint/safetensors.h"
#include "common/status_macros.h"
#include "google/protobuf/util/json_util.h"
#include "nlohmann/json.hpp"

namespace shardps {
namespace {

// Insertion-ordered, so that the file reads in the order of the format's description and
// the embedded job file keeps its own key order.
using Json = nlohmann::ordered_json;

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// A proto as a JSON object: field names as in the .proto, every field present, enums by
// name, 64-bit integers as strings (protobuf's JSON mapping); doubles round-trip exactly.
Json ProtoToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  std::string text;
  const auto status = google::protobuf::util::MessageToJsonString(message, &text, options);
  // Printing a valid message cannot fail; an object keeps the manifest's shape regardless.
  if (!status.ok()) return Json::object();
  return Json::parse(text);
}

Json TensorInfoToJson(const TensorInfo& t) {
  Json out = Json::object();
  out["name"] = t.name();
  out["dtype"] = t.dtype();
  out["shape"] = std::vector<int64_t>(t.shape().begin(), t.shape().end());
  out["data_offsets"] = {t.data_begin(), t.data_end()};
  out["crc32c"] = t.crc32c();
  return out;
}

// Reads a manifest's JSON, naming the field of every error: "variables[2].shards[1].rows".
class Reader {
 public:
  explicit Reader(absl::string_view source) : source_(source) {}

  absl::Status Error(absl::string_view field, absl::string_view what) const {
    return absl::DataLossError(absl::StrCat(source_, ": ", field, ": ", what));
  }

  // `obj` (at `field`) is an object whose keys are all among `allowed`.
  absl::Status Object(const Json& obj, const std::string& field,
                      std::initializer_list<const char*> allowed) const {
    if (!obj.is_object()) return Error(field, absl::StrCat("not an object: ", Brief(obj)));
    for (const auto& [key, value] : obj.items()) {
      bool known = false;
      for (const char* a : allowed) known = known || key == a;
      if (!known) return Error(Join(field, key), "unknown field");
    }
    return absl::OkStatus();
  }

  // The member `key` of `obj` (checked an object): nullptr with an error when missing.
  absl::StatusOr<const Json*> Member(const Json& obj, const std::string& field,
                                     const char* key) const {
    const auto it = obj.find(key);
    if (it == obj.end()) return Error(Join(field, key), "missing");
    return &*it;
  }

  absl::Status Int(const Json& obj, const std::string& field, const char* key, int64_t min,
                   int64_t max, int64_t* out) const {
    ASSIGN_OR_RETURN(const Json* v, Member(obj, field, key));
    return IntValue(*v, Join(field, key), min, max, out);
  }
  absl::Status IntValue(const Json& v, const std::string& field, int64_t min, int64_t max,
                        int64_t* out) const {
    if (v.is_number_unsigned()) {
      const uint64_t u = v.get<uint64_t>();
      if (u > static_cast<uint64_t>(max)) return Error(field, absl::StrCat(u, " is above ", max));
      // JSON's non-negative integers parse as unsigned: the lower bound applies to them too.
      if (static_cast<int64_t>(u) < min) return Error(field, absl::StrCat(u, " is below ", min));
      *out = static_cast<int64_t>(u);
      return absl::OkStatus();
    }
    if (!v.is_number_integer()) return Error(field, absl::StrCat("not an integer: ", Brief(v)));
    const int64_t i = v.get<int64_t>();
    if (i < min) return Error(field, absl::StrCat(i, " is below ", min));
    if (i > max) return Error(field, absl::StrCat(i, " is above ", max));
    *out = i;
    return absl::OkStatus();
  }
  template <typename T>
  absl::Status SmallInt(const Json& obj, const std::string& field, const char* key, int64_t min,
                        int64_t max, T* out) const {
    int64_t v = 0;
    RETURN_IF_ERROR(Int(obj, field, key, min, max, &v));
    *out = static_cast<T>(v);
    return absl::OkStatus();
  }
  absl::Status Crc(const Json& obj, const std::string& field, const char* key,
                   uint32_t* out) const {
    return SmallInt(obj, field, key, 0, std::numeric_limits<uint32_t>::max(), out);
  }
  absl::Status Double(const Json& obj, const std::string& field, const char* key,
                      double* out) const {
    ASSIGN_OR_RETURN(const Json* v, Member(obj, field, key));
    if (!v->is_number()) return Error(Join(field, key), absl::StrCat("not a number: ", Brief(*v)));
    *out = v->get<double>();
    return absl::OkStatus();
  }
  absl::Status String(const Json& obj, const std::string& field, const char* key,
                      bool allow_empty, std::string* out) const {
    ASSIGN_OR_RETURN(const Json* v, Member(obj, field, key));
    if (!v->is_string()) return Error(Join(field, key), absl::StrCat("not a string: ", Brief(*v)));
    *out = v->get<std::string>();
    if (!allow_empty && out->empty()) return Error(Join(field, key), "empty");
    return absl::OkStatus();
  }
  absl::Status Bool(const Json& obj, const std::string& field, const char* key, bool* out) const {
    ASSIGN_OR_RETURN(const Json* v, Member(obj, field, key));
    if (!v->is_boolean()) return Error(Join(field, key), absl::StrCat("not a boolean: ", Brief(*v)));
    *out = v->get<bool>();
    return absl::OkStatus();
  }
  absl::Status Array(const Json& obj, const std::string& field, const char* key,
                     const Json** out) const {
    ASSIGN_OR_RETURN(*out, Member(obj, field, key));
    if (!(*out)->is_array()) {
      return Error(Join(field, key), absl::StrCat("not an array: ", Brief(**out)));
    }
    return absl::OkStatus();
  }
  absl::Status Shape(const Json& obj, const std::string& field, const char* key,
                     std::vector<int64_t>* out) const {
    const Json* array = nullptr;
    RETURN_IF_ERROR(Array(obj, field, key, &array));
    out->clear();
    for (size_t i = 0; i < array->size(); ++i) {
      int64_t d = 0;
      RETURN_IF_ERROR(IntValue((*array)[i], Index(Join(field, key), i), 0,
                               std::numeric_limits<int64_t>::max(), &d));
      out->push_back(d);
    }
    return absl::OkStatus();
  }
  absl::Status Proto(const Json& obj, const std::string& field, const char* key,
                     google::protobuf::Message* out) const {
    ASSIGN_OR_RETURN(const Json* v, Member(obj, field, key));
    if (!v->is_object()) return Error(Join(field, key), absl::StrCat("not an object: ", Brief(*v)));
    const auto status = google::protobuf::util::JsonStringToMessage(v->dump(), out);
    if (!status.ok()) return Error(Join(field, key), status.ToString());
    return absl::OkStatus();
  }

  static std::string Join(const std::string& field, absl::string_view key) {
    return field.empty() ? std::string(key) : absl::StrCat(field, ".", key);
  }
  static std::string Index(const std::string& field, size_t i) {
    return absl::StrCat(field, "[", i, "]");
  }
  // A value for an error message, cut short.
  static std::string Brief(const Json& v) {
    std::string text = v.dump();
    if (text.size() > 60) text = text.substr(0, 57) + "...";
    return text;
  }

 private:
  absl::string_view source_;
};

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

absl::Status ParseTensorInfo(const Reader& r, const Json& j, const std::string& field,
                             TensorInfo* t) {
  RETURN_IF_ERROR(r.Object(j, field, {"name", "dtype", "shape", "data_offsets", "crc32c"}));
  std::string name, dtype;
  RETURN_IF_ERROR(r.String(j, field, "name", false, &name));
  RETURN_IF_ERROR(r.String(j, field, "dtype", false, &dtype));
  const int size = DtypeSize(dtype);
  if (size == 0) return r.Error(Reader::Join(field, "dtype"), absl::StrCat("unknown dtype '", dtype, "'"));
  std::vector<int64_t> shape;
  RETURN_IF_ERROR(r.Shape(j, field, "shape", &shape));
  const Json* offsets = nullptr;
  RETURN_IF_ERROR(r.Array(j, field, "data_offsets", &offsets));
  const std::string offsets_field = Reader::Join(field, "data_offsets");
  if (offsets->size() != 2) return r.Error(offsets_field, "not [begin, end]");
  int64_t begin = 0, end = 0;
  RETURN_IF_ERROR(r.IntValue((*offsets)[0], Reader::Index(offsets_field, 0), 0,
                             std::numeric_limits<int64_t>::max(), &begin));
  RETURN_IF_ERROR(r.IntValue((*offsets)[1], Reader::Index(offsets_field, 1), begin,
                             std::numeric_limits<int64_t>::max(), &end));
  int64_t bytes = size;
  for (int64_t d : shape) {
    if (d != 0 && bytes > std::numeric_limits<int64_t>::max() / d) {
      return r.Error(Reader::Join(field, "shape"), "too large");
    }
    bytes *= d;
  }
  if (end - begin != bytes) {
    return r.Error(offsets_field, absl::StrCat("[", begin, ", ", end, ") holds ", end - begin,
                                               " bytes but shape ", ShapeText(shape), " of ",
                                               dtype, " needs ", bytes));
  }
  uint32_t crc = 0;
  RETURN_IF_ERROR(r.Crc(j, field, "crc32c", &crc));
  t->set_name(name);
  t->set_dtype(dtype);
  for (int64_t d : shape) t->add_shape(d);
  t->set_data_begin(begin);
  t->set_data_end(end);
  t->set_crc32c(crc);
  return absl::OkStatus();
}

absl::Status ParseFile(const Reader& r, const Json& j, const std::string& field,
                       DataFileInfo* file) {
  RETURN_IF_ERROR(r.Object(j, field, {"file", "bytes", "crc32c", "header_crc32c", "tensors"}));
  std::string name;
  RETURN_IF_ERROR(r.String(j, field, "file", false, &name));
  // A plain name inside the checkpoint's directory: never a path that leads elsewhere.
  if (name.find('/') != std::string::npos || name == "." || name == ".." ||
      name == "manifest.json") {
    return r.Error(Reader::Join(field, "file"),
                   absl::StrCat("'", name, "' is not a data file name"));
  }
  file->set_file(name);
  int64_t bytes = 0;
  RETURN_IF_ERROR(r.Int(j, field, "bytes", 0, std::numeric_limits<int64_t>::max(), &bytes));
  file->set_bytes(bytes);
  uint32_t crc = 0, header_crc = 0;
  RETURN_IF_ERROR(r.Crc(j, field, "crc32c", &crc));
  RETURN_IF_ERROR(r.Crc(j, field, "header_crc32c", &header_crc));
  file->set_crc32c(crc);
  file->set_header_crc32c(header_crc);
  const Json* tensors = nullptr;
  RETURN_IF_ERROR(r.Array(j, field, "tensors", &tensors));
  std::set<std::string> names;
  int64_t data_end = 0;
  for (size_t i = 0; i < tensors->size(); ++i) {
    const std::string tfield = Reader::Index(Reader::Join(field, "tensors"), i);
    TensorInfo* t = file->add_tensors();
    RETURN_IF_ERROR(ParseTensorInfo(r, (*tensors)[i], tfield, t));
    if (!names.insert(t->name()).second) {
      return r.Error(Reader::Join(tfield, "name"), absl::StrCat("'", t->name(), "' appears twice"));
    }
    if (t->data_begin() != data_end) {
      return r.Error(Reader::Join(tfield, "data_offsets"),
                     absl::StrCat("begins at ", t->data_begin(), ", not where the tensor before it ends (",
                                  data_end, ")"));
    }
    data_end = t->data_end();
  }
  if (bytes < 8 + data_end) {
    return r.Error(Reader::Join(field, "bytes"),
                   absl::StrCat(bytes, " is too few for ", data_end, " bytes of tensors"));
  }
  return absl::OkStatus();
}

absl::Status ParseShard(const Reader& r, const Json& j, const std::string& field,
                        ManifestShard* shard) {
  RETURN_IF_ERROR(r.Object(j, field, {"name", "part", "num_parts", "row_offset", "rows", "ps",
                                      "version", "file", "tensors", "buckets",
                                      "base_checkpoint"}));
  constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
  RETURN_IF_ERROR(r.String(j, field, "name", false, &shard->name));
  RETURN_IF_ERROR(r.SmallInt(j, field, "num_parts", 1, kInt32Max, &shard->num_parts));
  RETURN_IF_ERROR(r.SmallInt(j, field, "part", 0, shard->num_parts - 1, &shard->part));
  RETURN_IF_ERROR(r.Int(j, field, "row_offset", 0, kInt64Max, &shard->row_offset));
  RETURN_IF_ERROR(r.Int(j, field, "rows", 0, kInt64Max, &shard->rows));
  RETURN_IF_ERROR(r.SmallInt(j, field, "ps", 0, kInt32Max, &shard->ps));
  RETURN_IF_ERROR(r.Int(j, field, "version", 0, kInt64Max, &shard->version));
  RETURN_IF_ERROR(r.String(j, field, "file", false, &shard->file));
  ASSIGN_OR_RETURN(const Json* tensors, r.Member(j, field, "tensors"));
  const std::string tfield = Reader::Join(field, "tensors");
  if (!tensors->is_object()) return r.Error(tfield, "not an object");
  shard->tensors.clear();
  for (const auto& [slot, name] : tensors->items()) {
    if (!name.is_string() || name.get<std::string>().empty()) {
      return r.Error(Reader::Join(tfield, absl::StrCat("\"", slot, "\"")),
                     "not a tensor name");
    }
    shard->tensors[slot] = name.get<std::string>();
  }
  if (j.contains("buckets")) {
    const Json* buckets = nullptr;
    RETURN_IF_ERROR(r.Array(j, field, "buckets", &buckets));
    const std::string bfield = Reader::Join(field, "buckets");
    if (buckets->size() != 2) return r.Error(bfield, "not [begin, end]");
    int64_t begin = 0, end = 0;
    RETURN_IF_ERROR(r.IntValue((*buckets)[0], bfield, 0, kInt32Max, &begin));
    RETURN_IF_ERROR(r.IntValue((*buckets)[1], bfield, begin + 1, kInt32Max, &end));
    shard->bucket_begin = static_cast<int32_t>(begin);
    shard->bucket_end = static_cast<int32_t>(end);
  }
  if (j.contains("base_checkpoint")) {
    RETURN_IF_ERROR(r.Int(j, field, "base_checkpoint", 0, kInt64Max, &shard->base_checkpoint));
  }
  return absl::OkStatus();
}

absl::Status ParseVariable(const Reader& r, const Json& j, const std::string& field,
                           ManifestVariable* v) {
  RETURN_IF_ERROR(r.Object(j, field, {"name", "shape", "dtype", "partitioner", "slots",
                                      "optimizer", "initializer", "update", "shards",
                                      "dynamic"}));
  if (j.contains("dynamic")) {
    const std::string dfield = Reader::Join(field, "dynamic");
    RETURN_IF_ERROR(r.Object(j["dynamic"], dfield, {"num_buckets"}));
    RETURN_IF_ERROR(r.SmallInt(j["dynamic"], dfield, "num_buckets", 1, 1 << 20, &v->num_buckets));
  }
  RETURN_IF_ERROR(r.String(j, field, "name", false, &v->name));
  RETURN_IF_ERROR(r.Shape(j, field, "shape", &v->shape));
  RETURN_IF_ERROR(r.String(j, field, "dtype", false, &v->dtype));
  if (DtypeSize(v->dtype) == 0) {
    return r.Error(Reader::Join(field, "dtype"), absl::StrCat("unknown dtype '", v->dtype, "'"));
  }
  RETURN_IF_ERROR(r.String(j, field, "partitioner", true, &v->partitioner));
  const Json* slots = nullptr;
  RETURN_IF_ERROR(r.Array(j, field, "slots", &slots));
  v->slots.clear();
  for (size_t i = 0; i < slots->size(); ++i) {
    const Json& s = (*slots)[i];
    const std::string sfield = Reader::Index(Reader::Join(field, "slots"), i);
    if (!s.is_string() || s.get<std::string>().empty()) return r.Error(sfield, "not a slot name");
    for (const std::string& earlier : v->slots) {
      if (earlier == s.get<std::string>()) return r.Error(sfield, absl::StrCat("'", earlier, "' appears twice"));
    }
    v->slots.push_back(s.get<std::string>());
  }
  RETURN_IF_ERROR(r.Proto(j, field, "optimizer", &v->optimizer));
  RETURN_IF_ERROR(r.Proto(j, field, "initializer", &v->initializer));
  RETURN_IF_ERROR(r.Proto(j, field, "update", &v->update));
  const Json* shards = nullptr;
  RETURN_IF_ERROR(r.Array(j, field, "shards", &shards));
  v->shards.clear();
  for (size_t i = 0; i < shards->size(); ++i) {
    v->shards.emplace_back();
    RETURN_IF_ERROR(ParseShard(r, (*shards)[i], Reader::Index(Reader::Join(field, "shards"), i),
                               &v->shards.back()));
  }
  return absl::OkStatus();
}

// Shards cover the variable's rows in order, each naming the parameters and every slot in a
// listed file, with the shard's shape and the variable's dtype.
using TensorIndex = absl::flat_hash_map<std::pair<std::string, std::string>, const TensorInfo*>;
using FileIndex = absl::flat_hash_map<std::string, const DataFileInfo*>;

absl::Status CheckDynamicShards(const Reader& r, const ManifestVariable& v,
                                const std::string& field,
                                const absl::flat_hash_map<std::string, const DataFileInfo*>& files,
                                const TensorIndex& tensors) {
  if (v.shape.size() != 2 || v.shape[0] != 0 || v.shape[1] <= 0) {
    return r.Error(Reader::Join(field, "shape"),
                   absl::StrCat(ShapeText(v.shape), " is not a dynamic table's [0, dim]"));
  }
  int32_t next = 0;
  for (size_t i = 0; i < v.shards.size(); ++i) {
    const ManifestShard& shard = v.shards[i];
    const std::string sfield = Reader::Index(Reader::Join(field, "shards"), i);
    if (shard.bucket_begin != next || shard.bucket_end <= shard.bucket_begin) {
      return r.Error(Reader::Join(sfield, "buckets"),
                     absl::StrCat("[", shard.bucket_begin, ", ", shard.bucket_end,
                                  "), but the shards before it end at bucket ", next));
    }
    next = shard.bucket_end;
    if (files.find(shard.file) == files.end()) {
      return r.Error(Reader::Join(sfield, "file"),
                     absl::StrCat("'", shard.file, "' is not listed under \"files\""));
    }
    const std::string tfield = Reader::Join(sfield, "tensors");
    // Each tensor: its dtype and shape ({-1}: any length).
    std::vector<std::tuple<std::string, std::string, std::vector<int64_t>>> wanted = {
        {"", v.dtype, {shard.rows, v.shape[1]}},
        {kKeysTensor, "I64", {shard.rows}},
        {kLastStepsTensor, "U32", {shard.rows}},
        {kDeletedKeysTensor, "I64", {-1}}};
    for (const std::string& slot : v.slots) wanted.push_back({slot, v.dtype, {shard.rows, v.shape[1]}});
    for (const auto& [slot, dtype, shape] : wanted) {
      const auto it = shard.tensors.find(slot);
      const std::string nfield = Reader::Join(tfield, absl::StrCat("\"", slot, "\""));
      if (it == shard.tensors.end()) return r.Error(nfield, "missing");
      const auto found = tensors.find(std::make_pair(shard.file, it->second));
      if (found == tensors.end()) {
        return r.Error(nfield, absl::StrCat("tensor '", it->second, "' is not in file '",
                                            shard.file, "'"));
      }
      std::vector<int64_t> got(found->second->shape().begin(), found->second->shape().end());
      std::vector<int64_t> want = shape;
      if (want == std::vector<int64_t>{-1} && got.size() == 1) want = got;
      if (got != want || found->second->dtype() != dtype) {
        return r.Error(nfield, absl::StrCat("tensor '", it->second, "' is ",
                                            found->second->dtype(), " ", ShapeText(got),
                                            ", expected ", dtype, " ", ShapeText(want)));
      }
    }
  }
  if (next != v.num_buckets) {
    return r.Error(Reader::Join(field, "shards"),
                   absl::StrCat("cover buckets [0, ", next, ") of ", v.num_buckets));
  }
  return absl::OkStatus();
}

absl::Status CheckShards(const Reader& r, const ManifestVariable& v, const std::string& field,
                         const absl::flat_hash_map<std::string, const DataFileInfo*>& files,
                         const TensorIndex& tensors) {
  if (v.num_buckets > 0) return CheckDynamicShards(r, v, field, files, tensors);
  const int64_t rows = v.shape.empty() ? 1 : v.shape[0];
  int64_t next_row = 0;
  for (size_t i = 0; i < v.shards.size(); ++i) {
    const ManifestShard& shard = v.shards[i];
    const std::string sfield = Reader::Index(Reader::Join(field, "shards"), i);
    if (shard.row_offset != next_row) {
      return r.Error(Reader::Join(sfield, "row_offset"),
                     absl::StrCat(shard.row_offset, ", but the shards before it end at row ",
                                  next_row));
    }
    next_row += shard.rows;
    if (next_row > rows) {
      return r.Error(Reader::Join(sfield, "rows"),
                     absl::StrCat(shard.rows, " rows from row ", shard.row_offset,
                                  " run past the variable's ", rows, " rows"));
    }
    const auto file = files.find(shard.file);
    if (file == files.end()) {
      return r.Error(Reader::Join(sfield, "file"),
                     absl::StrCat("'", shard.file, "' is not listed under \"files\""));
    }
    std::vector<int64_t> shape = v.shape;
    if (!shape.empty()) shape[0] = shard.rows;
    const std::string tfield = Reader::Join(sfield, "tensors");
    std::vector<std::string> wanted = {""};
    wanted.insert(wanted.end(), v.slots.begin(), v.slots.end());
    for (const auto& [slot, name] : shard.tensors) {
      if (std::find(wanted.begin(), wanted.end(), slot) == wanted.end()) {
        return r.Error(tfield, absl::StrCat("\"", slot, "\" is not a slot of the variable"));
      }
    }
    for (const std::string& slot : wanted) {
      const auto it = shard.tensors.find(slot);
      if (it == shard.tensors.end()) {
        return r.Error(tfield, slot.empty() ? std::string("the parameters (\"\") are missing")
                                            : absl::StrCat("slot \"", slot, "\" is missing"));
      }
      const auto found = tensors.find(std::make_pair(shard.file, it->second));
      const TensorInfo* tensor = found == tensors.end() ? nullptr : found->second;
      const std::string nfield = Reader::Join(tfield, absl::StrCat("\"", slot, "\""));
      if (tensor == nullptr) {
        return r.Error(nfield, absl::StrCat("tensor '", it->second, "' is not in file '",
                                            shard.file, "'"));
      }
      const std::vector<int64_t> got(tensor->shape().begin(), tensor->shape().end());
      if (got != shape || tensor->dtype() != v.dtype) {
        return r.Error(nfield, absl::StrCat("tensor '", it->second, "' is ", tensor->dtype(), " ",
                                            ShapeText(got), ", the shard is ", v.dtype, " ",
                                            ShapeText(shape)));
      }
    }
  }
  if (next_row != rows) {
    return r.Error(Reader::Join(field, "shards"),
                   absl::StrCat("cover rows [0, ", next_row, ") of ", rows));
  }
  return absl::OkStatus();
}

// "format" and "format_version" (checked before the other keys, so that another format's
// file is named as such), then the top-level keys.
absl::Status ParseFormat(const Reader& r, const Json& j, Manifest* m) {
  std::string format;
  RETURN_IF_ERROR(r.String(j, "", "format", false, &format));
  if (format != kManifestFormat) {
    return r.Error("format", absl::StrCat("'", format, "', expected '", kManifestFormat, "'"));
  }
  int64_t version = 0;
  RETURN_IF_ERROR(r.Int(j, "", "format_version", 0, std::numeric_limits<int32_t>::max(), &version));
  if (version != kManifestFormatVersion) {
    return r.Error("format_version", absl::StrCat(version, " is not supported (this build reads ",
                                                  kManifestFormatVersion, ")"));
  }
  RETURN_IF_ERROR(r.Object(j, "", {"format", "format_version", "checkpoint_id", "job_id",
                                   "generation", "unix_time", "final", "job", "progress",
                                   "variables", "files", "eval"}));
  m->format_version = static_cast<int>(version);
  return absl::OkStatus();
}

// checkpoint_id, job_id, generation, unix_time, final and the optional job object.
absl::Status ParseIdentity(const Reader& r, const Json& j, Manifest* m) {
  RETURN_IF_ERROR(r.Int(j, "", "checkpoint_id", 0, kInt64Max, &m->checkpoint_id));
  RETURN_IF_ERROR(r.String(j, "", "job_id", true, &m->job_id));
  RETURN_IF_ERROR(r.Int(j, "", "generation", 0, kInt64Max, &m->generation));
  RETURN_IF_ERROR(r.Double(j, "", "unix_time", &m->unix_time));
  RETURN_IF_ERROR(r.Bool(j, "", "final", &m->final));
  if (const auto job = j.find("job"); job != j.end()) {
    if (!job->is_object()) return r.Error("job", absl::StrCat("not an object: ", Reader::Brief(*job)));
    m->job_json = job->dump();
  }
  return absl::OkStatus();
}

absl::Status ParseProgress(const Reader& r, const Json& j, ManifestProgress* p) {
  ASSIGN_OR_RETURN(const Json* progress, r.Member(j, "", "progress"));
  RETURN_IF_ERROR(r.Object(*progress, "progress", {"steps_done", "total_steps",
                                                   "steps_per_epoch", "epoch", "batch_index"}));
  RETURN_IF_ERROR(r.Int(*progress, "progress", "steps_done", 0, kInt64Max, &p->steps_done));
  RETURN_IF_ERROR(r.Int(*progress, "progress", "total_steps", 0, kInt64Max, &p->total_steps));
  RETURN_IF_ERROR(r.Int(*progress, "progress", "steps_per_epoch", 0, kInt64Max,
                        &p->steps_per_epoch));
  RETURN_IF_ERROR(r.Int(*progress, "progress", "epoch", 0, kInt64Max, &p->epoch));
  RETURN_IF_ERROR(r.Int(*progress, "progress", "batch_index", 0, kInt64Max, &p->batch_index));
  return absl::OkStatus();
}

// "files" into m->files, each name once; indexes them by name and their tensors by
// (file, tensor name), pointing into m->files.
absl::Status ParseFiles(const Reader& r, const Json& j, Manifest* m, FileIndex* by_name,
                        TensorIndex* tensors) {
  const Json* files = nullptr;
  RETURN_IF_ERROR(r.Array(j, "", "files", &files));
  m->files.resize(files->size());
  for (size_t i = 0; i < files->size(); ++i) {
    const std::string field = Reader::Index("files", i);
    RETURN_IF_ERROR(ParseFile(r, (*files)[i], field, &m->files[i]));
    if (!by_name->emplace(m->files[i].file(), &m->files[i]).second) {
      return r.Error(Reader::Join(field, "file"), absl::StrCat("'", m->files[i].file(), "' appears twice"));
    }
    for (const TensorInfo& t : m->files[i].tensors()) {
      tensors->emplace(std::make_pair(m->files[i].file(), t.name()), &t);
    }
  }
  return absl::OkStatus();
}

// "variables" into m->variables, each name once, each variable's shards checked against
// the files (CheckShards) before the next variable is read.
absl::Status ParseVariables(const Reader& r, const Json& j, const FileIndex& files,
                            const TensorIndex& tensors, Manifest* m) {
  const Json* variables = nullptr;
  RETURN_IF_ERROR(r.Array(j, "", "variables", &variables));
  m->variables.resize(variables->size());
  std::set<std::string> names;
  for (size_t i = 0; i < variables->size(); ++i) {
    const std::string field = Reader::Index("variables", i);
    ManifestVariable& v = m->variables[i];
    RETURN_IF_ERROR(ParseVariable(r, (*variables)[i], field, &v));
    if (!names.insert(v.name).second) {
      return r.Error(Reader::Join(field, "name"), absl::StrCat("'", v.name, "' appears twice"));
    }
    RETURN_IF_ERROR(CheckShards(r, v, field, files, tensors));
  }
  return absl::OkStatus();
}

// The optional "eval" object.
absl::Status ParseEval(const Reader& r, const Json& j, Manifest* m) {
  const auto eval = j.find("eval");
  if (eval == j.end()) return absl::OkStatus();
  RETURN_IF_ERROR(r.Object(*eval, "eval", {"accuracy", "loss", "step"}));
  ManifestEval e;
  RETURN_IF_ERROR(r.Double(*eval, "eval", "accuracy", &e.accuracy));
  RETURN_IF_ERROR(r.Double(*eval, "eval", "loss", &e.loss));
  RETURN_IF_ERROR(r.Int(*eval, "eval", "step", 0, kInt64Max, &e.step));
  m->eval = e;
  return absl::OkStatus();
}

}  // namespace

const ManifestVariable* Manifest::FindVariable(absl::string_view name) const {
  for (const ManifestVariable& v : variables) {
    if (v.name == name) return &v;
  }
  return nullptr;
}

const DataFileInfo* Manifest::FindFile(absl::string_view file) const {
  for (const DataFileInfo& f : files) {
    if (f.file() == file) return &f;
  }
  return nullptr;
}

std::string ManifestToJson(const Manifest& m) {
  Json out = Json::object();
  out["format"] = kManifestFormat;
  out["format_version"] = m.format_version;
  out["checkpoint_id"] = m.checkpoint_id;
  out["job_id"] = m.job_id;
  out["generation"] = m.generation;
  out["unix_time"] = m.unix_time;
  out["final"] = m.final;
  if (!m.job_json.empty()) {
    // Not an object (a caller's bug) stays visible as a string, which ParseManifest refuses.
    Json job = Json::parse(m.job_json, nullptr, /*allow_exceptions=*/false);
    out["job"] = job.is_object() ? std::move(job) : Json(m.job_json);
  }
  out["progress"] = {{"steps_done", m.progress.steps_done},
                     {"total_steps", m.progress.total_steps},
                     {"steps_per_epoch", m.progress.steps_per_epoch},
                     {"epoch", m.progress.epoch},
                     {"batch_index", m.progress.batch_index}};
  Json variables = Json::array();
  for (const ManifestVariable& v : m.variables) {
    Json var = Json::object();
    var["name"] = v.name;
    var["shape"] = v.shape;
    var["dtype"] = v.dtype;
    var["partitioner"] = v.partitioner;
    var["slots"] = v.slots;
    var["optimizer"] = ProtoToJson(v.optimizer);
    var["initializer"] = ProtoToJson(v.initializer);
    var["update"] = ProtoToJson(v.update);
    if (v.num_buckets > 0) var["dynamic"] = {{"num_buckets", v.num_buckets}};
    Json shards = Json::array();
    for (const ManifestShard& s : v.shards) {
      Json shard = Json::object();
      shard["name"] = s.name;
      shard["part"] = s.part;
      shard["num_parts"] = s.num_parts;
      shard["row_offset"] = s.row_offset;
      shard["rows"] = s.rows;
      shard["ps"] = s.ps;
      shard["version"] = s.version;
      shard["file"] = s.file;
      Json tensors = Json::object();
      for (const auto& [slot, name] : s.tensors) tensors[slot] = name;
      shard["tensors"] = std::move(tensors);
      if (v.num_buckets > 0) {
        shard["buckets"] = {s.bucket_begin, s.bucket_end};
        shard["base_checkpoint"] = s.base_checkpoint;
      }
      shards.push_back(std::move(shard));
    }
    var["shards"] = std::move(shards);
    variables.push_back(std::move(var));
  }
  out["variables"] = std::move(variables);
  Json files = Json::array();
  for (const DataFileInfo& f : m.files) {
    Json file = Json::object();
    file["file"] = f.file();
    file["bytes"] = f.bytes();
    file["crc32c"] = f.crc32c();
    file["header_crc32c"] = f.header_crc32c();
    Json tensors = Json::array();
    for (const TensorInfo& t : f.tensors()) tensors.push_back(TensorInfoToJson(t));
    file["tensors"] = std::move(tensors);
    files.push_back(std::move(file));
  }
  out["files"] = std::move(files);
  if (m.eval.has_value()) {
    out["eval"] = {{"accuracy", m.eval->accuracy}, {"loss", m.eval->loss}, {"step", m.eval->step}};
  }
  // Invalid UTF-8 in a name becomes U+FFFD rather than an exception.
  return out.dump(2, ' ', false, nlohmann::detail::error_handler_t::replace) + "\n";
}

absl::StatusOr<Manifest> ParseManifest(absl::string_view json, absl::string_view source) {
  const Reader r(source);
  Json j;
  try {
    j = Json::parse(json.begin(), json.end());
  } catch (const nlohmann::json::exception& e) {
    return absl::DataLossError(absl::StrCat(source, ": invalid JSON: ", e.what()));
  }
  if (!j.is_object()) return absl::DataLossError(absl::StrCat(source, ": not a JSON object"));
  Manifest m;
  RETURN_IF_ERROR(ParseFormat(r, j, &m));
  RETURN_IF_ERROR(ParseIdentity(r, j, &m));
  RETURN_IF_ERROR(ParseProgress(r, j, &m.progress));
  // The file and tensor indexes point into m.files, which is not resized after ParseFiles.
  FileIndex files;
  TensorIndex tensors;
  RETURN_IF_ERROR(ParseFiles(r, j, &m, &files, &tensors));
  RETURN_IF_ERROR(ParseVariables(r, j, files, tensors, &m));
  RETURN_IF_ERROR(ParseEval(r, j, &m));
  return m;
}

}  // namespace shardps
