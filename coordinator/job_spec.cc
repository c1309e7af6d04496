#include "coordinator/job_spec.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <exception>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "common/status_macros.h"
#include "partitioners/buckets.h"
#include "partitioners/partitioner.h"
#include "partitioners/placement.h"
#include "model/dlrm/dlrm_model.h"
#include "model/external/external_model.h"
#include "model/mlp/mlp_spec.h"
#include "model/model.h"

namespace shardps {
namespace {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

constexpr char kDefaultName[] = "job";
constexpr size_t kMaxNameChars = 100;
constexpr int64_t kDefaultBatchSize = 128;
constexpr int64_t kMaxBatchSize = 65536;
constexpr double kDefaultLearningRate = 0.001;
constexpr double kDefaultMomentum = 0.9;
constexpr double kDefaultBeta1 = 0.9;
constexpr double kDefaultBeta2 = 0.999;
constexpr double kDefaultEpsilon = 1e-7;
constexpr double kDefaultInitialAccumulator = 0.1;
constexpr double kDefaultLearningRatePower = -0.5;  // FTRL
constexpr int64_t kDefaultStaleness = 2;
constexpr char kDefaultPartitioner[] = "min_size:262144:4";
constexpr char kDefaultPlacement[] = "round_robin";
constexpr uint64_t kDefaultSeed = 42;
constexpr int64_t kDefaultStepTimeoutMs = 60000;
// A lease covers a whole step on a healthy worker: its pulls, compute and pushes over the
// network, queued behind the worker's other step in flight, and on a worker's first step the
// set-up of its connections (and of CUDA). Below a second a healthy worker cannot be relied on
// to finish in time, and a lease that always expires re-queues every step for ever: the job
// livelocks at step 0. Above an hour, a worker that hangs without dying (a stuck GPU, a
// half-open connection) would stall the job for as long before its steps go to another
// worker; a step is one batch, which no model this system trains needs an hour for.
constexpr int64_t kMinStepTimeoutMs = 1000;
constexpr int64_t kMaxStepTimeoutMs = 3600 * 1000;
constexpr char kDefaultBackend[] = "auto";
constexpr int64_t kMaxStepsInFlight = 2;
constexpr int64_t kMaxInt32 = std::numeric_limits<int32_t>::max();
constexpr int64_t kDefaultCheckpointKeep = 3;
// Checkpoints at most a year apart: a bound far inside what every clock type can add to now.
constexpr int64_t kMaxCheckpointSeconds = int64_t{365} * 24 * 3600;
constexpr size_t kMaxShownChars = 64;
// Variables named in a message, at most.
constexpr size_t kMaxListedNames = 6;

// clang-format off
constexpr absl::string_view kJobKeys[] = {
    "name", "model", "dataset", "data_dir", "batch_size", "epochs", "steps", "optimizer", "mode",
    "staleness", "num_replicas", "sync_backup_workers", "partitioner", "placement", "seed",
    "kernel_initializer", "eval_every_steps", "step_timeout_ms", "steps_in_flight",
    "apply_own_gradient", "backend", "checkpoint", "warm_start", "staleness_lr",
    "delay_compensation", "delay_compensation_adaptive", "embedding_optimizer",
    "dynamic_tables", "variables", "examples_per_epoch", "num_ps"};
constexpr absl::string_view kExternalVariableKeys[] = {"name", "shape", "access", "initializer"};
constexpr absl::string_view kOptimizerKeys[] = {
    "type", "learning_rate", "momentum", "nesterov", "initial_accumulator_value", "beta1", "beta2",
    "epsilon", "decay_rate", "decay_steps", "staircase", "learning_rate_power", "l1", "l2",
    "l2_shrinkage", "beta"};
constexpr absl::string_view kInitializerKeys[] = {
    "type", "value", "minval", "maxval", "mean", "stddev", "seed"};
constexpr absl::string_view kCheckpointKeys[] = {
    "dir", "every_steps", "every_seconds", "keep", "keep_best", "full_every", "cut"};
constexpr absl::string_view kDynamicTablesKeys[] = {
    "num_buckets", "admit_after", "ttl_steps", "max_rows"};
constexpr absl::string_view kWarmStartKeys[] = {"from", "variables", "with_slots"};
// clang-format on

// Enum names as they appear in a job file, in the order an error message lists them.
template <typename E>
struct EnumName {
  absl::string_view name;
  E value;
};
constexpr EnumName<JobSpec::Mode> kModes[] = {
    {"async", JobSpec::ASYNC}, {"sync", JobSpec::SYNC}, {"stale", JobSpec::STALE}};
constexpr EnumName<OptimizerSpec::Type> kOptimizers[] = {{"sgd", OptimizerSpec::SGD},
                                                         {"momentum", OptimizerSpec::MOMENTUM},
                                                         {"adagrad", OptimizerSpec::ADAGRAD},
                                                         {"adam", OptimizerSpec::ADAM},
                                                         {"ftrl", OptimizerSpec::FTRL}};
constexpr EnumName<InitializerSpec::Type> kInitializers[] = {
    {"zeros", InitializerSpec::ZEROS},
    {"constant", InitializerSpec::CONSTANT},
    {"random_uniform", InitializerSpec::RANDOM_UNIFORM},
    {"random_normal", InitializerSpec::RANDOM_NORMAL},
    {"truncated_normal", InitializerSpec::TRUNCATED_NORMAL},
    {"glorot_uniform", InitializerSpec::GLOROT_UNIFORM}};
constexpr EnumName<UpdateSpec::StalenessLr> kStalenessLrs[] = {{"none", UpdateSpec::NONE},
                                                                 {"inverse", UpdateSpec::INVERSE}};
constexpr absl::string_view kBackends[] = {"auto", "cpu", "gpu"};
constexpr EnumName<CheckpointSpec::Cut> kCuts[] = {{"hold", CheckpointSpec::HOLD},
                                                   {"drain", CheckpointSpec::DRAIN}};

// Replaces control characters so that a message, ours or a library's, stays on one line.
std::string OneLine(absl::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  return out;
}

std::string Quote(absl::string_view s) {
  if (s.size() > kMaxShownChars) {
    return absl::StrCat("\"", absl::CHexEscape(s.substr(0, kMaxShownChars)), "...\"");
  }
  return absl::StrCat("\"", absl::CHexEscape(s), "\"");
}

// "a, b or c".
std::string OrList(absl::Span<const absl::string_view> names) {
  if (names.size() <= 1) return absl::StrJoin(names, "");
  return absl::StrCat(absl::StrJoin(names.subspan(0, names.size() - 1), ", "), " or ",
                      names.back());
}

std::string Path(absl::string_view prefix, absl::string_view key) {
  return prefix.empty() ? std::string(key) : absl::StrCat(prefix, ".", key);
}

absl::Status FieldError(absl::string_view path, absl::string_view message) {
  return absl::InvalidArgumentError(OneLine(absl::StrCat("job: \"", path, "\": ", message)));
}

std::string Dump(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// A JSON value as the user wrote it, for "got ..." in messages.
std::string Shown(const Json& value) {
  if (value.is_string()) return Quote(value.get<std::string>());
  std::string text = Dump(value);
  if (text.size() > kMaxShownChars) text = absl::StrCat(text.substr(0, kMaxShownChars), "...");
  return text;
}

// A JSON value with its type, for type errors: `string "128"`, `an object`.
std::string Described(const Json& value) {
  if (value.is_string()) return absl::StrCat("string ", Shown(value));
  if (value.is_boolean()) return absl::StrCat("boolean ", Shown(value));
  if (value.is_number()) return absl::StrCat("number ", Shown(value));
  if (value.is_object()) return "an object";
  if (value.is_array()) return "an array";
  return "null";
}

// Lower case without separators, so that "batchSize" and "batch-size" match "batch_size".
std::string Normalized(absl::string_view key) {
  std::string out;
  for (char c : key) {
    if (c != '_' && c != '-' && c != ' ') out.push_back(absl::ascii_tolower(c));
  }
  return out;
}

size_t EditDistance(absl::string_view a, absl::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1] ? 1 : 0)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// The known key `key` was most likely meant as, or "" when none is close: a known alias
// ("lr"), a near miss in spelling ("epoch", "batchSize"), or a part of exactly one known key
// ("batch", "initializer").
absl::string_view Suggestion(absl::string_view key, absl::Span<const absl::string_view> known) {
  constexpr std::pair<absl::string_view, absl::string_view> kAliases[] = {
      {"lr", "learning_rate"},
      {"optimiser", "optimizer"},
      {"numepochs", "epochs"},
      {"numsteps", "steps"},
      {"initialiser", "kernel_initializer"}};
  const std::string normalized = Normalized(key);
  for (const auto& [alias, target] : kAliases) {
    if (normalized == alias && std::find(known.begin(), known.end(), target) != known.end()) {
      return target;
    }
  }
  const size_t limit = normalized.size() <= 4 ? 1 : 2;
  absl::string_view best;
  size_t best_distance = limit + 1;
  absl::string_view containing;
  int num_containing = 0;
  for (absl::string_view candidate : known) {
    const std::string normalized_candidate = Normalized(candidate);
    const size_t distance = EditDistance(normalized, normalized_candidate);
    if (distance < best_distance) {
      best = candidate;
      best_distance = distance;
    }
    if (normalized.size() >= 4 && absl::StrContains(normalized_candidate, normalized)) {
      containing = candidate;
      ++num_containing;
    }
  }
  if (!best.empty()) return best;
  return num_containing == 1 ? containing : absl::string_view();
}

absl::Status CheckKeys(const Json& object, absl::string_view prefix,
                       absl::Span<const absl::string_view> known) {
  for (auto it = object.begin(); it != object.end(); ++it) {
    const std::string& key = it.key();
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    const absl::string_view suggestion = Suggestion(key, known);
    std::string hint = suggestion.empty()
                           ? absl::StrCat("expected one of ", absl::StrJoin(known, ", "))
                           : absl::StrCat("did you mean \"", Path(prefix, suggestion), "\"?");
    return absl::InvalidArgumentError(
        OneLine(absl::StrCat("job: unknown field ", Quote(Path(prefix, key)), " (", hint, ")")));
  }
  return absl::OkStatus();
}

// Typed access to the members of one JSON object; `prefix` is the object's path in the file
// ("" for the top level, "optimizer"). A member that is absent or null leaves the output as
// it is (the default) and reports present = false.
class Fields {
 public:
  Fields(const Json& object, std::string prefix) : object_(object), prefix_(std::move(prefix)) {}

