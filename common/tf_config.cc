#include "common/tf_config.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <exception>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include <nlohmann/json.hpp>

namespace shardps {
namespace {

using Json = nlohmann::json;

constexpr absl::string_view kKnownJobs[] = {"chief", "worker", "ps", "evaluator"};
constexpr char kExpectedJobs[] = "expected chief, worker, ps or evaluator";
constexpr size_t kMaxFileBytes = 16 << 20;

bool IsKnownJob(absl::string_view job) {
  for (absl::string_view known : kKnownJobs) {
    if (job == known) return true;
  }
  return false;
}

// A user-supplied string, quoted and escaped so that a message stays on one line.
std::string Quote(absl::string_view s) { return absl::StrCat("\"", absl::CHexEscape(s), "\""); }

// Replaces control characters so that a foreign message (nlohmann's) stays on one line.
std::string OneLine(absl::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  return out;
}

absl::Status FieldError(absl::string_view field, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat("TF_CONFIG: ", field, ": ", message));
}

std::string TypeName(const Json& value) {
  if (value.is_number_integer()) return "integer";
  if (value.is_number_float()) return "number";
  return value.type_name();
}

// Why `address` is not a valid "host:port", or "" when it is.
std::string AddressProblem(absl::string_view address) {
  if (address.empty()) return "address is empty; expected host:port";
  if (absl::StrContains(address, "://")) return "expected host:port without a scheme";
  absl::string_view host;
  absl::string_view port;
  if (address[0] == '[') {
    const size_t close = address.find(']');
    if (close == absl::string_view::npos) return "IPv6 address has no closing ']'";
    host = address.substr(1, close - 1);
    absl::string_view rest = address.substr(close + 1);
    if (rest.empty() || rest[0] != ':') return "expected [ipv6]:port";
    port = rest.substr(1);
    // inet_pton takes no zone ("%eth0"), which is legal for link-local addresses.
    std::string ip(host.substr(0, host.find('%')));
    in6_addr parsed;
    if (ip.empty() || inet_pton(AF_INET6, ip.c_str(), &parsed) != 1) {
      return "not a valid IPv6 address in brackets";
    }
  } else {
    const size_t colon = address.find(':');
    if (colon == absl::string_view::npos) return "missing :port; expected host:port";
    if (address.find(':', colon + 1) != absl::string_view::npos) {
      return "too many ':'; an IPv6 address must be in brackets, e.g. \"[::1]:2222\"";
    }
    host = address.substr(0, colon);
    port = address.substr(colon + 1);
    if (host.empty()) return "host is empty; expected host:port";
    for (char c : host) {
      if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.' &&
          c != '_') {
        return absl::StrCat("host has an invalid character '", absl::CHexEscape(std::string(1, c)),
                            "'");
      }
    }
  }
  int64_t port_number = 0;
  const bool digits = !port.empty() && port.size() <= 10 &&
                      std::all_of(port.begin(), port.end(),
                                  [](char c) { return c >= '0' && c <= '9'; });
  if (!digits || !absl::SimpleAtoi(port, &port_number) || port_number < 1 ||
      port_number > 65535) {
    return "port must be 1..65535";
  }
  return "";
}

