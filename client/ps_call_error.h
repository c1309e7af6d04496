// What a failed call to one ps task tells the caller, as a status it can act on by code and
// typed detail (common/error_detail.h): PsClient passes every call's final status (after its
// retries) through PsCallError, so that the chief, reading a step's error relayed by a
// worker, can tell a ps that is down from one that restarted and lost its shards, and which
// ps it was.
//
// Thread-safety: a pure function.
#ifndef SHARDPS_CLIENT_PS_CALL_ERROR_H_
#define SHARDPS_CLIENT_PS_CALL_ERROR_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace shardps {

struct PsCall {
  int ps_task = -1;           // index of the ps task called
  absl::string_view ps_name;  // "ps:1 (host:2223)"
  // The call addressed shards that the client's layout places on this ps (a data call:
  // pull, push, rows, assign), so NOT_FOUND means the ps no longer holds them.
  bool layout_shards = false;
  // The call's own deadline had passed when it failed: a DEADLINE_EXCEEDED is then the
  // transport's (the ps did not answer in time), not the ps's own answer (a pull's version
  // wait that ran out).
  bool deadline_passed = false;
};

// OK stays OK. Otherwise the status is prefixed with the ps's name, keeps its code and
// payloads, and, unless it carries an ErrorDetail already (one the ps attached), gains one:
//   UNAVAILABLE, or DEADLINE_EXCEEDED with deadline_passed: PS_UNAVAILABLE;
//   NOT_FOUND with layout_shards:                           PS_STATE_LOST;
// each with ps_task set.
absl::Status PsCallError(const absl::Status& status, const PsCall& call);

}  // namespace shardps

#endif  // SHARDPS_CLIENT_PS_CALL_ERROR_H_