  std::string PathOf(absl::string_view key) const { return Path(prefix_, key); }

  const Json* Find(absl::string_view key) const {
    auto it = object_.find(std::string(key));
    if (it == object_.end() || it->is_null()) return nullptr;
    return &*it;
  }
  bool Has(absl::string_view key) const { return Find(key) != nullptr; }

  // "must be > 0, got -1" for the member `key`, quoting it as written.
  absl::Status RangeError(absl::string_view key, absl::string_view requirement) const {
    const Json* value = Find(key);
    return FieldError(PathOf(key),
                      absl::StrCat(requirement, ", got ", value ? Shown(*value) : "nothing"));
  }

  absl::Status String(absl::string_view key, std::string* out) const {
    const Json* value = Find(key);
    if (value == nullptr) return absl::OkStatus();
    if (!value->is_string()) return TypeError(key, "a string", *value);
    *out = value->get<std::string>();
    return absl::OkStatus();
  }

  absl::Status Bool(absl::string_view key, bool* out) const {
    const Json* value = Find(key);
    if (value == nullptr) return absl::OkStatus();
    if (!value->is_boolean()) return TypeError(key, "true or false", *value);
    *out = value->get<bool>();
    return absl::OkStatus();
  }

  absl::Status Double(absl::string_view key, double* out) const {
    const Json* value = Find(key);
    if (value == nullptr) return absl::OkStatus();
    if (!value->is_number()) return TypeError(key, "a number", *value);
    const double d = value->get<double>();
    if (!std::isfinite(d)) return RangeError(key, "must be finite");
    *out = d;
    return absl::OkStatus();
  }

  // Integers may be written as integral floats (1e6), which JSON tools often produce.
  absl::Status Int(absl::string_view key, int64_t* out) const {
    const Json* value = Find(key);
    if (value == nullptr) return absl::OkStatus();
    if (value->is_number_unsigned()) {
      const uint64_t u = value->get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return RangeError(key, "is too large");
      }
      *out = static_cast<int64_t>(u);
      return absl::OkStatus();
    }
    if (value->is_number_integer()) {
      *out = value->get<int64_t>();
      return absl::OkStatus();
    }
    if (value->is_number_float()) {
      const double d = value->get<double>();
      if (!std::isfinite(d) || d != std::trunc(d)) return RangeError(key, "must be an integer");
      if (std::fabs(d) >= 9.2e18) return RangeError(key, "is too large");
      *out = static_cast<int64_t>(d);
      return absl::OkStatus();
    }
    return TypeError(key, "an integer", *value);
  }

  absl::Status Uint64(absl::string_view key, uint64_t* out) const {
    const Json* value = Find(key);
    if (value == nullptr) return absl::OkStatus();
    if (value->is_number_unsigned()) {
      *out = value->get<uint64_t>();
      return absl::OkStatus();
    }
    if (value->is_number_integer()) return RangeError(key, "must be >= 0");
    if (value->is_number_float()) {
      const double d = value->get<double>();
      if (!std::isfinite(d) || d != std::trunc(d)) return RangeError(key, "must be an integer");
      if (d < 0) return RangeError(key, "must be >= 0");
      if (d >= 1.8e19) return RangeError(key, "is too large");
      *out = static_cast<uint64_t>(d);
      return absl::OkStatus();
    }
    return TypeError(key, "a non-negative integer", *value);
  }

  template <typename E, size_t N>
  absl::Status Enum(absl::string_view key, const EnumName<E> (&names)[N], E* out) const {
    std::string text;
    RETURN_IF_ERROR(String(key, &text));
    if (!Has(key)) return absl::OkStatus();
    std::vector<absl::string_view> expected;
    for (const EnumName<E>& entry : names) {
      if (entry.name == text) {
        *out = entry.value;
        return absl::OkStatus();
      }
      expected.push_back(entry.name);
    }
    return FieldError(PathOf(key),
                      absl::StrCat("unknown ", Quote(text), " (expected ", OrList(expected), ")"));
  }

  // A string that must be one of `names`.
  absl::Status OneOf(absl::string_view key, absl::Span<const absl::string_view> names,
                     absl::string_view list_word, std::string* out) const {
    std::string text = *out;
    RETURN_IF_ERROR(String(key, &text));
    if (std::find(names.begin(), names.end(), text) == names.end()) {
      return FieldError(PathOf(key), absl::StrCat("unknown ", Quote(text), " (", list_word, " ",
                                                  OrList(names), ")"));
    }
    *out = std::move(text);
    return absl::OkStatus();
  }

 private:
  absl::Status TypeError(absl::string_view key, absl::string_view expected,
                         const Json& value) const {
    return FieldError(PathOf(key), absl::StrCat("expected ", expected, ", got ", Described(value)));
  }

