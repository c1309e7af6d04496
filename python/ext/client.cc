#include "python/ext/client.h"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/ps_client.h"
#include "client/serial_executor.h"
#include "coordinator/job_spec.h"
#include "google/protobuf/util/json_util.h"
#include "partitioners/partitioner.h"
#include "partitioners/placement.h"
#include "python/ext/arrays.h"
#include "python/ext/call.h"
#include "python/ext/errors.h"

namespace shardps {
namespace python {
namespace {

namespace py = pybind11;

// How long Close waits for interrupted calls to end before it lets them go.
constexpr absl::Duration kCloseWait = absl::Seconds(30);

// `json` (a variable's update, as shardps.client serialises it: UpdateSpec's fields in
// protobuf's JSON form) into `update`; InvalidArgument naming `what` when a field is unknown
// or of the wrong type.
absl::Status ParseUpdate(const std::string& json, const std::string& what, UpdateSpec* update) {
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  const auto status = google::protobuf::util::JsonStringToMessage(json, update, options);
  if (status.ok()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(what, ": ", status.message().as_string()));
}

// "variables[i] ("name"): " before a message.
absl::Status InVariable(const absl::Status& status, int index, const std::string& name) {
  if (status.ok()) return status;
  return absl::Status(status.code(),
                      absl::StrCat("variables[", index, "] (\"", name, "\"): ", status.message()));
}

// One variable from the dict shardps.client.Variable.to_spec() makes: name, shape, the JSON
// of its initializer and optimizer (parsed as a job file's, coordinator/job_spec.h) and of
// its update, and a dynamic table's options.
absl::StatusOr<VariableDef> ToVariableDef(const py::dict& spec, int index) {
  VariableDef def;
  def.name = spec["name"].cast<std::string>();
  def.shape = spec["shape"].cast<std::vector<int64_t>>();
  absl::StatusOr<InitializerSpec> initializer = ParseInitializerField(
      spec["initializer"].cast<std::string>(), "initializer", spec["seed"].cast<uint64_t>());
  if (!initializer.ok()) return InVariable(initializer.status(), index, def.name);
  def.initializer = *std::move(initializer);
  absl::StatusOr<OptimizerSpec> optimizer =
      ParseOptimizerField(spec["optimizer"].cast<std::string>(), "optimizer");
  if (!optimizer.ok()) return InVariable(optimizer.status(), index, def.name);
  def.optimizer = *std::move(optimizer);
  absl::Status update = ParseUpdate(spec["update"].cast<std::string>(), "update", &def.update);
  if (!update.ok()) return InVariable(update, index, def.name);
  if (!spec["dynamic"].is_none()) {
    const py::dict dynamic = spec["dynamic"].cast<py::dict>();
    DynamicTableDef table;
    table.num_buckets = dynamic["num_buckets"].cast<int32_t>();
    table.admit_after = dynamic["admit_after"].cast<int32_t>();
    table.ttl_steps = dynamic["ttl_steps"].cast<int64_t>();
    table.max_rows = dynamic["max_rows"].cast<int64_t>();
    def.dynamic = table;
  }
  return def;
}

PullOptions ToPullOptions(int64_t min_version, double wait_timeout_s, bool exact_version) {
  PullOptions options;
  options.min_version = min_version;
  options.wait_timeout = absl::Seconds(wait_timeout_s);
  options.exact_version = exact_version;
  return options;
}

struct PushArgs {
  std::optional<int64_t> sync_step;
  int replica = 0;
  uint64_t idempotency_key = 0;
  int64_t generation = 0;
  const PullVersions* base_versions = nullptr;
  std::optional<int64_t> job_step;

  // The options of a push waited on by `waiter`: the base versions copied into its call, so
  // that a push that outlives its Python caller (interrupted) reads no Python object.
  PushOptions ToOptions(Waiter& waiter) const {
    PushOptions options = ToOptions();
    if (base_versions != nullptr) {
      waiter.call().versions = *base_versions;
      options.base_versions = &waiter.call().versions;
    }
    return options;
  }

