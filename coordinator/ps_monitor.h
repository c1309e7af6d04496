// PsMonitor: the chief's view of every ps task, kept by probing each one (Health) on a thread
// of its own, so the chief tells a ps that is up from one that is unreachable (state
// intact as far as anyone knows: wait, no rollback) and from one that restarted (a new
// incarnation: its shards are gone, roll back). A step that fails on a ps error wakes it for
// an early probe (ProbeNow).
//
// A ps is "up" after a successful probe and "unreachable" once probes have failed for
// `unreachable_after` (a single lost probe on a loaded machine is not an outage). While a
// ps is unreachable the probes back off (interval doubling up to max_interval), so a long
// outage neither spins nor floods the log; state changes are logged, once each.
//
// Thread-safety: thread-safe. `on_change` runs on the monitor's thread, holding no lock of
// the monitor's, after every probe round that changed a ps's state, incarnation or
// generation.
#ifndef SHARDPS_COORDINATOR_PS_MONITOR_H_
#define SHARDPS_COORDINATOR_PS_MONITOR_H_

#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/ps_client.h"

namespace shardps {

class PsMonitor {
 public:
  struct Options {
    absl::Duration interval = absl::Seconds(1);
    absl::Duration probe_timeout = absl::Seconds(2);
    absl::Duration unreachable_after = absl::Seconds(3);
    absl::Duration max_interval = absl::Seconds(8);
  };
  struct PsView {
    bool probed = false;       // at least one probe answered
    bool up = false;
    uint64_t incarnation = 0;  // from the last answer
    int64_t generation = 0;
    int64_t bytes = 0;
    int64_t memory_available_bytes = 0;
    absl::Time last_up = absl::InfinitePast();
    absl::Time last_up_sent = absl::InfinitePast();  // when the probe last_up is of was sent
    absl::Time failing_since = absl::InfiniteFuture();  // first failed probe of a run of them
    std::string error;                                   // the last failure
  };

  // Starts probing at once. `ps` must outlive the monitor.
  PsMonitor(PsClient* ps, Options options, std::function<void()> on_change);
  ~PsMonitor();

  std::vector<PsView> Views() const;
  // Probes now (and again at the normal interval), instead of waiting for the next round.
  void ProbeNow();
  // The client's ps set changed (SwitchablePsClient::Switch, a scale): every view starts
  // over, one per ps of the client now, and a probe goes out now. A probe of the old set
  // still under way is not taken.
  void Reset();

 private:
  void Loop();

  PsClient* const ps_;
  const Options options_;
  const std::function<void()> on_change_;
  mutable absl::Mutex mu_;
  std::vector<PsView> views_ ABSL_GUARDED_BY(mu_);
  bool wake_ ABSL_GUARDED_BY(mu_) = false;
  int64_t epoch_ ABSL_GUARDED_BY(mu_) = 0;  // Resets so far
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: started after everything else is initialized
};

}  // namespace shardps

#endif  // SHARDPS_COORDINATOR_PS_MONITOR_H_