  const Json& object_;
  std::string prefix_;
};

template <typename E, size_t N>
absl::string_view NameOf(const EnumName<E> (&names)[N], E value, absl::string_view unknown) {
  for (const EnumName<E>& entry : names) {
    if (entry.value == value) return entry.name;
  }
  return unknown;
}

// "optimizer": {...} or "optimizer": "adam" (`bare_key` "type"); also "kernel_initializer",
// and "checkpoint" and "warm_start", whose bare form is a path. `bare_what` names the bare
// form in the type error ("a type name").
absl::Status ObjectOrBare(const Json* value, absl::string_view field,
                          absl::Span<const absl::string_view> keys, absl::string_view bare_key,
                          absl::string_view bare_what, Json* object) {
  if (value == nullptr) {
    *object = Json::object();
    return absl::OkStatus();
  }
  if (value->is_string()) {
    *object = Json{{std::string(bare_key), *value}};
    return absl::OkStatus();
  }
  if (!value->is_object()) {
    return FieldError(
        field, absl::StrCat("expected an object or ", bare_what, ", got ", Described(*value)));
  }
  RETURN_IF_ERROR(CheckKeys(*value, field, keys));
  *object = *value;
  return absl::OkStatus();
}

absl::Status ObjectOrTypeName(const Json* value, absl::string_view field,
                              absl::Span<const absl::string_view> keys, Json* object) {
  return ObjectOrBare(value, field, keys, "type", "a type name", object);
}

// The ps computes in float32: a hyperparameter or initial value that is a fine double can
// still round to 0, 1 or infinity there.
bool FitsFloat(double d) { return std::fabs(d) <= std::numeric_limits<float>::max(); }
bool PositiveNormalFloat(double d) {
  return d >= std::numeric_limits<float>::min() && d <= std::numeric_limits<float>::max();
}
constexpr char kPositiveFloatRange[] = "must be in [1.2e-38, 3.4e38] (the ps computes in float32)";
constexpr char kFloatRange[] = "must be in [-3.4e38, 3.4e38] (parameters are float32)";
constexpr char kHyperparameterRange[] =
    "must be in [-3.4e38, 3.4e38] (the ps computes in float32)";

// A rate in (0, 1) that stays below 1 in float32. 0 is refused for Adam's betas because the
// ps reads an unset (0) beta as its default: a file saying 0 would silently train with 0.9.
absl::Status UnitRate(const Fields& f, absl::string_view key, double value, bool zero_allowed) {
  const absl::string_view range = zero_allowed ? "must be in [0, 1)" : "must be in (0, 1)";
  if (!((zero_allowed ? value >= 0 : value > 0) && value < 1)) return f.RangeError(key, range);
  if (static_cast<float>(value) >= 1.0f) {
    return f.RangeError(
        key, absl::StrCat(range, " in float32, as the ps computes (at most 0.99999994)"));
  }
  return absl::OkStatus();
}

// The optimizer's rates: "learning_rate", "momentum", "nesterov",
// "initial_accumulator_value", "beta1", "beta2" and "epsilon". REQUIRES: type set.
absl::Status ParseOptimizerRates(const Fields& f, OptimizerSpec* optimizer) {
  double learning_rate = kDefaultLearningRate;
  RETURN_IF_ERROR(f.Double("learning_rate", &learning_rate));
  if (!(learning_rate > 0)) return f.RangeError("learning_rate", "must be > 0");
  if (!PositiveNormalFloat(learning_rate)) {
    return f.RangeError("learning_rate", kPositiveFloatRange);
  }
  optimizer->set_learning_rate(learning_rate);

  double momentum = optimizer->type() == OptimizerSpec::MOMENTUM ? kDefaultMomentum : 0.0;
  RETURN_IF_ERROR(f.Double("momentum", &momentum));
  RETURN_IF_ERROR(UnitRate(f, "momentum", momentum, /*zero_allowed=*/true));
  optimizer->set_momentum(momentum);

  bool nesterov = false;
  RETURN_IF_ERROR(f.Bool("nesterov", &nesterov));
  optimizer->set_nesterov(nesterov);

  // > 0: the ps reads 0 as its default, 0.1.
  double accumulator = kDefaultInitialAccumulator;
  RETURN_IF_ERROR(f.Double("initial_accumulator_value", &accumulator));
  if (!(accumulator > 0)) return f.RangeError("initial_accumulator_value", "must be > 0");
  if (!PositiveNormalFloat(accumulator)) {
    return f.RangeError("initial_accumulator_value", kPositiveFloatRange);
  }
  optimizer->set_initial_accumulator_value(accumulator);

  double beta1 = kDefaultBeta1;
  RETURN_IF_ERROR(f.Double("beta1", &beta1));
  RETURN_IF_ERROR(UnitRate(f, "beta1", beta1, /*zero_allowed=*/false));
  optimizer->set_beta1(beta1);

  double beta2 = kDefaultBeta2;
  RETURN_IF_ERROR(f.Double("beta2", &beta2));
  RETURN_IF_ERROR(UnitRate(f, "beta2", beta2, /*zero_allowed=*/false));
  optimizer->set_beta2(beta2);

  double epsilon = kDefaultEpsilon;
  RETURN_IF_ERROR(f.Double("epsilon", &epsilon));
  if (!(epsilon > 0)) return f.RangeError("epsilon", "must be > 0");
  if (!PositiveNormalFloat(epsilon)) return f.RangeError("epsilon", kPositiveFloatRange);
  optimizer->set_epsilon(epsilon);
  return absl::OkStatus();
}

// "decay_rate", "decay_steps" and "staircase".
absl::Status ParseOptimizerDecay(const Fields& f, OptimizerSpec* optimizer) {
  double decay_rate = 0;
  RETURN_IF_ERROR(f.Double("decay_rate", &decay_rate));
  int64_t decay_steps = 0;
  RETURN_IF_ERROR(f.Int("decay_steps", &decay_steps));
  bool staircase = false;
  RETURN_IF_ERROR(f.Bool("staircase", &staircase));
  if (decay_rate != 0 || decay_steps != 0) {
    if (!(decay_rate > 0 && decay_rate <= 1)) {
      return f.RangeError("decay_rate", "must be in (0, 1]");
    }
    if (decay_steps <= 0) return f.RangeError("decay_steps", "must be > 0 with decay_rate");
  }
  optimizer->set_decay_rate(decay_rate);
  optimizer->set_decay_steps(decay_steps);
  optimizer->set_staircase(staircase);
  return absl::OkStatus();
}

// FTRL's (TF's names, l1 for l1_regularization_strength and so on). The power is stored
// for FTRL, or when written: 0 is a valid power (a fixed per-coordinate rate), so the ps
// tells "unset" (its -0.5) from 0 by presence. REQUIRES: type set.
absl::Status ParseOptimizerFtrl(const Fields& f, OptimizerSpec* optimizer) {
  double power = kDefaultLearningRatePower;
  RETURN_IF_ERROR(f.Double("learning_rate_power", &power));
  if (!(power <= 0)) return f.RangeError("learning_rate_power", "must be <= 0");
  if (!FitsFloat(power)) return f.RangeError("learning_rate_power", kHyperparameterRange);
  if (optimizer->type() == OptimizerSpec::FTRL || f.Has("learning_rate_power")) {
    optimizer->set_learning_rate_power(power);
  }
  const std::pair<absl::string_view, void (OptimizerSpec::*)(double)> strengths[] = {
      {"l1", &OptimizerSpec::set_l1},
      {"l2", &OptimizerSpec::set_l2},
      {"l2_shrinkage", &OptimizerSpec::set_l2_shrinkage},
      {"beta", &OptimizerSpec::set_beta}};
  for (const auto& [key, setter] : strengths) {
    double strength = 0;
    RETURN_IF_ERROR(f.Double(key, &strength));
    if (!(strength >= 0)) return f.RangeError(key, "must be >= 0");
    if (!FitsFloat(strength)) return f.RangeError(key, kHyperparameterRange);
    (optimizer->*setter)(strength);
  }
  return absl::OkStatus();
}

// `field`: "optimizer" or "embedding_optimizer", as messages name it.
absl::Status ParseOptimizer(const Json* value, OptimizerSpec* optimizer,
                            absl::string_view field = "optimizer") {
  Json object;
  RETURN_IF_ERROR(ObjectOrTypeName(value, field, kOptimizerKeys, &object));
  Fields f(object, std::string(field));
  OptimizerSpec::Type type = OptimizerSpec::ADAM;
  RETURN_IF_ERROR(f.Enum("type", kOptimizers, &type));
  optimizer->set_type(type);
  RETURN_IF_ERROR(ParseOptimizerRates(f, optimizer));
  RETURN_IF_ERROR(ParseOptimizerDecay(f, optimizer));
  return ParseOptimizerFtrl(f, optimizer);
}

// `field`: "kernel_initializer", as messages name it.
absl::Status ParseInitializer(const Json* value, uint64_t job_seed, InitializerSpec* init,
                              absl::string_view field = "kernel_initializer") {
  Json object;
  RETURN_IF_ERROR(ObjectOrTypeName(value, field, kInitializerKeys, &object));
  Fields f(object, std::string(field));
  InitializerSpec::Type type = InitializerSpec::GLOROT_UNIFORM;
  RETURN_IF_ERROR(f.Enum("type", kInitializers, &type));
  init->set_type(type);

  // Each number must survive the conversion to float32, or the parameters start as inf.
  const auto float_field = [&f](absl::string_view key, double* out) -> absl::Status {
    RETURN_IF_ERROR(f.Double(key, out));
    if (!FitsFloat(*out)) return f.RangeError(key, kFloatRange);
    return absl::OkStatus();
  };
  double number = 0;
  RETURN_IF_ERROR(float_field("value", &number));
  init->set_value(number);

  double minval = 0;
  double maxval = 0;
  RETURN_IF_ERROR(float_field("minval", &minval));
  RETURN_IF_ERROR(float_field("maxval", &maxval));
  // Both 0 means the Keras default range [-0.05, 0.05).
  if (!(minval == 0 && maxval == 0) && minval >= maxval) {
    return FieldError(Path(field, "maxval"),
                      absl::StrCat("must be > minval (", minval, "), got ", maxval));
  }
  init->set_minval(minval);
  init->set_maxval(maxval);

  double mean = 0;
  RETURN_IF_ERROR(float_field("mean", &mean));
  init->set_mean(mean);

  double stddev = 0;
  RETURN_IF_ERROR(float_field("stddev", &stddev));
  if (stddev < 0) return f.RangeError("stddev", "must be >= 0");
  init->set_stddev(stddev);

  uint64_t seed = job_seed;
  RETURN_IF_ERROR(f.Uint64("seed", &seed));
  init->set_seed(seed);
  return absl::OkStatus();
}

// A directory that the chief and every ps (or the chief and its evaluator) open, each in its
// own working directory: a relative path would name a different place in each process.
absl::Status AbsolutePath(const Fields& f, absl::string_view key, const std::string& path) {
  if (path.empty()) return f.RangeError(key, "must not be empty");
  if (path[0] != '/') {
    return f.RangeError(key,
                        "must be an absolute path (the chief and every ps open it, each from its "
                        "own working directory)");
  }
  return absl::OkStatus();
}

// "checkpoint": {"dir": ..., ...} or "checkpoint": "/dir". A schedule without a dir is kept:
// the chief's --checkpoint_dir supplies the dir (a launcher's run directory, a mounted
// volume); without either the job has no durable state, and the chief says so in its
// status. Without a dir or a schedule the spec's checkpoint stays unset.
absl::Status ParseCheckpoint(const Json* value, CheckpointSpec* checkpoint, bool* has_dir) {
  *has_dir = false;
  Json object;
  RETURN_IF_ERROR(
      ObjectOrBare(value, "checkpoint", kCheckpointKeys, "dir", "a directory path", &object));
  Fields f(object, "checkpoint");
  std::string dir;
  RETURN_IF_ERROR(f.String("dir", &dir));
  if (f.Has("dir")) RETURN_IF_ERROR(AbsolutePath(f, "dir", dir));

  int64_t every_steps = 0;
  RETURN_IF_ERROR(f.Int("every_steps", &every_steps));
  if (every_steps < 0 || every_steps > kMaxJobSteps) {
    return f.RangeError("every_steps",
                        absl::StrCat("must be 0..", kMaxJobSteps, " (0: not by steps)"));
  }
  double every_seconds = 0;
  RETURN_IF_ERROR(f.Double("every_seconds", &every_seconds));
  if (!(every_seconds >= 0 && every_seconds <= kMaxCheckpointSeconds)) {
    return f.RangeError("every_seconds",
                        absl::StrCat("must be 0..", kMaxCheckpointSeconds, " (0: not by time)"));
  }
  int64_t keep = kDefaultCheckpointKeep;
  RETURN_IF_ERROR(f.Int("keep", &keep));
  if (keep < 1) return f.RangeError("keep", "must be >= 1");
  if (keep > kMaxInt32) return f.RangeError("keep", absl::StrCat("must be <= ", kMaxInt32));
  bool keep_best = false;
  RETURN_IF_ERROR(f.Bool("keep_best", &keep_best));
  int64_t full_every = 0;
  RETURN_IF_ERROR(f.Int("full_every", &full_every));
  if (f.Has("full_every") && (full_every < 1 || full_every > kMaxInt32)) {
    return f.RangeError("full_every",
                        absl::StrCat("must be 1..", kMaxInt32, " (1: every checkpoint is full)"));
  }
  CheckpointSpec::Cut cut = CheckpointSpec::HOLD;
  RETURN_IF_ERROR(f.Enum("cut", kCuts, &cut));

  if (dir.empty()) {
    bool any = false;
    for (absl::string_view key : kCheckpointKeys) any |= key != "dir" && f.Has(key);
    if (!any) return absl::OkStatus();
  }
  *has_dir = true;
  checkpoint->set_dir(dir);
  checkpoint->set_every_steps(every_steps);
  checkpoint->set_every_seconds(every_seconds);
  checkpoint->set_keep(static_cast<int32_t>(keep));
  checkpoint->set_keep_best(keep_best);
  checkpoint->set_full_every(static_cast<int32_t>(full_every));
  checkpoint->set_cut(cut);
  return absl::OkStatus();
}

// "dynamic_tables": {"num_buckets": 4096, "admit_after": 0, "ttl_steps": 0, "max_rows": 0}.
absl::Status ParseDynamicTables(const Json* value, DynamicTablesSpec* tables) {
  if (value == nullptr) return absl::OkStatus();
  if (!value->is_object()) {
    return FieldError("dynamic_tables",
                      absl::StrCat("expected an object, got ", Described(*value)));
  }
  RETURN_IF_ERROR(CheckKeys(*value, "dynamic_tables", kDynamicTablesKeys));
  Fields f(*value, "dynamic_tables");
  int64_t num_buckets = 0, admit_after = 0, ttl_steps = 0, max_rows = 0;
  RETURN_IF_ERROR(f.Int("num_buckets", &num_buckets));
  RETURN_IF_ERROR(f.Int("admit_after", &admit_after));
  RETURN_IF_ERROR(f.Int("ttl_steps", &ttl_steps));
  RETURN_IF_ERROR(f.Int("max_rows", &max_rows));
  // At most 2^20 buckets: each ps keeps a flag per bucket, and thousands are plenty.
  if (f.Has("num_buckets") && (num_buckets < 1 || num_buckets > (1 << 20))) {
    return f.RangeError("num_buckets", "must be 1..1048576 (default 4096)");
  }
  if (admit_after < 0 || admit_after > 255) {
    return f.RangeError("admit_after", "must be 0..255 (0 or 1: a row on its first push)");
  }
  if (ttl_steps < 0) return f.RangeError("ttl_steps", "must be >= 0 (0: never evict by age)");
  if (max_rows < 0) return f.RangeError("max_rows", "must be >= 0 (0: no row budget)");
  tables->set_num_buckets(static_cast<int32_t>(num_buckets));
  tables->set_admit_after(static_cast<int32_t>(admit_after));
  tables->set_ttl_steps(ttl_steps);
  tables->set_max_rows(max_rows);
  return absl::OkStatus();
}

// "a, b, c and 5 more".
std::string SomeNames(absl::Span<const std::string> names) {
  std::vector<std::string> shown;
  for (size_t i = 0; i < names.size() && i < kMaxListedNames; ++i) shown.push_back(names[i]);
  std::string out = absl::StrJoin(shown, ", ");
  if (names.size() > kMaxListedNames) {
    absl::StrAppend(&out, " and ", names.size() - kMaxListedNames, " more");
  }
  return out;
}

// "warm_start": {"from": ..., "variables": {...}, "with_slots": ...} or "warm_start": "/ckpt".
// `known_variables`: this job's variable names, which the keys of "variables" must be; null
// when they are not known here (the chief checks them against the checkpoint).
absl::Status ParseWarmStart(const Json* value, const std::vector<std::string>* known_variables,
                            WarmStartSpec* warm_start, bool* given) {
  static const std::vector<std::string>* const kNone = new std::vector<std::string>();
  const std::vector<std::string>& variables = known_variables ? *known_variables : *kNone;
  *given = value != nullptr;
  if (value == nullptr) return absl::OkStatus();
  Json object;
  RETURN_IF_ERROR(
      ObjectOrBare(value, "warm_start", kWarmStartKeys, "from", "a checkpoint path", &object));
  Fields f(object, "warm_start");
  if (!f.Has("from")) {
    return FieldError("warm_start.from", "is required (the checkpoint to start from)");
  }
  std::string from;
  RETURN_IF_ERROR(f.String("from", &from));
  RETURN_IF_ERROR(AbsolutePath(f, "from", from));
  warm_start->set_from(from);

  if (const Json* map = f.Find("variables")) {
    if (!map->is_object()) {
      return FieldError("warm_start.variables",
                        absl::StrCat("expected an object (this job's variable: the checkpoint's "
                                     "variable), got ",
                                     Described(*map)));
    }
    std::vector<absl::string_view> known(variables.begin(), variables.end());
    for (auto it = map->begin(); it != map->end(); ++it) {
      const std::string& name = it.key();
      const std::string path = absl::StrCat("warm_start.variables.", absl::CHexEscape(name));
      if (name.empty()) {
        return FieldError("warm_start.variables", "variable names must not be empty");
      }
      if (known_variables != nullptr &&
          std::find(variables.begin(), variables.end(), name) == variables.end()) {
        const absl::string_view suggestion = Suggestion(name, known);
        return FieldError(
            "warm_start.variables",
            absl::StrCat(Quote(name), " is not a variable of this job (",
                         suggestion.empty() ? absl::StrCat("its variables: ", SomeNames(variables))
                                            : absl::StrCat("did you mean ", Quote(suggestion), "?"),
                         ")"));
      }
      if (!it->is_string()) {
        return FieldError(
            path, absl::StrCat("expected the checkpoint's variable name, got ", Described(*it)));
      }
      const std::string source = it->get<std::string>();
      if (source.empty()) return FieldError(path, "must not be empty");
      (*warm_start->mutable_variables())[name] = source;
    }
  }
  bool with_slots = false;
  RETURN_IF_ERROR(f.Bool("with_slots", &with_slots));
  warm_start->set_with_slots(with_slots);
  return absl::OkStatus();
}

// A job name names its variables ("{name}/dense_0/kernel") and its job id, which become keys
// and file names in checkpoints, metrics and logs.
bool IsNameChar(char c) { return absl::ascii_isalnum(c) || c == '-' || c == '_' || c == '.'; }

// Bounds of the model, so that a typo ("mlp:2560000") is an error here and not a ps or
// worker that runs out of memory creating it. Every worker holds all parameters and their
// gradients; the ps tasks hold them with up to two optimizer slots each.
constexpr int64_t kMaxModelParameters = int64_t{1} << 30;  // 4 GiB of float32
constexpr size_t kMaxHiddenLayers = 64;

absl::StatusOr<MlpSpec> ParseModel(const std::string& model) {
  absl::StatusOr<MlpSpec> spec =
      ParseMlpSpec(model, kFashionMnistInputDim, kFashionMnistNumClasses);
  if (!spec.ok()) return FieldError("model", spec.status().message());
  if (spec->hidden.size() > kMaxHiddenLayers) {
    return FieldError("model", absl::StrCat("has ", spec->hidden.size(), " hidden layers; at most ",
                                            kMaxHiddenLayers));
  }
  int64_t parameters = 0;
  for (const ParamInfo& param : Params(*spec)) parameters += param.num_elements();
  if (parameters > kMaxModelParameters) {
    return FieldError("model",
                      absl::StrCat(Quote(model), " has ", parameters, " parameters; at most ",
                                   kMaxModelParameters, " (4 GiB of float32 on every worker)"));
  }
  return spec;
}

// "staleness_lr", "delay_compensation", "delay_compensation_adaptive": the ps' staleness-aware
// updates, for async and stale mode (a sync step's gradients are never stale). REQUIRES:
// spec->mode() set.
absl::Status ParseStalenessPolicy(const Fields& f, JobSpec* spec) {
  UpdateSpec::StalenessLr staleness_lr = UpdateSpec::NONE;
  RETURN_IF_ERROR(f.Enum("staleness_lr", kStalenessLrs, &staleness_lr));
  double lambda = 0;
  RETURN_IF_ERROR(f.Double("delay_compensation", &lambda));
  if (!(lambda >= 0) || !FitsFloat(lambda)) {
    return f.RangeError("delay_compensation",
                        "must be in [0, 3.4e38] (0: off; the ps computes in float32)");
  }
  bool adaptive = false;
  RETURN_IF_ERROR(f.Bool("delay_compensation_adaptive", &adaptive));
  if (adaptive && lambda == 0) {
    return FieldError("delay_compensation_adaptive",
                      "needs \"delay_compensation\" > 0 (the lambda it adapts)");
  }
  if (spec->mode() == JobSpec::SYNC) {
    const char* given = staleness_lr != UpdateSpec::NONE ? "staleness_lr"
                        : lambda != 0                     ? "delay_compensation"
                        : adaptive                        ? "delay_compensation_adaptive"
                                                          : nullptr;
    if (given != nullptr) {
      return FieldError(given, absl::StrCat("applies in async and stale mode only, got ",
                                            Shown(*f.Find(given)),
                                            " in sync mode (a sync step is never stale)"));
    }
  }
  spec->set_staleness_lr(staleness_lr);
  spec->set_delay_compensation(lambda);
  spec->set_delay_compensation_adaptive(adaptive);
  return absl::OkStatus();
}

// The job's parts, each from the top-level `f` into `spec`, in the order a job file is checked
// (the first field at fault is the one reported).

absl::Status ParseName(const Fields& f, JobSpec* spec) {
  std::string name = kDefaultName;
  RETURN_IF_ERROR(f.String("name", &name));
  if (name.empty()) return f.RangeError("name", "must not be empty");
  if (name.size() > kMaxNameChars || !std::all_of(name.begin(), name.end(), IsNameChar) ||
      name[0] == '.') {
    return f.RangeError("name", absl::StrCat("must be 1..", kMaxNameChars,
                                             " characters of A-Z a-z 0-9 - _ . not starting "
                                             "with . (it names the job's variables)"));
  }
  spec->set_name(name);
  return absl::OkStatus();
}

// "dataset" and "data_dir".
absl::Status ParseData(const Fields& f, JobSpec* spec) {
  std::string dataset(kFashionMnist);
  RETURN_IF_ERROR(f.String("dataset", &dataset));
  if (dataset == kExternalDataset) {
    // The user's code holds the data: there are no files to name.
    if (f.Has("data_dir")) {
      return FieldError("data_dir", "dataset \"external\" has no files (the user's code holds them)");
    }
    spec->set_dataset(dataset);
    return absl::OkStatus();
  }
  if (absl::Status s = CheckDatasetName(dataset); !s.ok()) return FieldError("dataset", s.message());
  spec->set_dataset(dataset);

  const bool has_data_dir = f.Has("data_dir");
  std::string data_dir = DatasetDir(dataset, "");
  RETURN_IF_ERROR(f.String("data_dir", &data_dir));
  if (has_data_dir && data_dir.empty()) return f.RangeError("data_dir", "must not be empty");
  const bool synthetic = absl::StartsWith(dataset, kSyntheticCtr);
  if (data_dir.empty() && !synthetic) {
    return FieldError("data_dir", absl::StrCat("is required for dataset ", Quote(dataset),
                                               " (a directory holding train.ctrbin and "
                                               "test.ctrbin)"));
  }
  spec->set_data_dir(data_dir);
  return absl::OkStatus();
}

// "model", on the dataset already parsed. `variables`: the model's variables,
// "{name}/{variable}", for warm_start; unknown (empty, *variables_known false) for click-log
// files this process cannot read (the chief checks the model on its data).
absl::Status ParseModelOf(const Fields& f, JobSpec* spec, std::vector<std::string>* variables,
                          bool* variables_known) {
  if (!f.Has("model")) {
    return FieldError("model", "is required, e.g. \"mlp:256,128\" or \"softmax\"");
  }
  std::string model;
  RETURN_IF_ERROR(f.String("model", &model));
  const std::string& name = spec->name();
  const std::string& dataset = spec->dataset();
  *variables_known = true;
  if ((model == kExternalModel) != (dataset == kExternalDataset)) {
    return model == kExternalModel
               ? FieldError("dataset", absl::StrCat("model \"external\" takes dataset \"external\" "
                                                    "(the user's code holds the data), not ",
                                                    Quote(dataset)))
               : FieldError("model", absl::StrCat("dataset \"external\" takes model \"external\" "
                                                  "(the user's code computes it), not ",
                                                  Quote(model)));
  }
  if (model == kExternalModel) {
    spec->set_model(model);  // its variables: ParseExternal, once the seed is known
    return absl::OkStatus();
  }
  if (dataset == kFashionMnist) {
    ASSIGN_OR_RETURN(MlpSpec model_spec, ParseModel(model));
    spec->set_model(MlpSpecToString(model_spec));
    for (const ParamInfo& param : Params(model_spec)) {
      variables->push_back(absl::StrCat(name, "/", param.name));
    }
    return absl::OkStatus();
  }
  const bool synthetic = absl::StartsWith(dataset, kSyntheticCtr);
  absl::StatusOr<DatasetInfo> info = DescribeDataset(dataset, spec->data_dir(), Split::kTrain);
  if (!info.ok() && synthetic) return FieldError("dataset", info.status().message());
  if (info.ok()) {
    JobSpec probe;
    probe.set_model(model);
    absl::StatusOr<std::unique_ptr<Model>> created = Model::Create(probe, *info);
    if (!created.ok()) return FieldError("model", created.status().message());
    spec->set_model((*created)->ToString());
    for (const VariableInfo& v : (*created)->variables()) {
      variables->push_back(absl::StrCat(name, "/", v.name));
    }
  } else if (!absl::StartsWith(model, kDlrmPrefix)) {
    return FieldError("model", absl::StrCat("click-log dataset ", Quote(dataset),
                                            " takes a \"dlrm:...\" model, not ", Quote(model)));
  } else {
    spec->set_model(model);
    *variables_known = false;
  }
  return absl::OkStatus();
}

// "batch_size", "epochs" and "steps".
absl::Status ParseLength(const Fields& f, JobSpec* spec) {
  int64_t batch_size = kDefaultBatchSize;
  RETURN_IF_ERROR(f.Int("batch_size", &batch_size));
  if (batch_size < 1 || batch_size > kMaxBatchSize) {
    return f.RangeError("batch_size", absl::StrCat("must be 1..", kMaxBatchSize));
  }
  spec->set_batch_size(static_cast<int32_t>(batch_size));

  // 0 counts as absent when the other is given, so that a file may say "epochs": 10,
  // "steps": 0. On its own a 0 would silently train the default of one epoch.
  int64_t epochs = 0;
  int64_t steps = 0;
  RETURN_IF_ERROR(f.Int("epochs", &epochs));
  if (epochs < 0 || epochs > kMaxJobEpochs) {
    return f.RangeError("epochs", absl::StrCat("must be 1..", kMaxJobEpochs));
  }
  RETURN_IF_ERROR(f.Int("steps", &steps));
  if (steps < 0 || steps > kMaxJobSteps) {
    return f.RangeError("steps", absl::StrCat("must be 1..", kMaxJobSteps));
  }
  if (epochs > 0 && steps > 0) {
    return FieldError("steps", absl::StrCat("give either \"epochs\" or \"steps\", not both (got "
                                            "epochs ",
                                            epochs, " and steps ", steps, ")"));
  }
  if (epochs == 0 && steps == 0) {
    if (f.Has("epochs")) return f.RangeError("epochs", "must be >= 1");
    if (f.Has("steps")) return f.RangeError("steps", "must be >= 1");
    epochs = 1;
  }
  spec->set_epochs(static_cast<int32_t>(epochs));
  spec->set_steps(steps);
  return absl::OkStatus();
}

// "optimizer", "embedding_optimizer" and "dynamic_tables".
absl::Status ParseOptimizers(const Fields& f, JobSpec* spec) {
  RETURN_IF_ERROR(ParseOptimizer(f.Find("optimizer"), spec->mutable_optimizer()));
  if (const Json* embedding = f.Find("embedding_optimizer"); embedding != nullptr && !embedding->is_null()) {
    RETURN_IF_ERROR(
        ParseOptimizer(embedding, spec->mutable_embedding_optimizer(), "embedding_optimizer"));
  }
  if (const Json* tables = f.Find("dynamic_tables"); tables != nullptr) {
    RETURN_IF_ERROR(ParseDynamicTables(tables, spec->mutable_dynamic_tables()));
  }
  return absl::OkStatus();
}

// "mode" and "staleness".
absl::Status ParseMode(const Fields& f, JobSpec* spec) {
  JobSpec::Mode mode = JobSpec::ASYNC;
  RETURN_IF_ERROR(f.Enum("mode", kModes, &mode));
  spec->set_mode(mode);

  // Checked in every mode, kept only in the mode that uses it.
  int64_t staleness = kDefaultStaleness;
  RETURN_IF_ERROR(f.Int("staleness", &staleness));
  if (staleness < 0) return f.RangeError("staleness", "must be >= 0");
  if (staleness > kMaxInt32) {
    return f.RangeError("staleness", absl::StrCat("must be <= ", kMaxInt32));
  }
  spec->set_staleness(mode == JobSpec::STALE ? static_cast<int32_t>(staleness) : 0);
  return absl::OkStatus();
}

// "num_replicas" and "sync_backup_workers". REQUIRES: spec->mode() set.
absl::Status ParseReplicas(const Fields& f, int num_workers, JobSpec* spec) {
  const JobSpec::Mode mode = spec->mode();
  int64_t num_replicas = 0;
  RETURN_IF_ERROR(f.Int("num_replicas", &num_replicas));
  if (num_replicas < 0) {
    return f.RangeError("num_replicas", "must be >= 1 (or 0 for one per worker)");
  }
  if (num_replicas > kMaxInt32) {
    return f.RangeError("num_replicas", absl::StrCat("must be <= ", kMaxInt32));
  }
  // A sync step waits for num_replicas gradients. With more replicas than workers, workers
  // compute several replicas of a step in turn: each step is slower, and the model gets
  // num_replicas times fewer updates for the same examples (1000 replicas on 2 workers ended
  // at 0.40 accuracy where 2 reach 0.89).
  if (mode == JobSpec::SYNC && num_workers > 0 && num_replicas > num_workers) {
    return f.RangeError("num_replicas", absl::StrCat("must be <= the number of workers (",
                                                     num_workers, ") in sync mode"));
  }
  const bool replicas_known = num_replicas > 0 || num_workers > 0;
  if (num_replicas == 0) num_replicas = std::max(num_workers, 1);
  spec->set_num_replicas(mode == JobSpec::SYNC ? static_cast<int32_t>(num_replicas) : 0);

  // Backup workers: a sync step is applied with the first num_replicas - b gradients. Opt-in,
  // as it gives up bit-identical runs; meaningless outside sync mode, so an error there.
  // Checked against num_replicas once that is known (given, or the cluster's worker count):
  // shardctl, which knows no cluster, leaves that check to the chief.
  int64_t backups = 0;
  RETURN_IF_ERROR(f.Int("sync_backup_workers", &backups));
  if (backups < 0) return f.RangeError("sync_backup_workers", "must be >= 0 (0: none)");
  if (backups > 0 && mode != JobSpec::SYNC) {
    return f.RangeError("sync_backup_workers",
                        absl::StrCat("is for sync mode only (0 in mode \"", JobModeName(mode),
                                     "\")"));
  }
  if (backups > 0 && replicas_known && backups >= num_replicas) {
    return f.RangeError(
        "sync_backup_workers",
        absl::StrCat("must be < num_replicas (", num_replicas,
                     "): a sync step needs at least one gradient (num_replicas - "
                     "sync_backup_workers >= 1)"));
  }
  spec->set_sync_backup_workers(static_cast<int32_t>(backups));
  return absl::OkStatus();
}

// "partitioner", "placement", "num_ps", "seed" and "kernel_initializer".
absl::Status ParseLayout(const Fields& f, JobSpec* spec) {
  std::string partitioner = kDefaultPartitioner;
  RETURN_IF_ERROR(f.String("partitioner", &partitioner));
  if (auto parsed = ParsePartitioner(partitioner, /*num_ps=*/1); !parsed.ok()) {
    return FieldError("partitioner", parsed.status().message());
  }
  spec->set_partitioner(partitioner);

  std::string placement = kDefaultPlacement;
  RETURN_IF_ERROR(f.String("placement", &placement));
  if (auto parsed = ParsePlacement(placement, 1); !parsed.ok()) {
    return FieldError("placement", parsed.status().message());
  }
  spec->set_placement(placement);

  int64_t num_ps = 0;
  RETURN_IF_ERROR(f.Int("num_ps", &num_ps));
  if (num_ps < 0 || num_ps > kMaxInt32) {
    return f.RangeError("num_ps", "must be >= 0 (0: every ps of TF_CONFIG)");
  }
  spec->set_num_ps(static_cast<int32_t>(num_ps));

  uint64_t seed = kDefaultSeed;
  RETURN_IF_ERROR(f.Uint64("seed", &seed));
  spec->set_seed(seed);

  return ParseInitializer(f.Find("kernel_initializer"), seed, spec->mutable_kernel_initializer());
}

// "eval_every_steps", "step_timeout_ms", "steps_in_flight" and "backend". REQUIRES:
// spec->mode() set.
absl::Status ParseRunning(const Fields& f, int num_workers, JobSpec* spec) {
  int64_t eval_every_steps = 0;
  RETURN_IF_ERROR(f.Int("eval_every_steps", &eval_every_steps));
  if (eval_every_steps < 0) return f.RangeError("eval_every_steps", "must be >= 0");
  if (eval_every_steps > kMaxJobSteps) {
    return f.RangeError("eval_every_steps", absl::StrCat("must be <= ", kMaxJobSteps));
  }
  spec->set_eval_every_steps(eval_every_steps);

  int64_t step_timeout_ms = kDefaultStepTimeoutMs;
  RETURN_IF_ERROR(f.Int("step_timeout_ms", &step_timeout_ms));
  if (step_timeout_ms < kMinStepTimeoutMs || step_timeout_ms > kMaxStepTimeoutMs) {
    return f.RangeError("step_timeout_ms", absl::StrCat("must be ", kMinStepTimeoutMs, "..",
                                                        kMaxStepTimeoutMs, " (1 s to 1 h)"));
  }
  spec->set_step_timeout_ms(step_timeout_ms);

  int64_t steps_in_flight = 0;
  RETURN_IF_ERROR(f.Int("steps_in_flight", &steps_in_flight));
  if (steps_in_flight < 0 || steps_in_flight > kMaxStepsInFlight) {
    return f.RangeError("steps_in_flight",
                        absl::StrCat("must be 0..", kMaxStepsInFlight,
                                     " (0: the default, 2 for async and stale jobs of one "
                                     "worker, else 1)"));
  }
  if (steps_in_flight == 0) steps_in_flight = DefaultStepsInFlight(spec->mode(), num_workers);
  spec->set_steps_in_flight(static_cast<int32_t>(steps_in_flight));

  std::string backend = kDefaultBackend;
  RETURN_IF_ERROR(f.OneOf("backend", kBackends, "expected", &backend));
  spec->set_backend(backend);
  return absl::OkStatus();
}

// "apply_own_gradient". REQUIRES: spec's mode and staleness policy set.
absl::Status ParseOwnGradient(const Fields& f, JobSpec* spec) {
  // Sync steps compute on exactly their version, which holds every earlier update. Delay
  // compensation corrects a gradient for everything the ps applied since its base version,
  // the worker's own last update included, so a worker that has added that update already
  // would have it counted twice: with delay compensation the default is off, and on is refused.
  const JobSpec::Mode mode = spec->mode();
  const bool compensated = spec->delay_compensation() > 0;
  bool apply_own_gradient = mode != JobSpec::SYNC && !compensated;
  RETURN_IF_ERROR(f.Bool("apply_own_gradient", &apply_own_gradient));
  if (apply_own_gradient && mode == JobSpec::SYNC) {
    return f.RangeError("apply_own_gradient",
                        "applies only in async and stale mode (a sync step's parameters hold "
                        "every earlier update)");
  }
  if (apply_own_gradient && compensated) {
    return f.RangeError("apply_own_gradient",
                        "cannot be true with \"delay_compensation\" (the ps would compensate for "
                        "the worker's own last update, which the worker has already added)");
  }
  spec->set_own_gradient(apply_own_gradient ? JobSpec::OWN_GRADIENT_APPLY
                                            : JobSpec::OWN_GRADIENT_IGNORE);
  return absl::OkStatus();
}

// "checkpoint" and "warm_start". `variables`: the job's variables (null: not known here).
absl::Status ParseDurability(const Fields& f, const std::vector<std::string>* variables,
                             JobSpec* spec) {
  bool has_checkpoint = false;
  CheckpointSpec checkpoint;
  RETURN_IF_ERROR(ParseCheckpoint(f.Find("checkpoint"), &checkpoint, &has_checkpoint));
  if (has_checkpoint) *spec->mutable_checkpoint() = std::move(checkpoint);

  bool has_warm_start = false;
  WarmStartSpec warm_start;
  RETURN_IF_ERROR(ParseWarmStart(f.Find("warm_start"), variables, &warm_start, &has_warm_start));
  if (has_warm_start) *spec->mutable_warm_start() = std::move(warm_start);
  return absl::OkStatus();
}

// Rows of a variable of an external model, and elements, at most (what one ps shard can
// address; the ps' memory budget is checked when the variables are created).
constexpr int64_t kMaxExternalElements = int64_t{1} << 40;
constexpr size_t kMaxExternalVariables = 4096;
constexpr int64_t kMaxExamplesPerEpoch = int64_t{1} << 40;

// "name": what the ps holds under "{job name}/{name}", so a path of letters, digits and
// "_-.", parts joined by "/".
absl::Status CheckVariableName(const std::string& name, const std::string& path) {
  if (name.empty() || name.size() > 200) {
    return FieldError(path, absl::StrCat("must be 1..200 characters, got ", Quote(name)));
  }
  const bool chars_ok = std::all_of(name.begin(), name.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' ||
           c == '.' || c == '/';
  });
  if (!chars_ok || name.front() == '/' || name.back() == '/' ||
      absl::StrContains(name, "//") || absl::StrContains(name, "/part_")) {
    return FieldError(path, absl::StrCat("must be parts of A-Z a-z 0-9 _ - . joined by \"/\" "
                                         "(not \"part_N\", the ps' shard suffix), got ",
                                         Quote(name)));
  }
  return absl::OkStatus();
}