  PushOptions ToOptions() const {
    PushOptions options;
    options.has_sync = sync_step.has_value();
    if (sync_step.has_value()) {
      options.sync.set_step(*sync_step);
      options.sync.set_replica(replica);
    }
    options.idempotency_key = idempotency_key;
    options.generation = generation;
    options.step = job_step;
    return options;
  }
};

py::dict HealthDict(const HealthResponse& h) {
  py::dict d;
  d["task_type"] = h.task_type();
  d["task_index"] = h.task_index();
  d["status"] = h.status();
  d["num_shards"] = h.num_shards();
  d["bytes"] = h.bytes();
  d["uptime_ms"] = h.uptime_ms();
  d["incarnation"] = h.incarnation();
  d["generation"] = h.generation();
  d["memory_available_bytes"] = h.memory_available_bytes();
  d["memory_budget_bytes"] = h.memory_budget_bytes();
  return d;
}

py::dict LayoutDict(const VariableLayout& layout) {
  py::dict d;
  d["name"] = layout.name;
  d["shape"] = py::tuple(py::cast(layout.shape));
  d["dynamic"] = layout.dynamic;
  d["num_buckets"] = layout.num_buckets;
  py::list shards;
  for (const VariableLayout::Shard& s : layout.shards) {
    py::dict shard;
    shard["name"] = s.spec.name();
    shard["ps"] = s.ps;
    shard["row_offset"] = s.row_offset;
    shard["rows"] = s.rows;
    if (layout.dynamic) shard["buckets"] = py::make_tuple(s.buckets.begin, s.buckets.end);
    shards.append(shard);
  }
  d["shards"] = shards;
  return d;
}

class Client {
 public:
  Client(std::vector<std::string> ps, double rpc_timeout_s, int max_attempts,
         int64_t max_chunk_bytes, int connections_per_ps) {
    PsClient::Options options;
    options.rpc_timeout = absl::Seconds(rpc_timeout_s);
    options.max_attempts = max_attempts;
    options.max_chunk_bytes = max_chunk_bytes;
    client_ = ValueOrThrow(NewGrpcPsClient(ps, options, connections_per_ps));
  }

  // Over a client someone else made (a Worker's job's), which this one shares.
  explicit Client(std::shared_ptr<PsClient> client) : client_(std::move(client)) {}

  ~Client() {
    // Interrupted calls still use the client and the parked arrays: wait for them (they end
    // by their deadlines).
    if (client_ != nullptr) parking_.Drain(absl::InfiniteDuration());
  }

  int num_ps() { return Live().num_ps(); }

  void Close() {
    if (client_ == nullptr) return;
    parking_.Drain(kCloseWait);
    control_.reset();
    WithoutGil([&] {
      client_.reset();
      return 0;
    });
  }

  void CreateVariables(const py::list& specs, const std::string& partitioner_spec,
                       const std::string& placement) {
    PsClient& client = Live();
    std::vector<VariableDef> defs;
    for (size_t i = 0; i < specs.size(); ++i) {
      defs.push_back(ValueOrThrow(ToVariableDef(specs[i].cast<py::dict>(), static_cast<int>(i))));
    }
    std::shared_ptr<Partitioner> partitioner = ValueOrThrow(ParsePartitioner(partitioner_spec));
    std::shared_ptr<Placer> placer = ValueOrThrow(ParsePlacement(placement, client.num_ps()));
    Control([&client, defs = std::move(defs), partitioner, placer] {
      return client.CreateVariables(defs, *partitioner, placer.get());
    });
  }

  void Discover() {
    PsClient& client = Live();
    Control([&client] { return client.Discover(); });
  }

  std::vector<std::string> VariableNames() { return Live().VariableNames(); }

  py::dict Layout(const std::string& name) { return LayoutDict(ValueOrThrow(Live().GetLayout(name))); }