absl::Status ParseCluster(const Json& root, TfConfig& config) {
  auto it = root.find("cluster");
  if (it == root.end()) return FieldError("cluster", "missing");
  if (!it->is_object()) {
    return FieldError("cluster", absl::StrCat("must be an object of job lists, got ",
                                              TypeName(*it)));
  }
  for (const auto& [job, tasks] : it->items()) {
    const std::string field = absl::StrCat("cluster.", absl::CHexEscape(job));
    if (!IsKnownJob(job)) {
      return FieldError(field, absl::StrCat("unknown job ", Quote(job), "; ", kExpectedJobs));
    }
    if (tasks.is_object() && job == "worker") {
      // TensorFlow's sparse job: {"3": "host:port", ...}.
      for (const auto& [key, value] : tasks.items()) {
        const std::string task_field = absl::StrCat(field, ".", absl::CHexEscape(key));
        int index = -1;
        const bool digits = !key.empty() && key.size() <= 9 &&
                            std::all_of(key.begin(), key.end(),
                                        [](char c) { return c >= '0' && c <= '9'; });
        if (!digits || !absl::SimpleAtoi(key, &index)) {
          return FieldError(task_field, "a sparse job's keys are task indices (digits)");
        }
        if (!value.is_string()) {
          return FieldError(task_field,
                            absl::StrCat("must be a \"host:port\" string, got ", TypeName(value)));
        }
        const std::string& address = value.get_ref<const std::string&>();
        if (std::string problem = AddressProblem(address); !problem.empty()) {
          return FieldError(task_field, absl::StrCat(Quote(address), ": ", problem));
        }
        config.sparse_workers[index] = address;
      }
      continue;
    }
    if (!tasks.is_array()) {
      return FieldError(field, absl::StrCat("must be a list of \"host:port\" strings, got ",
                                            TypeName(tasks), job == "worker" ? " (or a sparse "
                                            "object of index -> \"host:port\")" : ""));
    }
    std::vector<std::string>& addresses = config.cluster[job];
    for (size_t i = 0; i < tasks.size(); ++i) {
      const std::string task_field = absl::StrCat(field, "[", i, "]");
      if (!tasks[i].is_string()) {
        return FieldError(task_field,
                          absl::StrCat("must be a \"host:port\" string, got ", TypeName(tasks[i])));
      }
      const std::string& address = tasks[i].get_ref<const std::string&>();
      if (std::string problem = AddressProblem(address); !problem.empty()) {
        return FieldError(task_field, absl::StrCat(Quote(address), ": ", problem));
      }
      addresses.push_back(address);
    }
  }
  for (absl::string_view single : {"chief", "evaluator"}) {
    const int n = config.NumTasks(single);
    if (n > 1) {
      return FieldError(absl::StrCat("cluster.", single),
                        absl::StrCat("at most one ", single, " task is allowed, got ", n));
    }
  }
  if (config.NumTasks("ps") == 0) {
    return FieldError("cluster.ps", "at least one ps task is required");
  }
  // Host names are case-insensitive, so "PS-0:2222" and "ps-0:2222" collide.
  std::map<std::string, std::string> owner;  // Lowercased address -> field holding it.
  for (const auto& [index, address] : config.sparse_workers) {
    owner.emplace(absl::AsciiStrToLower(address), absl::StrCat("cluster.worker.", index));
  }
  for (absl::string_view job : kKnownJobs) {
    const std::vector<std::string>& addresses = config.Tasks(job);
    for (size_t i = 0; i < addresses.size(); ++i) {
      const std::string field = absl::StrCat("cluster.", job, "[", i, "]");
      auto [existing, inserted] = owner.emplace(absl::AsciiStrToLower(addresses[i]), field);
      if (!inserted) {
        return FieldError(field, absl::StrCat(Quote(addresses[i]), ": same address as ",
                                              existing->second));
      }
    }
  }
  return absl::OkStatus();
}

// TensorFlow reads task.index with int(), so both 1 and "1" are accepted.
absl::StatusOr<int64_t> ParseIndex(const Json& index) {
  constexpr int64_t kMax = std::numeric_limits<int>::max();
  if (index.is_number_unsigned()) {
    const uint64_t value = index.get<uint64_t>();
    return value > static_cast<uint64_t>(kMax) ? kMax + 1 : static_cast<int64_t>(value);
  }
  if (index.is_number_integer()) {
    const int64_t value = index.get<int64_t>();
    if (value < 0) return FieldError("task.index", absl::StrCat(value, " must be >= 0"));
    return value > kMax ? kMax + 1 : value;
  }
  if (index.is_string()) {
    const std::string& text = index.get_ref<const std::string&>();
    int64_t value = 0;
    const bool digits = !text.empty() && text.size() <= 18 &&
                        std::all_of(text.begin(), text.end(),
                                    [](char c) { return c >= '0' && c <= '9'; });
    if (!digits || !absl::SimpleAtoi(text, &value)) {
      return FieldError("task.index",
                        absl::StrCat(Quote(text), " is not a non-negative integer"));
    }
    return value > kMax ? kMax + 1 : value;
  }
  if (index.is_number_float()) {
    return FieldError("task.index", absl::StrCat("must be an integer, got ", index.dump()));
  }
  return FieldError("task.index",
                    absl::StrCat("must be a non-negative integer, got ", TypeName(index)));
}