// "shape": positive dimensions, the first null for a dynamic table ([null, dim]).
absl::Status ParseExternalShape(const Fields& f, ExternalVariable* var, bool* dynamic) {
  const Json* shape = f.Find("shape");
  const std::string path = f.PathOf("shape");
  if (shape == nullptr || !shape->is_array() || shape->empty() || shape->size() > 8) {
    return FieldError(path, absl::StrCat("expected a list of 1..8 dimensions, e.g. [784, 10] or "
                                         "[null, 16] (a dynamic table), got ",
                                         shape == nullptr ? "nothing" : Described(*shape)));
  }
  *dynamic = (*shape)[0].is_null();
  if (*dynamic && shape->size() != 2) {
    return FieldError(path, absl::StrCat("a dynamic table is [null, dim], got ", Described(*shape)));
  }
  int64_t elements = 1;
  for (size_t d = 0; d < shape->size(); ++d) {
    const Json& dim = (*shape)[d];
    if (d == 0 && *dynamic) {
      var->add_shape(0);
      continue;
    }
    if (!dim.is_number_integer() || dim.get<int64_t>() < 1 ||
        dim.get<int64_t>() > kMaxExternalElements) {
      return FieldError(absl::StrCat(path, "[", d, "]"),
                        absl::StrCat("must be an integer in 1..2^40, got ", Described(dim)));
    }
    elements *= dim.get<int64_t>();
    if (elements > kMaxExternalElements) {
      return FieldError(path, absl::StrCat("more than 2^40 elements: ", Described(*shape)));
    }
    var->add_shape(dim.get<int64_t>());
  }
  return absl::OkStatus();
}

