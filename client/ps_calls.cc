#include "client/ps_calls.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "client/ps_call_error.h"

namespace shardps {
namespace {

// A DEADLINE_EXCEEDED that arrives this close to the call's deadline is the deadline's
// (gRPC's timer and absl::Now() read different clocks); one earlier is the ps's own answer.
constexpr absl::Duration kDeadlineSlack = absl::Milliseconds(5);

}  // namespace

void PsCalls::CallWithRetries(int ps, Addresses addresses, Issue issue, absl::Time deadline,
                              int max_attempts, StatusCallback done, int attempt) {
  PsInterface* target = ps_[ps].get();
  Issue again = issue;  // kept for a retry
  issue(target, deadline,
        [this, ps, addresses, issue = std::move(again), deadline, max_attempts,
         done = std::move(done), attempt](const absl::Status& s) mutable {
          if (s.code() == absl::StatusCode::kUnavailable && attempt < max_attempts) {
            absl::Duration backoff = options_.initial_backoff;
            for (int i = 1; i < attempt && backoff < options_.max_backoff; ++i) backoff *= 2;
            backoff = std::min(backoff, options_.max_backoff);
            absl::Time when = absl::Now() + backoff;
            if (when < deadline) {
              retries_.RunAt(
                  when, [this, ps, addresses, issue = std::move(issue), deadline, max_attempts,
                         done = std::move(done), attempt](bool cancelled) mutable {
                    if (cancelled) {
                      done(absl::CancelledError(
                          absl::StrCat(ps_[ps]->name(), ": client shut down during retry")));
                      return;
                    }
                    CallWithRetries(ps, addresses, std::move(issue), deadline, max_attempts,
                                    std::move(done), attempt + 1);
                  });
              return;
            }
          }
          PsCall call;
          call.ps_task = ps;
          call.ps_name = ps_[ps]->name();
          call.layout_shards = addresses == Addresses::kLayoutShards;
          call.deadline_passed = absl::Now() >= deadline - kDeadlineSlack;
          done(PsCallError(s, call));
        });
}

}  // namespace shardps