absl::Status ParseTask(const Json& root, TfConfig& config) {
  auto task = root.find("task");
  if (task == root.end()) return FieldError("task", "missing");
  if (!task->is_object()) {
    return FieldError("task", absl::StrCat("must be an object with \"type\" and \"index\", got ",
                                           TypeName(*task)));
  }
  auto type = task->find("type");
  if (type == task->end()) return FieldError("task.type", "missing");
  if (!type->is_string()) {
    return FieldError("task.type", absl::StrCat("must be a string, got ", TypeName(*type)));
  }
  config.task_type = type->get<std::string>();
  if (!IsKnownJob(config.task_type)) {
    return FieldError("task.type",
                      absl::StrCat("unknown job ", Quote(config.task_type), "; ", kExpectedJobs));
  }
  auto index = task->find("index");
  if (index == task->end()) return FieldError("task.index", "missing");
  ASSIGN_OR_RETURN(int64_t task_index, ParseIndex(*index));

  if (config.task_type == "worker" && !config.sparse_workers.empty()) {
    if (task_index > std::numeric_limits<int>::max() ||
        config.sparse_workers.count(static_cast<int>(task_index)) == 0) {
      return FieldError("task.index", absl::StrCat(index->dump(), " is not a task of the sparse ",
                                                   "\"worker\" job"));
    }
    config.task_index = static_cast<int>(task_index);
    return absl::OkStatus();
  }
  // TensorFlow lets the evaluator sit outside the cluster: nobody connects to it.
  const bool in_cluster = config.cluster.count(config.task_type) > 0;
  if (!in_cluster && config.task_type != "evaluator") {
    return FieldError("task.type", absl::StrCat(Quote(config.task_type),
                                                " has no tasks in cluster"));
  }
  const int num_tasks = config.NumTasks(config.task_type);
  if (in_cluster && task_index >= num_tasks) {
    return FieldError("task.index",
                      absl::StrCat(task_index > std::numeric_limits<int>::max()
                                       ? index->dump()
                                       : absl::StrCat(task_index),
                                   " is out of range for ", Quote(config.task_type), " (",
                                   num_tasks, num_tasks == 1 ? " task)" : " tasks)"));
  }
  if (task_index > std::numeric_limits<int>::max()) {
    return FieldError("task.index", absl::StrCat(index->dump(), " is too large"));
  }
  config.task_index = static_cast<int>(task_index);
  return absl::OkStatus();
}

// An optional string field; null counts as absent.
absl::Status ParseOptionalString(const Json& root, const char* key, std::string& out) {
  auto it = root.find(key);
  if (it == root.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_string()) {
    return FieldError(key, absl::StrCat("must be a string, got ", TypeName(*it)));
  }
  out = it->get<std::string>();
  return absl::OkStatus();
}

absl::StatusOr<TfConfig> ParseTfConfigOrThrow(absl::string_view text) {
  Json root;
  try {
    root = Json::parse(text.begin(), text.end());
  } catch (const Json::parse_error& e) {
    return absl::InvalidArgumentError(absl::StrCat("TF_CONFIG: invalid JSON: ", OneLine(e.what())));
  }
  if (!root.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("TF_CONFIG: must be a JSON object, got ", TypeName(root)));
  }
  TfConfig config;
  RETURN_IF_ERROR(ParseCluster(root, config));
  RETURN_IF_ERROR(ParseTask(root, config));
  RETURN_IF_ERROR(ParseOptionalString(root, "rpc_layer", config.rpc_layer));
  if (!config.rpc_layer.empty() && config.rpc_layer != "grpc") {
    return FieldError("rpc_layer", absl::StrCat(Quote(config.rpc_layer),
                                                " is not supported; only \"grpc\""));
  }
  RETURN_IF_ERROR(ParseOptionalString(root, "environment", config.environment));
  return config;
}

