#include "common/flags.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace shardps {
namespace {

// "a", "a or b", "a, b or c".
std::string OneOf(const std::vector<std::string>& choices) {
  if (choices.size() < 2) return absl::StrJoin(choices, "");
  return absl::StrCat(
      absl::StrJoin(choices.begin(), choices.end() - 1, ", "), " or ", choices.back());
}

}  // namespace

std::string IntRange::ToString() const {
  if (max == std::numeric_limits<int64_t>::max()) return absl::StrCat(">= ", min);
  return absl::StrCat(min, "..", max);
}

bool DoubleRange::Contains(double value) const {
  if (std::isnan(value)) return false;
  const bool above_min = min_open ? value > min : value >= min;
  const bool below_max = max_open ? value < max : value <= max;
  return above_min && below_max;
}

std::string DoubleRange::ToString() const {
  const bool bounded_below = min != -std::numeric_limits<double>::infinity();
  const bool bounded_above = max != std::numeric_limits<double>::infinity();
  if (bounded_below && !bounded_above) return absl::StrCat(min_open ? "> " : ">= ", min);
  if (!bounded_below && bounded_above) return absl::StrCat(max_open ? "< " : "<= ", max);
  return absl::StrCat("in ", min_open ? "(" : "[", min, ", ", max, max_open ? ")" : "]");
}

FlagParser::FlagParser(std::string program, std::string summary)
    : program_(std::move(program)), summary_(std::move(summary)) {}

void FlagParser::AddString(const std::string& name, std::string* target,
                           const std::string& help) {
  flags_[name] = Flag{Kind::kString, target, help, *target};
}
void FlagParser::AddInt(const std::string& name, int64_t* target, const std::string& help) {
  flags_[name] = Flag{Kind::kInt, target, help, absl::StrCat(*target)};
}
void FlagParser::AddDouble(const std::string& name, double* target, const std::string& help) {
  flags_[name] = Flag{Kind::kDouble, target, help, absl::StrCat(*target)};
}
void FlagParser::AddBool(const std::string& name, bool* target, const std::string& help) {
  flags_[name] = Flag{Kind::kBool, target, help, *target ? "true" : "false"};
}
void FlagParser::AddInt(const std::string& name, int64_t* target, const std::string& help,
                        IntRange range) {
  AddInt(name, target, help);
  flags_[name].int_range = range;
}
void FlagParser::AddDouble(const std::string& name, double* target, const std::string& help,
                           DoubleRange range) {
  AddDouble(name, target, help);
  flags_[name].double_range = range;
}
void FlagParser::AddString(const std::string& name, std::string* target, const std::string& help,
                           std::function<absl::Status(const std::string&)> check) {
  AddString(name, target, help);
  flags_[name].check = std::move(check);
}
void FlagParser::AddChoice(const std::string& name, std::string* target, const std::string& help,
                           std::vector<std::string> choices) {
  AddString(name, target, help);
  flags_[name].choices = std::move(choices);
}

absl::Status FlagParser::Set(const std::string& name, Flag& flag, const std::string& value) {
  switch (flag.kind) {
    case Kind::kString:
      if (!flag.choices.empty() &&
          std::find(flag.choices.begin(), flag.choices.end(), value) == flag.choices.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", name, " must be ", OneOf(flag.choices), ", got \"", value, "\""));
      }
      if (flag.check) {
        if (absl::Status s = flag.check(value); !s.ok()) {
          return absl::InvalidArgumentError(absl::StrCat("--", name, ": ", s.message()));
        }
      }
      *static_cast<std::string*>(flag.target) = value;
      return absl::OkStatus();
    case Kind::kInt: {
      int64_t parsed;
      if (!absl::SimpleAtoi(value, &parsed)) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", name, ": \"", value, "\" is not an integer"));
      }
      if (!flag.int_range.Contains(parsed)) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", name, " must be ", flag.int_range.ToString(), ", got ", value));
      }
      *static_cast<int64_t*>(flag.target) = parsed;
      return absl::OkStatus();
    }
    case Kind::kDouble: {
      double parsed;
      if (!absl::SimpleAtod(value, &parsed)) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", name, ": \"", value, "\" is not a number"));
      }
      if (!flag.double_range.Contains(parsed)) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", name, " must be ", flag.double_range.ToString(), ", got ", value));
      }
      *static_cast<double*>(flag.target) = parsed;
      return absl::OkStatus();
    }
    case Kind::kBool: {
      bool parsed;
      if (!absl::SimpleAtob(value, &parsed)) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", name, ": \"", value, "\" is not true or false"));
      }
      *static_cast<bool*>(flag.target) = parsed;
      return absl::OkStatus();
    }
  }
  return absl::OkStatus();
}

