// PsCalls: a PsClient's calls to its ps tasks. Each call retries UNAVAILABLE with exponential
// backoff (the same request, so the same request id) until Options::max_attempts or its
// deadline; its final error names the ps and carries a typed detail (client/ps_call_error.h).
// On top of that: one call to every ps at once (EachPs, AllPs), and an operation's parts sent
// through a CallWindow (IssueParts).
//
// Thread-safety: thread-safe. Destroying it fails the calls waiting out a backoff (CANCELLED,
// their `done` run before the destructor returns); calls in flight must have completed.
#ifndef SHARDPS_CLIENT_PS_CALLS_H_
#define SHARDPS_CLIENT_PS_CALLS_H_

#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/call_window.h"
#include "client/delay_queue.h"
#include "client/ps_client_types.h"
#include "client/ps_interface.h"
#include "common/fanout.h"
#include "common/status_macros.h"

namespace shardps {

class PsCalls {
 public:
  // What a call addresses, for the typed detail of its failure (client/ps_call_error.h):
  // the ps itself, or shards the layout places on it (NOT_FOUND then means it lost them).
  enum class Addresses { kPs, kLayoutShards };

  template <typename Req, typename Resp>
  using Method = void (PsInterface::*)(const Req*, Resp*, absl::Time, StatusCallback);

  // Issues one RPC to a ps task: issue(target, deadline, done).
  using Issue = std::function<void(PsInterface* target, absl::Time deadline, StatusCallback done)>;

  // An operation's parts, each with the ps it goes to.
  template <typename Part>
  using Parts = std::vector<std::pair<int, std::unique_ptr<Part>>>;

  // One PsInterface per ps task, in task-index order.
  PsCalls(std::vector<std::unique_ptr<PsInterface>> ps, const PsClientOptions& options)
      : ps_(std::move(ps)), options_(options) {}

  int num_ps() const { return static_cast<int>(ps_.size()); }
  const PsClientOptions& options() const { return options_; }
  // The deadline of a call started now: Options::rpc_timeout from now.
  absl::Time Deadline() const { return absl::Now() + options_.rpc_timeout; }

  // Issues one RPC to ps `ps`, retrying UNAVAILABLE (see the header comment).
  void CallWithRetries(int ps, Addresses addresses, Issue issue, absl::Time deadline,
                       int max_attempts, StatusCallback done, int attempt = 1);

  // CallWithRetries of `method`, with Options::max_attempts.
  template <typename Req, typename Resp>
  void Call(int ps, Addresses addresses, Method<Req, Resp> method, const Req* request,
            Resp* response, absl::Time deadline, StatusCallback done) {
    CallWithRetries(
        ps, addresses,
        [method, request, response](PsInterface* target, absl::Time deadline, StatusCallback done) {
          (target->*method)(request, response, deadline, std::move(done));
        },
        deadline, options_.max_attempts, std::move(done));
  }

  // Calls `method` on every ps at once, requests[k] to ps k, each call with its own deadline
  // `timeout` from now, and waits for all: (*statuses)[k] and (*responses)[k] are ps k's.
  template <typename Req, typename Resp>
  void EachPs(Method<Req, Resp> method, const std::vector<Req>& requests,
              std::vector<Resp>* responses, absl::Duration timeout, int max_attempts,
              std::vector<absl::Status>* statuses) {
    responses->assign(ps_.size(), Resp());
    statuses->assign(ps_.size(), absl::OkStatus());
    absl::Notification done;
    auto fan = Fanout::Make(ps_.size(), [&done](const absl::Status&) { done.Notify(); });
    const absl::Time deadline = absl::Now() + timeout;
    for (int p = 0; p < num_ps(); ++p) {
      CallWithRetries(
          p, Addresses::kPs,
          [method, request = &requests[p], response = &(*responses)[p]](
              PsInterface* target, absl::Time deadline, StatusCallback done) {
            (target->*method)(request, response, deadline, std::move(done));
          },
          deadline, max_attempts,
          [fan, status = &(*statuses)[p]](const absl::Status& s) {
            *status = s;  // each ps its own element; the fan orders it before the wait ends
            fan->Finish(s);
          });
    }
    done.WaitForNotification();
  }

  // EachPs with Options::max_attempts, answering OK or the failure of the lowest task.
  template <typename Req, typename Resp>
  absl::Status AllPs(Method<Req, Resp> method, const std::vector<Req>& requests,
                     std::vector<Resp>* responses, absl::Duration timeout) {
    std::vector<absl::Status> statuses;
    EachPs(method, requests, responses, timeout, options_.max_attempts, &statuses);
    for (const absl::Status& s : statuses) RETURN_IF_ERROR(s);
    return absl::OkStatus();
  }

  // Sends every part to its ps (with retries; they address layout shards), at most `window`
  // of them to a ps at once (0: all). When a part's call is back,
  // complete(part, status) gives the part's final status (it may check or copy out the
  // reply, and release buffers); then the part is freed and `fan` told.
  template <typename Part>
  void IssueParts(Parts<Part> parts, int window_size, absl::Time deadline,
                  std::function<void(PsInterface*, Part*, absl::Time, StatusCallback)> issue,
                  std::function<absl::Status(Part*, const absl::Status&)> complete,
                  std::shared_ptr<Fanout> fan) {
    auto window = std::make_shared<CallWindow>(num_ps(), window_size);
    for (auto& [ps, owned] : parts) {
      Part* part = owned.release();
      window->Add(
          ps, [this, ps = ps, part, deadline, issue, complete, fan](std::function<void()> next) {
            CallWithRetries(
                ps, Addresses::kLayoutShards,
                [issue, part](PsInterface* target, absl::Time deadline, StatusCallback done) {
                  issue(target, part, deadline, std::move(done));
                },
                deadline, options_.max_attempts,
                [part, complete, fan, next = std::move(next)](const absl::Status& s) {
                  next();
                  absl::Status status = complete(part, s);
                  delete part;
                  fan->Finish(status);
                });
          });
    }
    window->Start();
  }

  // Runs fn(false) after `delay` on the retry thread, or fn(true) when the client is
  // destroyed first.
  void RunAfter(absl::Duration delay, std::function<void(bool cancelled)> fn) {
    retries_.RunAt(absl::Now() + delay, std::move(fn));
  }

 private:
  const std::vector<std::unique_ptr<PsInterface>> ps_;
  const PsClientOptions options_;
  DelayQueue retries_;  // last: destroyed first, flushing pending retries
};

}  // namespace shardps

#endif  // SHARDPS_CLIENT_PS_CALLS_H_