// One entry of "variables". Its initializer defaults by role: an embedding table's (read by
// rows) random_uniform in [-0.05, 0.05) as Keras' Embedding, a kernel's (2 or more
// dimensions) the job's "kernel_initializer", a bias's zeros.
absl::Status ParseExternalVariable(const Json& value, const std::string& path,
                                   const JobSpec& spec, ExternalVariable* var) {
  if (!value.is_object()) {
    return FieldError(path, absl::StrCat("expected an object with \"name\" and \"shape\", got ",
                                         Described(value)));
  }
  RETURN_IF_ERROR(CheckKeys(value, path, kExternalVariableKeys));
  Fields f(value, path);
  std::string name;
  RETURN_IF_ERROR(f.String("name", &name));
  RETURN_IF_ERROR(CheckVariableName(name, f.PathOf("name")));
  var->set_name(name);
  bool dynamic = false;
  RETURN_IF_ERROR(ParseExternalShape(f, var, &dynamic));
  std::string access = dynamic ? "rows" : "dense";
  RETURN_IF_ERROR(f.String("access", &access));
  if (access != "dense" && access != "rows") {
    return f.RangeError("access", "must be \"dense\" (whole) or \"rows\" (by rows)");
  }
  if (dynamic && access != "rows") {
    return f.RangeError("access", "must be \"rows\" for a dynamic table ([null, dim])");
  }
  var->set_rows(access == "rows");
  if (f.Has("initializer")) {
    return ParseInitializer(f.Find("initializer"), spec.seed(), var->mutable_initializer(),
                            f.PathOf("initializer"));
  }
  InitializerSpec* init = var->mutable_initializer();
  if (var->rows()) {
    init->set_type(InitializerSpec::RANDOM_UNIFORM);
    init->set_minval(-0.05);
    init->set_maxval(0.05);
    init->set_seed(spec.seed());
  } else if (var->shape_size() >= 2) {
    *init = spec.kernel_initializer();
  } else {
    init->set_type(InitializerSpec::ZEROS);
    init->set_seed(spec.seed());
  }
  return absl::OkStatus();
}