absl::Status FlagParser::Parse(int argc, char** argv, std::vector<std::string>* positional) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return Parse(args, positional);
}

absl::Status FlagParser::Parse(const std::vector<std::string>& args,
                               std::vector<std::string>* positional) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      for (size_t j = i + 1; j < args.size(); ++j) {
        if (positional == nullptr) {
          return absl::InvalidArgumentError(absl::StrCat("unexpected argument \"", args[j], "\""));
        }
        positional->push_back(args[j]);
      }
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      if (positional == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat("unexpected argument \"", arg, "\""));
      }
      positional->push_back(arg);
      continue;
    }
    std::string body = arg.substr(arg[1] == '-' ? 2 : 1);
    if (body == "help" || body == "h") {
      help_requested_ = true;
      continue;
    }
    std::string name = body, value;
    bool has_value = false;
    if (size_t eq = body.find('='); eq != std::string::npos) {
      name = body.substr(0, eq);
      value = body.substr(eq + 1);
      has_value = true;
    }
    auto it = flags_.find(name);
    if (it == flags_.end() && !has_value && name.rfind("no", 0) == 0) {
      auto neg = flags_.find(name.substr(2));
      if (neg != flags_.end() && neg->second.kind == Kind::kBool) {
        *static_cast<bool*>(neg->second.target) = false;
        continue;
      }
    }
    if (it == flags_.end()) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
    }
    if (!has_value) {
      if (it->second.kind == Kind::kBool) {
        value = "true";
      } else if (i + 1 < args.size()) {
        value = args[++i];
      } else {
        return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
      }
    }
    absl::Status s = Set(name, it->second, value);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

std::string FlagParser::Usage() const {
  std::string out = absl::StrCat("usage: ", program_, " [flags]\n", summary_, "\n\nflags:\n");
  for (const auto& [name, flag] : flags_) {
    std::string shown = flag.default_value.empty() ? "\"\"" : flag.default_value;
    std::string values;
    if (!flag.choices.empty()) {
      values = absl::StrCat("; ", OneOf(flag.choices));
    } else if (flag.kind == Kind::kInt && flag.int_range.min != IntRange().min) {
      values = absl::StrCat("; ", flag.int_range.ToString());
    } else if (flag.kind == Kind::kDouble && (flag.double_range.min != DoubleRange().min ||
                                              flag.double_range.max != DoubleRange().max)) {
      values = absl::StrCat("; ", flag.double_range.ToString());
    }
    absl::StrAppendFormat(&out, "  --%-22s %s (default: %s%s)\n", name, flag.help, shown,
                          values);
  }
  absl::StrAppend(&out, "  --help                   show this help\n");
  return out;
}

int HandleParseResult(const FlagParser& parser, const absl::Status& status) {
  if (!status.ok()) {
    std::cerr << "error: " << status.message() << "\n(run with --help for usage)\n";
    return 2;
  }
  if (parser.help_requested()) {
    std::cout << parser.Usage();
    return 0;
  }
  return -1;
}

}  // namespace shardps
