#include "rpc/access.h"

#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace shardps {
namespace {

constexpr Role kAdmin = Role::kAdmin;
constexpr Role kChief = Role::kChief;
constexpr Role kWorker = Role::kWorker;
constexpr Role kEvaluator = Role::kEvaluator;
constexpr Role kReader = Role::kReader;

// Whoever may read: parameters, layouts, health, status. Not the ps (it calls nothing).
constexpr RoleSet kReaders{kAdmin, kChief, kWorker, kEvaluator, kReader};
// Whoever may change parameters by pushing gradients (the chief too: a script that creates
// its variables with the chief's identity may also train them).
constexpr RoleSet kPushers{kWorker, kChief};

constexpr char kCoordinator[] = "shardps.CoordinatorService";
constexpr char kPs[] = "shardps.PsService";
constexpr char kWorkerService[] = "shardps.WorkerService";

const std::vector<MethodAccess>& Table() {
  static const auto* const table = new std::vector<MethodAccess>{
      // The chief: job control is the admin's; the evaluator reports.
      {kCoordinator, "SubmitJob", {kAdmin}, true},
      {kCoordinator, "GetStatus", kReaders, false},
      {kCoordinator, "AddSteps", {kAdmin}, true},
      {kCoordinator, "CancelJob", {kAdmin}, true},
      {kCoordinator, "ReportEval", {kEvaluator}, false},
      {kCoordinator, "Checkpoint", {kAdmin}, true},
      // Elastic workers announce themselves and leave.
      {kCoordinator, "JoinJob", {kWorker}, false},
      {kCoordinator, "LeaveJob", {kWorker}, true},
      // Moving the job onto another number of ps is the admin's, like the job itself.
      {kCoordinator, "ScalePs", {kAdmin}, true},
      {kCoordinator, "MoveTableBuckets", {kAdmin}, true},
      // The ps: reads for every reader, pushes for workers, administration for the chief.
      {kPs, "CreateShards", {kChief}, false},
      {kPs, "ListShards", kReaders, false},
      {kPs, "Pull", kReaders, false},
      {kPs, "Push", kPushers, false},
      {kPs, "PullBatch", kReaders, false},
      {kPs, "PushBatch", kPushers, false},
      {kPs, "PullRows", kReaders, false},
      {kPs, "PushRows", kPushers, false},
      {kPs, "PullRowsBatch", kReaders, false},
      {kPs, "PushRowsBatch", kPushers, false},
      {kPs, "Assign", {kChief}, false},
      {kPs, "Health", kReaders, false},
      {kPs, "Shutdown", {kChief}, true},
      {kPs, "SetGeneration", {kChief}, false},
      {kPs, "DropShards", {kChief}, true},
      {kPs, "Snapshot", {kChief}, false},
      {kPs, "SnapshotStatus", {kChief}, false},
      {kPs, "Restore", {kChief}, true},
      {kPs, "HoldPushes", {kChief}, false},
      {kPs, "MoveBuckets", {kChief}, true},
      // A worker: the chief drives it; status for operators.
      {kWorkerService, "StartJob", {kChief}, false},
      {kWorkerService, "RunStep", {kChief}, false},
      {kWorkerService, "Status", {kChief, kAdmin, kReader}, false},
      {kWorkerService, "Shutdown", {kChief}, true},
  };
  return *table;
}

}  // namespace

absl::string_view RoleName(Role role) {
  switch (role) {
    case Role::kAdmin: return "admin";
    case Role::kChief: return "chief";
    case Role::kPs: return "ps";
    case Role::kWorker: return "worker";
    case Role::kEvaluator: return "evaluator";
    case Role::kReader: return "reader";
  }
  return "?";
}

std::optional<Role> ParseRole(absl::string_view name) {
  for (int i = 0; i < kNumRoles; ++i) {
    if (RoleName(static_cast<Role>(i)) == name) return static_cast<Role>(i);
  }
  return std::nullopt;
}

std::string RoleSet::ToString() const {
  std::string out;
  for (int i = 0; i < kNumRoles; ++i) {
    if (Contains(static_cast<Role>(i))) {
      absl::StrAppend(&out, out.empty() ? "" : ", ", RoleName(static_cast<Role>(i)));
    }
  }
  return out.empty() ? "nobody" : out;
}

const MethodAccess* FindMethodAccess(absl::string_view service, absl::string_view method) {
  static const auto* const index = [] {
    // Keys view the table's own static strings: a lookup allocates nothing.
    auto* map = new absl::flat_hash_map<std::pair<absl::string_view, absl::string_view>,
                                        const MethodAccess*>();
    for (const MethodAccess& row : Table()) (*map)[{row.service, row.method}] = &row;
    return map;
  }();
  auto it = index->find(std::make_pair(service, method));
  return it == index->end() ? nullptr : it->second;
}

const std::vector<MethodAccess>& AccessTable() { return Table(); }

}  // namespace shardps