// "examples_per_epoch" and "variables", of model "external" only. Appends the variables'
// names on the ps to *variables.
absl::Status ParseExternal(const Fields& f, JobSpec* spec, std::vector<std::string>* variables,
                           bool* variables_known) {
  if (spec->model() != kExternalModel) {
    for (absl::string_view key : {"variables", "examples_per_epoch"}) {
      if (f.Has(key)) {
        return FieldError(key, absl::StrCat("is for model \"external\" only (",
                                            Quote(spec->model()), " has its own)"));
      }
    }
    return absl::OkStatus();
  }
  if (!f.Has("examples_per_epoch")) {
    return FieldError("examples_per_epoch",
                      "is required for model \"external\": the examples of one epoch");
  }
  int64_t examples = 0;
  RETURN_IF_ERROR(f.Int("examples_per_epoch", &examples));
  if (examples < 1 || examples > kMaxExamplesPerEpoch) {
    return f.RangeError("examples_per_epoch", "must be in 1..2^40");
  }
  spec->set_examples_per_epoch(examples);
  const Json* list = f.Find("variables");
  if (list == nullptr || !list->is_array() || list->empty() ||
      list->size() > kMaxExternalVariables) {
    return FieldError("variables",
                      absl::StrCat("model \"external\" needs a list of 1..4096 variables, e.g. "
                                   "[{\"name\": \"dense/kernel\", \"shape\": [784, 10]}], got ",
                                   list == nullptr ? "nothing" : Described(*list)));
  }
  variables->clear();
  for (size_t i = 0; i < list->size(); ++i) {
    const std::string path = absl::StrCat("variables[", i, "]");
    ExternalVariable* var = spec->add_variables();
    RETURN_IF_ERROR(ParseExternalVariable((*list)[i], path, *spec, var));
    const std::string full = absl::StrCat(spec->name(), "/", var->name());
    if (std::find(variables->begin(), variables->end(), full) != variables->end()) {
      return FieldError(absl::StrCat(path, ".name"),
                        absl::StrCat(Quote(var->name()), " is declared twice"));
    }
    variables->push_back(full);
  }
  *variables_known = true;
  return absl::OkStatus();
}

