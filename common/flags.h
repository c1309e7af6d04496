// FlagParser: command-line flags for shardps' daemons and CLI, with the exit-code contract
// the project promises: a bad command line is reported in one line naming the flag and the
// program exits 2 (absl's flag library exits 1 and cannot be told otherwise). Flags are
// registered on a parser object, not in globals, so several parsers can live in one test.
//
// Syntax: --name=value, --name value, --bool / --nobool / --bool=true|false; "--" ends flags.
//
// Thread-safety: not thread-safe; use from main().
#ifndef SHARDPS_COMMON_FLAGS_H_
#define SHARDPS_COMMON_FLAGS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace shardps {

class FlagParser {
 public:
  FlagParser(std::string program, std::string summary);

  void AddString(const std::string& name, std::string* target, const std::string& help);
  void AddInt(const std::string& name, int64_t* target, const std::string& help);
  void AddDouble(const std::string& name, double* target, const std::string& help);
  void AddBool(const std::string& name, bool* target, const std::string& help);

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
