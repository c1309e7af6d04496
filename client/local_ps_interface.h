// LocalPsInterface: PsInterface over a ShardStore in the same process, for tests of the
// client and of code above it without a network. Calls complete on the calling thread,
// except pulls that wait for a version, which complete on the thread of the update.
// Deadlines are not enforced (the store's own pull wait timeouts are), and
// HealthRequest.from_chief has no effect (the orphan clock is the ps daemon's, not the store's).
//
// Thread-safety: thread-safe; the store must outlive the interface.
#ifndef SHARDPS_CLIENT_LOCAL_PS_INTERFACE_H_
#define SHARDPS_CLIENT_LOCAL_PS_INTERFACE_H_

#include <memory>
#include <string>

#include "client/ps_interface.h"
#include "ps_server/shard_store.h"

namespace shardps {

std::unique_ptr<PsInterface> NewLocalPsInterface(const std::string& name, ShardStore* store);

}  // namespace shardps

#endif  // SHARDPS_CLIENT_LOCAL_PS_INTERFACE_H_