  py::list Health() {
    PsClient& client = Live();
    auto responses = std::make_shared<std::vector<HealthResponse>>();
    Control([&client, responses] { return client.Health(responses.get()); });
    py::list out;
    for (const HealthResponse& h : *responses) out.append(HealthDict(h));
    return out;
  }

  // Pulls several dense variables at once: `outs` maps names to arrays to fill, or None for
  // arrays the call allocates. Returns name -> array.
  py::dict PullMany(const std::vector<std::string>& names, const py::dict& outs,
                    int64_t min_version, double wait_timeout_s, bool exact_version,
                    PullVersions* versions) {
    PsClient& client = Live();
    Waiter waiter(&parking_);
    std::vector<VariableLayout> layouts;
    int64_t owned = 0;
    for (const std::string& name : names) {
      layouts.push_back(ValueOrThrow(client.GetLayout(name)));
      ThrowIfError(CheckDenseSize(layouts.back(), "pull", layouts.back().num_elements));
      if (!outs.contains(name) || outs[py::str(name)].is_none()) owned += layouts.back().num_elements;
    }
    waiter.call().out.resize(owned);
    std::vector<PullTarget> targets;
    int64_t offset = 0;
    for (size_t i = 0; i < names.size(); ++i) {
      const std::string& name = names[i];
      if (outs.contains(name) && !outs[py::str(name)].is_none()) {
        py::object out = outs[py::str(name)];
        targets.push_back({name, ValueOrThrow(FloatsOut(out, absl::StrCat("out[\"", name, "\"]"),
                                                        layouts[i].num_elements))});
        waiter.Keep(out);
      } else {
        targets.push_back(
            {name, absl::MakeSpan(waiter.call().out).subspan(offset, layouts[i].num_elements)});
        offset += layouts[i].num_elements;
      }
    }
    client.PullAsync(std::move(targets), ToPullOptions(min_version, wait_timeout_s, exact_version),
                     &waiter.call().versions, waiter.Callback());
    ThrowIfError(waiter.Wait());
    if (versions != nullptr) *versions = waiter.call().versions;
    return Results(names, layouts, outs, std::move(waiter.call().out),
                   [](const VariableLayout& l) { return l.shape; });
  }

  void PushMany(const py::dict& grads, const PushArgs& args) {
    PsClient& client = Live();
    Waiter waiter(&parking_);
    std::vector<PushSource> sources;
    for (const auto& [key, value] : grads) {
      const std::string name = key.cast<std::string>();
      const VariableLayout layout = ValueOrThrow(client.GetLayout(name));
      ThrowIfError(CheckDenseSize(layout, "push", layout.num_elements));
      sources.push_back({name, ValueOrThrow(FloatsIn(value, absl::StrCat("grads[\"", name, "\"]"),
                                                     layout.num_elements))});
      waiter.Keep(py::reinterpret_borrow<py::object>(value));
    }
    client.PushAsync(std::move(sources), args.ToOptions(waiter), waiter.Callback());
    ThrowIfError(waiter.Wait());
  }

