// FlagParser: command-line flags for shardps' daemons and CLI, with the exit-code contract
// the project promises: a bad command line is reported in one line naming the flag and the
// program exits 2 (absl's flag library exits 1 and cannot be told otherwise). Flags are
// registered on a parser object, not in globals, so several parsers can live in one test.
//
// Syntax: --name=value, --name value, --bool / --nobool / --bool=true|false; "--" ends flags.
//
// A flag may declare the values it takes (a range, a list of choices); Parse refuses a value
// outside them with one message form for every program: "--threads must be 1..256, got 0".
//
// Thread-safety: not thread-safe; use from main().
#ifndef SHARDPS_COMMON_FLAGS_H_
#define SHARDPS_COMMON_FLAGS_H_

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace shardps {

// The integers [min, max].
struct IntRange {
  int64_t min = std::numeric_limits<int64_t>::min();
  int64_t max = std::numeric_limits<int64_t>::max();

  static IntRange AtLeast(int64_t min) { return {min, std::numeric_limits<int64_t>::max()}; }
  bool Contains(int64_t value) const { return value >= min && value <= max; }
  // "1..256", or ">= 0" when unbounded above.
  std::string ToString() const;
};

// The numbers between min and max, each bound closed or open; NaN is in no range.
struct DoubleRange {
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  bool min_open = false;
  bool max_open = false;

  static DoubleRange AtLeast(double min) { return {min}; }
  static DoubleRange GreaterThan(double min) { return {min, DoubleRange().max, true}; }
  // [min, max)
  static DoubleRange HalfOpen(double min, double max) { return {min, max, false, true}; }
  bool Contains(double value) const;
  // ">= 0", "> 0", "in [0, 1)".
  std::string ToString() const;
};

class FlagParser {
 public:
  FlagParser(std::string program, std::string summary);

  void AddString(const std::string& name, std::string* target, const std::string& help);
  void AddInt(const std::string& name, int64_t* target, const std::string& help);
  void AddDouble(const std::string& name, double* target, const std::string& help);
  void AddBool(const std::string& name, bool* target, const std::string& help);
  // The same, refusing values outside `range` or `choices`, or that `check` refuses (its
  // message follows "--name: ").
  void AddInt(const std::string& name, int64_t* target, const std::string& help, IntRange range);
  void AddDouble(const std::string& name, double* target, const std::string& help,
                 DoubleRange range);
  void AddChoice(const std::string& name, std::string* target, const std::string& help,
                 std::vector<std::string> choices);
  void AddString(const std::string& name, std::string* target, const std::string& help,
                 std::function<absl::Status(const std::string&)> check);

  // Parses argv[1..]. Arguments that are not flags are appended to `positional` (an error if
  // `positional` is null). Returns INVALID_ARGUMENT naming the flag at fault. `--help` sets
  // help_requested() and returns OK.
  absl::Status Parse(int argc, char** argv, std::vector<std::string>* positional = nullptr);
  absl::Status Parse(const std::vector<std::string>& args,
                     std::vector<std::string>* positional);

  bool help_requested() const { return help_requested_; }
  std::string Usage() const;

 private:
  enum class Kind { kString, kInt, kDouble, kBool };
  struct Flag {
    Kind kind;
    void* target;
    std::string help;
    std::string default_value;
    IntRange int_range;
    DoubleRange double_range;
    std::vector<std::string> choices;  // empty: any string
    std::function<absl::Status(const std::string&)> check;  // null: any string
  };
  absl::Status Set(const std::string& name, Flag& flag, const std::string& value);

  std::string program_;
  std::string summary_;
  std::map<std::string, Flag> flags_;
  bool help_requested_ = false;
};

// Runs the usual epilogue of a parse in main(): on --help prints usage to stdout and returns
// 0; on error prints "program: message" and a hint to stderr and returns 2; otherwise -1
// (go on).
int HandleParseResult(const FlagParser& parser, const absl::Status& status);

}  // namespace shardps

#endif  // SHARDPS_COMMON_FLAGS_H_