absl::Status WithSource(const absl::Status& status, absl::string_view source) {
  return absl::Status(status.code(), absl::StrCat(status.message(), " (", source, ")"));
}

absl::StatusOr<std::string> ReadConfigFile(absl::string_view path) {
  const std::string source = absl::StrCat("--tf_config file ", Quote(path));
  std::FILE* file = std::fopen(std::string(path).c_str(), "rb");
  if (file == nullptr) {
    return absl::ErrnoToStatus(errno, absl::StrCat(source, ": cannot open"));
  }
  std::string contents;
  char buffer[64 << 10];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), file)) > 0) {
    contents.append(buffer, n);
    if (contents.size() > kMaxFileBytes) {
      std::fclose(file);
      return absl::InvalidArgumentError(absl::StrCat(source, ": larger than ", kMaxFileBytes,
                                                     " bytes; is it a TF_CONFIG file?"));
    }
  }
  const int read_errno = errno;
  const bool failed = std::ferror(file) != 0;
  std::fclose(file);
  if (failed) return absl::ErrnoToStatus(read_errno, absl::StrCat(source, ": cannot read"));
  return contents;
}

}  // namespace

const std::vector<std::string>& TfConfig::Tasks(absl::string_view type) const {
  static const std::vector<std::string>* const kEmpty = new std::vector<std::string>();
  auto it = cluster.find(std::string(type));
  return it == cluster.end() ? *kEmpty : it->second;
}

int TfConfig::NumTasks(absl::string_view type) const {
  return static_cast<int>(Tasks(type).size());
}

absl::StatusOr<std::string> TfConfig::Address(absl::string_view type, int index) const {
  if (type == "worker" && !sparse_workers.empty()) {
    auto sparse = sparse_workers.find(index);
    if (sparse == sparse_workers.end()) {
      return absl::OutOfRangeError(
          absl::StrCat("\"worker\" index ", index, " is not in the sparse worker job"));
    }
    return sparse->second;
  }
  auto it = cluster.find(std::string(type));
  if (it == cluster.end()) {
    return absl::NotFoundError(absl::StrCat("no ", Quote(type), " job in the cluster"));
  }
  if (index < 0 || index >= static_cast<int>(it->second.size())) {
    return absl::OutOfRangeError(absl::StrCat(Quote(type), " index ", index,
                                              " is out of range (", it->second.size(),
                                              " tasks)"));
  }
  return it->second[index];
}

std::string TfConfig::TaskAddress() const {
  absl::StatusOr<std::string> address = Address(task_type, task_index);
  return address.ok() ? *address : "";
}

std::string TfConfig::DebugString() const {
  const std::string address = TaskAddress();
  return absl::StrCat(task_type, ":", task_index,
                      address.empty() ? " (not in cluster)" : absl::StrCat(" at ", address));
}

absl::StatusOr<TfConfig> ParseTfConfig(absl::string_view json) {
  // Every nlohmann call that can throw is guarded above; this is the boundary's backstop.
  try {
    return ParseTfConfigOrThrow(json);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("TF_CONFIG: ", OneLine(e.what())));
  }
}

absl::StatusOr<TfConfig> LoadTfConfig(absl::string_view flag_value, const char* env_value) {
  if (!flag_value.empty()) {
    if (absl::StartsWith(absl::StripLeadingAsciiWhitespace(flag_value), "{")) {
      absl::StatusOr<TfConfig> config = ParseTfConfig(flag_value);
      if (!config.ok()) return WithSource(config.status(), "in --tf_config");
      return config;
    }
    ASSIGN_OR_RETURN(std::string contents, ReadConfigFile(flag_value));
    absl::StatusOr<TfConfig> config = ParseTfConfig(contents);
    if (!config.ok()) {
      return WithSource(config.status(), absl::StrCat("in --tf_config file ", Quote(flag_value)));
    }
    return config;
  }
  if (env_value != nullptr && env_value[0] != '\0') return ParseTfConfig(env_value);
  return absl::FailedPreconditionError("TF_CONFIG is not set and --tf_config was not given");
}

}  // namespace shardps