  // Rows of several tables: `ids` maps names to int64 id arrays, `outs` names to arrays to
  // fill (or None). Returns name -> (len(ids), row width) array.
  py::dict PullRowsMany(const py::dict& ids, const py::dict& outs, int64_t min_version,
                        double wait_timeout_s, bool exact_version, PullVersions* versions) {
    PsClient& client = Live();
    Waiter waiter(&parking_);
    std::vector<std::string> names;
    std::vector<VariableLayout> layouts;
    std::vector<absl::Span<const int64_t>> id_spans;
    int64_t owned = 0;
    for (const auto& [key, value] : ids) {
      names.push_back(key.cast<std::string>());
      layouts.push_back(ValueOrThrow(client.GetLayout(names.back())));
      id_spans.push_back(ValueOrThrow(IdsIn(value, absl::StrCat("ids[\"", names.back(), "\"]"))));
      waiter.Keep(py::reinterpret_borrow<py::object>(value));
      if (!outs.contains(names.back()) || outs[py::str(names.back())].is_none()) {
        owned += static_cast<int64_t>(id_spans.back().size()) * layouts.back().row_width;
      }
    }
    waiter.call().out.resize(owned);
    std::vector<RowsPullTarget> targets;
    int64_t offset = 0;
    for (size_t i = 0; i < names.size(); ++i) {
      const int64_t floats = static_cast<int64_t>(id_spans[i].size()) * layouts[i].row_width;
      if (outs.contains(names[i]) && !outs[py::str(names[i])].is_none()) {
        py::object out = outs[py::str(names[i])];
        targets.push_back({names[i], id_spans[i],
                           ValueOrThrow(FloatsOut(out, absl::StrCat("out[\"", names[i], "\"]"), floats))});
        waiter.Keep(out);
      } else {
        targets.push_back({names[i], id_spans[i],
                           absl::MakeSpan(waiter.call().out).subspan(offset, floats)});
        offset += floats;
      }
    }
    client.PullRowsManyAsync(std::move(targets),
                             ToPullOptions(min_version, wait_timeout_s, exact_version),
                             &waiter.call().versions, waiter.Callback());
    ThrowIfError(waiter.Wait());
    if (versions != nullptr) *versions = waiter.call().versions;
    size_t index = 0;
    return Results(names, layouts, outs, std::move(waiter.call().out),
                   [&index, &id_spans](const VariableLayout& l) {
                     return std::vector<int64_t>{static_cast<int64_t>(id_spans[index++].size()),
                                                 l.row_width};
                   });
  }

  void PushRowsMany(const py::dict& ids, const py::dict& grads, const PushArgs& args) {
    PsClient& client = Live();
    Waiter waiter(&parking_);
    std::vector<RowsPushSource> sources;
    for (const auto& [key, value] : ids) {
      const std::string name = key.cast<std::string>();
      const VariableLayout layout = ValueOrThrow(client.GetLayout(name));
      const absl::Span<const int64_t> id_span =
          ValueOrThrow(IdsIn(value, absl::StrCat("ids[\"", name, "\"]")));
      if (!grads.contains(key)) {
        ThrowStatus(absl::InvalidArgumentError(
            absl::StrCat("grads: no gradient for \"", name, "\", whose ids were given")));
      }
      py::object grad = grads[key];
      sources.push_back({name, id_span,
                         ValueOrThrow(FloatsIn(grad, absl::StrCat("grads[\"", name, "\"]"),
                                               static_cast<int64_t>(id_span.size()) *
                                                   layout.row_width))});
      waiter.Keep(py::reinterpret_borrow<py::object>(value));
      waiter.Keep(grad);
    }
    if (grads.size() != ids.size()) {
      ThrowStatus(absl::InvalidArgumentError("grads: a gradient for a table without ids"));
    }
    client.PushRowsManyAsync(std::move(sources), args.ToOptions(waiter), waiter.Callback());
    ThrowIfError(waiter.Wait());
  }

  void Assign(const std::string& name, const py::object& values) {
    PsClient& client = Live();
    Waiter waiter(&parking_);
    const VariableLayout layout = ValueOrThrow(client.GetLayout(name));
    ThrowIfError(CheckDenseSize(layout, "assign", layout.num_elements));
    const absl::Span<const float> span = ValueOrThrow(FloatsIn(values, "values", layout.num_elements));
    waiter.Keep(values);
    client.AssignAsync(name, span, waiter.Callback());
    ThrowIfError(waiter.Wait());
  }

 private:
  PsClient& Live() {
    if (client_ == nullptr) ThrowStatus(absl::FailedPreconditionError("the client is closed"));
    parking_.Sweep();
    return *client_;
  }

  // Runs a blocking control call on the control thread and waits for it as for a data call.
  void Control(std::function<absl::Status()> fn) {
    if (control_ == nullptr) control_ = std::make_unique<SerialExecutor>();
    Waiter waiter(&parking_);
    auto done = waiter.Callback();
    control_->Schedule([fn = std::move(fn), done = std::move(done)] { done(fn()); });
    ThrowIfError(waiter.Wait());
  }