absl::StatusOr<JobSpec> ParseObject(const Json& root, int num_workers) {
  if (!root.is_object()) {
    return absl::InvalidArgumentError(
        OneLine(absl::StrCat("job: expected a JSON object, got ", Described(root))));
  }
  RETURN_IF_ERROR(CheckKeys(root, "", kJobKeys));
  Fields f(root, "");
  JobSpec spec;
  RETURN_IF_ERROR(ParseName(f, &spec));
  RETURN_IF_ERROR(ParseData(f, &spec));
  std::vector<std::string> variables;
  bool variables_known = true;
  RETURN_IF_ERROR(ParseModelOf(f, &spec, &variables, &variables_known));
  RETURN_IF_ERROR(ParseLength(f, &spec));
  RETURN_IF_ERROR(ParseOptimizers(f, &spec));
  RETURN_IF_ERROR(ParseMode(f, &spec));
  RETURN_IF_ERROR(ParseReplicas(f, num_workers, &spec));
  RETURN_IF_ERROR(ParseLayout(f, &spec));
  RETURN_IF_ERROR(ParseExternal(f, &spec, &variables, &variables_known));
  RETURN_IF_ERROR(ParseRunning(f, num_workers, &spec));
  RETURN_IF_ERROR(ParseStalenessPolicy(f, &spec));
  RETURN_IF_ERROR(ParseOwnGradient(f, &spec));
  RETURN_IF_ERROR(ParseDurability(f, variables_known ? &variables : nullptr, &spec));
  return spec;
}

// nlohmann's what() starts with "[json.exception.parse_error.101] ", which says nothing to a
// user.
std::string WithoutExceptionId(const char* what) {
  absl::string_view message(what);
  if (absl::StartsWith(message, "[json.exception.")) {
    const size_t end = message.find("] ");
    if (end != absl::string_view::npos) message.remove_prefix(end + 2);
  }
  return std::string(message);
}

}  // namespace

namespace {

// Parses `json` (null: absent) and runs `parse` on it, as ParseJobSpec would on a field of a
// job file, its messages without the "job: " of a job file's.
absl::Status ParseField(absl::string_view json, absl::string_view field,
                        const std::function<absl::Status(const Json*)>& parse) {
  Json value;
  try {
    value = Json::parse(json.begin(), json.end());
  } catch (const Json::exception& e) {
    return absl::InvalidArgumentError(
        OneLine(absl::StrCat(field, ": invalid JSON: ", WithoutExceptionId(e.what()))));
  }
  absl::Status status = parse(value.is_null() ? nullptr : &value);
  if (status.ok() || !absl::StartsWith(status.message(), "job: ")) return status;
  return absl::Status(status.code(), status.message().substr(5));
}

}  // namespace

absl::StatusOr<OptimizerSpec> ParseOptimizerField(absl::string_view json,
                                                  absl::string_view field) {
  OptimizerSpec optimizer;
  RETURN_IF_ERROR(ParseField(json, field, [&](const Json* value) {
    return ParseOptimizer(value, &optimizer, field);
  }));
  return optimizer;
}

