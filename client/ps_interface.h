// PsInterface: a transport-neutral, asynchronous interface to ONE ps task (in the manner of
// TensorFlow's WorkerInterface). PsClient talks to every ps through it; GrpcPsInterface is
// the network implementation and LocalPsInterface calls a ShardStore in-process for tests.
//
// Each *Async call returns at once and later calls `done` exactly once, on some thread, after
// the response is filled in. The request and response must outlive that call. `deadline` is
// absolute: the call fails with DEADLINE_EXCEEDED past it.
//
// Thread-safety: implementations are thread-safe; calls may be issued concurrently.
#ifndef SHARDPS_CLIENT_PS_INTERFACE_H_
#define SHARDPS_CLIENT_PS_INTERFACE_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "proto/ps.pb.h"

namespace shardps {

using StatusCallback = std::function<void(const absl::Status&)>;

class PsInterface {
 public:
  virtual ~PsInterface() = default;

  // A name for messages: "ps:1 (localhost:2223)".
  virtual const std::string& name() const = 0;

  virtual void CreateShardsAsync(const CreateShardsRequest* request,
                                 CreateShardsResponse* response, absl::Time deadline,
                                 StatusCallback done) = 0;
  virtual void ListShardsAsync(const ListShardsRequest* request, ListShardsResponse* response,
                               absl::Time deadline, StatusCallback done) = 0;
  virtual void PullAsync(const PullRequest* request, PullResponse* response,
                         absl::Time deadline, StatusCallback done) = 0;
  virtual void PushAsync(const PushRequest* request, PushResponse* response,
                         absl::Time deadline, StatusCallback done) = 0;
  virtual void PullRowsAsync(const PullRowsRequest* request, PullRowsResponse* response,
                             absl::Time deadline, StatusCallback done) = 0;
  virtual void PushRowsAsync(const PushRowsRequest* request, PushRowsResponse* response,
                             absl::Time deadline, StatusCallback done) = 0;
  virtual void AssignAsync(const AssignRequest* request, AssignResponse* response,
                           absl::Time deadline, StatusCallback done) = 0;
  virtual void HealthAsync(const HealthRequest* request, HealthResponse* response,
                           absl::Time deadline, StatusCallback done) = 0;
  virtual void ShutdownAsync(const ShutdownRequest* request, ShutdownResponse* response,
                             absl::Time deadline, StatusCallback done) = 0;
};

}  // namespace shardps

#endif  // SHARDPS_CLIENT_PS_INTERFACE_H_