  // name -> array: the caller's `out` where given, else a slice of `owned` in order (one
  // array owns the whole buffer; the others view it).
  template <typename ShapeOf>
  static py::dict Results(const std::vector<std::string>& names,
                          const std::vector<VariableLayout>& layouts, const py::dict& outs,
                          std::vector<float> owned, ShapeOf shape_of) {
    py::dict results;
    py::array base = OwningArray(std::move(owned), {0});
    const float* data = static_cast<const float*>(base.data());
    int64_t offset = 0;
    for (size_t i = 0; i < names.size(); ++i) {
      const std::vector<int64_t> shape = shape_of(layouts[i]);
      if (outs.contains(names[i]) && !outs[py::str(names[i])].is_none()) {
        results[py::str(names[i])] = outs[py::str(names[i])];
        continue;
      }
      int64_t size = 1;
      for (int64_t d : shape) size *= d;
      std::vector<py::ssize_t> dims(shape.begin(), shape.end());
      results[py::str(names[i])] = py::array_t<float>(dims, data + offset, base);
      offset += size;
    }
    return results;
  }

  std::shared_ptr<PsClient> client_;
  Parking parking_;
  // Declared after client_: destroyed first, its closures (which use client_) run to the end.
  std::unique_ptr<SerialExecutor> control_;
};

}  // namespace

py::object WrapClient(std::shared_ptr<PsClient> client) {
  return py::cast(std::make_unique<Client>(std::move(client)));
}

void DefineClient(py::module_& m) {
  py::class_<PullVersions>(m, "Versions",
                           "Shard versions a pull read: pass it to the push of gradients "
                           "computed on what was pulled (base_versions).")
      .def(py::init<>())
      .def_readonly("min_version", &PullVersions::min_version)
      .def_readonly("max_version", &PullVersions::max_version)
      .def_readonly("shards", &PullVersions::shards)
      .def("__repr__", [](const PullVersions& v) {
        return absl::StrCat("Versions(min_version=", v.min_version,
                            ", max_version=", v.max_version, ", shards=", v.shards.size(), ")");
      });

  py::class_<PushArgs>(m, "_PushArgs")
      .def(py::init([](std::optional<int64_t> sync_step, int replica, uint64_t idempotency_key,
                       int64_t generation, const PullVersions* base_versions,
                       std::optional<int64_t> job_step) {
             return PushArgs{sync_step,     replica,       idempotency_key,
                             generation,    base_versions, job_step};
           }),
           py::arg("sync_step"), py::arg("replica"), py::arg("idempotency_key"),
           py::arg("generation"), py::arg("base_versions"), py::arg("job_step") = py::none());

  py::class_<Client>(m, "_Client")
      .def(py::init<std::vector<std::string>, double, int, int64_t, int>(), py::arg("ps"),
           py::arg("rpc_timeout"), py::arg("max_attempts"), py::arg("max_chunk_bytes"),
           py::arg("connections_per_ps"))
      .def_property_readonly("num_ps", &Client::num_ps)
      .def("close", &Client::Close)
      .def("create_variables", &Client::CreateVariables)
      .def("discover", &Client::Discover)
      .def("variable_names", &Client::VariableNames)
      .def("layout", &Client::Layout)
      .def("health", &Client::Health)
      .def("pull_many", &Client::PullMany, py::arg("names"), py::arg("outs"),
           py::arg("min_version"), py::arg("wait_timeout"), py::arg("exact_version"),
           py::arg("versions").none(true))
      .def("push_many", &Client::PushMany, py::arg("grads"), py::arg("args"))
      .def("pull_rows_many", &Client::PullRowsMany, py::arg("ids"), py::arg("outs"),
           py::arg("min_version"), py::arg("wait_timeout"), py::arg("exact_version"),
           py::arg("versions").none(true))
      .def("push_rows_many", &Client::PushRowsMany, py::arg("ids"), py::arg("grads"),
           py::arg("args"))
      .def("assign", &Client::Assign);
}

}  // namespace python
}  // namespace shardps