absl::StatusOr<InitializerSpec> ParseInitializerField(absl::string_view json,
                                                      absl::string_view field, uint64_t seed) {
  InitializerSpec initializer;
  RETURN_IF_ERROR(ParseField(json, field, [&](const Json* value) {
    return ParseInitializer(value, seed, &initializer, field);
  }));
  return initializer;
}

absl::StatusOr<JobSpec> ParseJobSpec(absl::string_view json, int num_workers) {
  Json root;
  try {
    root = Json::parse(json.begin(), json.end());
  } catch (const Json::exception& e) {
    return absl::InvalidArgumentError(
        OneLine(absl::StrCat("job: invalid JSON: ", WithoutExceptionId(e.what()))));
  }
  try {
    return ParseObject(root, num_workers);
  } catch (const std::exception& e) {
    // Not expected: every access above checks the type first.
    return absl::InvalidArgumentError(OneLine(absl::StrCat("job: ", WithoutExceptionId(e.what()))));
  }
}

namespace {

// An optimizer as job files write it.
OrderedJson OptimizerToJson(const OptimizerSpec& o) {
  OrderedJson optimizer;
  optimizer["type"] = std::string(
      o.type() == OptimizerSpec::NOOP ? "noop" : NameOf(kOptimizers, o.type(), "unknown"));
  optimizer["learning_rate"] = o.learning_rate();
  optimizer["momentum"] = o.momentum();
  optimizer["nesterov"] = o.nesterov();
  optimizer["initial_accumulator_value"] = o.initial_accumulator_value();
  optimizer["beta1"] = o.beta1();
  optimizer["beta2"] = o.beta2();
  optimizer["epsilon"] = o.epsilon();
  if (o.decay_rate() != 0) {
    optimizer["decay_rate"] = o.decay_rate();
    optimizer["decay_steps"] = o.decay_steps();
    optimizer["staircase"] = o.staircase();
  }
  if (o.has_learning_rate_power()) optimizer["learning_rate_power"] = o.learning_rate_power();
  const bool ftrl = o.type() == OptimizerSpec::FTRL;
  if (ftrl || o.l1() != 0) optimizer["l1"] = o.l1();
  if (ftrl || o.l2() != 0) optimizer["l2"] = o.l2();
  if (ftrl || o.l2_shrinkage() != 0) optimizer["l2_shrinkage"] = o.l2_shrinkage();
  if (ftrl || o.beta() != 0) optimizer["beta"] = o.beta();
  return optimizer;
}

OrderedJson DynamicTablesToJson(const DynamicTablesSpec& d) {
  OrderedJson tables;
  tables["num_buckets"] = d.num_buckets() > 0 ? d.num_buckets() : kDefaultNumBuckets;
  tables["admit_after"] = d.admit_after();
  tables["ttl_steps"] = d.ttl_steps();
  tables["max_rows"] = d.max_rows();
  return tables;
}

OrderedJson InitializerToJson(const InitializerSpec& i) {
  OrderedJson init;
  init["type"] = std::string(NameOf(kInitializers, i.type(), "unknown"));
  init["value"] = i.value();
  init["minval"] = i.minval();
  init["maxval"] = i.maxval();
  init["mean"] = i.mean();
  init["stddev"] = i.stddev();
  init["seed"] = i.seed();
  return init;
}

OrderedJson CheckpointToJson(const CheckpointSpec& c) {
  OrderedJson checkpoint;
  if (!c.dir().empty()) checkpoint["dir"] = c.dir();
  checkpoint["every_steps"] = c.every_steps();
  checkpoint["every_seconds"] = c.every_seconds();
  checkpoint["keep"] = c.keep();
  checkpoint["keep_best"] = c.keep_best();
  // Written only when set, so that the files of jobs without dynamic tables stay as they
  // were (the default, 5, applies when absent).
  if (c.full_every() > 0) checkpoint["full_every"] = c.full_every();
  if (c.cut() == CheckpointSpec::DRAIN) checkpoint["cut"] = "drain";
  return checkpoint;
}

OrderedJson WarmStartToJson(const WarmStartSpec& w) {
  OrderedJson warm_start;
  warm_start["from"] = w.from();
  // A proto map iterates in no fixed order; the file lists the names sorted.
  std::map<std::string, std::string> variables(w.variables().begin(), w.variables().end());
  OrderedJson names = OrderedJson::object();
  for (const auto& [name, source] : variables) names[name] = source;
  warm_start["variables"] = std::move(names);
  warm_start["with_slots"] = w.with_slots();
  return warm_start;
}

}  // namespace

std::string JobSpecToJson(const JobSpec& spec, int indent) {
  OrderedJson out;
  out["name"] = spec.name();
  out["model"] = spec.model();
  out["dataset"] = spec.dataset();
  // Synthetic data has no directory; an empty one is not a valid job file field.
  if (!spec.data_dir().empty()) out["data_dir"] = spec.data_dir();
  out["batch_size"] = spec.batch_size();
  if (spec.epochs() > 0 || spec.steps() == 0) out["epochs"] = spec.epochs();
  if (spec.steps() > 0) out["steps"] = spec.steps();

  out["optimizer"] = OptimizerToJson(spec.optimizer());
  if (spec.has_embedding_optimizer()) {
    out["embedding_optimizer"] = OptimizerToJson(spec.embedding_optimizer());
  }
  if (spec.has_dynamic_tables()) out["dynamic_tables"] = DynamicTablesToJson(spec.dynamic_tables());

  out["mode"] = JobModeName(spec.mode());
  if (spec.mode() == JobSpec::STALE) out["staleness"] = spec.staleness();
  if (spec.mode() == JobSpec::SYNC) out["num_replicas"] = spec.num_replicas();
  // Written only when set: the files of jobs without backups (checkpoint manifests, a job's
  // identity) stay exactly what they were, and 0 is the one meaning an absent key can have.
  if (spec.sync_backup_workers() > 0) out["sync_backup_workers"] = spec.sync_backup_workers();
  out["partitioner"] = spec.partitioner();
  out["placement"] = spec.placement();
  // Written only when set, as sync_backup_workers: 0 (every ps of TF_CONFIG) is what an
  // absent key means, and the files of jobs that start on every ps stay what they were.
  if (spec.num_ps() > 0) out["num_ps"] = spec.num_ps();
  out["seed"] = spec.seed();

  out["kernel_initializer"] = InitializerToJson(spec.kernel_initializer());

  out["eval_every_steps"] = spec.eval_every_steps();
  out["step_timeout_ms"] = spec.step_timeout_ms();
  out["steps_in_flight"] = StepsInFlight(spec);
  out["apply_own_gradient"] = ApplyOwnGradient(spec);
  out["backend"] = spec.backend();
  if (spec.mode() != JobSpec::SYNC) {
    out["staleness_lr"] = std::string(NameOf(kStalenessLrs, spec.staleness_lr(), "unknown"));
    out["delay_compensation"] = spec.delay_compensation();
    out["delay_compensation_adaptive"] = spec.delay_compensation_adaptive();
  }

  if (spec.model() == kExternalModel) {
    out["examples_per_epoch"] = spec.examples_per_epoch();
    OrderedJson variables = OrderedJson::array();
    for (const ExternalVariable& v : spec.variables()) {
      OrderedJson var;
      var["name"] = v.name();
      OrderedJson shape = OrderedJson::array();
      for (int d = 0; d < v.shape_size(); ++d) {
        if (d == 0 && v.rows() && v.shape(0) == 0) {
          shape.push_back(nullptr);
        } else {
          shape.push_back(v.shape(d));
        }
      }
      var["shape"] = shape;
      var["access"] = v.rows() ? "rows" : "dense";
      var["initializer"] = InitializerToJson(v.initializer());
      variables.push_back(var);
    }
    out["variables"] = variables;
  }
  if (spec.has_checkpoint()) out["checkpoint"] = CheckpointToJson(spec.checkpoint());
  if (!spec.warm_start().from().empty()) out["warm_start"] = WarmStartToJson(spec.warm_start());
  return out.dump(indent, ' ', false, OrderedJson::error_handler_t::replace);
}

int64_t StepsPerEpoch(int64_t num_examples, int batch_size) {
  if (num_examples <= 0 || batch_size <= 0) return 0;
  return (num_examples + batch_size - 1) / batch_size;
}

int DefaultStepsInFlight(JobSpec::Mode mode, int num_workers) {
  if (mode == JobSpec::SYNC) return 1;
  return num_workers <= 1 ? 2 : 1;
}

int StepsInFlight(const JobSpec& spec) {
  if (spec.steps_in_flight() > 0) return spec.steps_in_flight();
  return spec.mode() == JobSpec::SYNC ? 1 : 2;
}

bool ApplyOwnGradient(const JobSpec& spec) {
  switch (spec.own_gradient()) {
    case JobSpec::OWN_GRADIENT_APPLY:
      return true;
    case JobSpec::OWN_GRADIENT_IGNORE:
      return false;
    default:
      return spec.mode() != JobSpec::SYNC;
  }
}

std::string JobModeName(JobSpec::Mode mode) { return std::string(NameOf(kModes, mode, "unknown")); }

}  // namespace shardps
