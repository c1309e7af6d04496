// Who may call what: the roles of shardps's callers and the one table of every RPC and the
// roles allowed to make it (docs/security.md prints the same table; access_test checks that
// every method of every shardps service is in it, so a call added later without a row fails
// the build's tests rather than being open to all).
//
//   admin      an operator: shardctl, the submit job. Job control on the chief, reads.
//   chief      administers the ps (create, snapshot, restore, generations, shutdown) and the
//              workers (start, steps, shutdown); reads.
//   ps         a parameter server. It calls nothing; its certificate names it for the record.
//   worker     pulls and pushes; reads the job's status.
//   evaluator  pulls, reads the job's status, reports evaluations.
//   reader     read-only: pulls, lists, health, the job's and the workers' status.
//
// Where a caller's role comes from (a client certificate's URI SAN spiffe://shardps/<role>
// or spiffe://shardps/<role>/<index>, or a bearer token) is rpc/auth.h's business; this file
// has no gRPC in it.
//
// Thread-safety: everything here is immutable after static initialization.
#ifndef SHARDPS_RPC_ACCESS_H_
#define SHARDPS_RPC_ACCESS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace shardps {

enum class Role : uint8_t { kAdmin = 0, kChief, kPs, kWorker, kEvaluator, kReader };
inline constexpr int kNumRoles = 6;

// "admin", "chief", ...
absl::string_view RoleName(Role role);
// The role of a name as RoleName writes it; nullopt for any other text.
std::optional<Role> ParseRole(absl::string_view name);

// A set of roles, as a bit mask.
class RoleSet {
 public:
  constexpr RoleSet() = default;
  constexpr RoleSet(std::initializer_list<Role> roles) {
    for (Role r : roles) bits_ |= Bit(r);
  }
  constexpr bool Contains(Role role) const { return (bits_ & Bit(role)) != 0; }
  constexpr RoleSet operator|(RoleSet other) const { return RoleSet(bits_ | other.bits_); }
  // "chief, worker" in the enum's order; "nobody" when empty.
  std::string ToString() const;

 private:
  constexpr explicit RoleSet(uint32_t bits) : bits_(bits) {}
  static constexpr uint32_t Bit(Role role) { return uint32_t{1} << static_cast<int>(role); }
  uint32_t bits_ = 0;
};

// One RPC's row of the table.
struct MethodAccess {
  absl::string_view service;  // full name: "shardps.PsService"
  absl::string_view method;   // "Push"
  RoleSet roles;              // who may call it
  // An administrative action (it ends, starts or destroys something: shutdown, cancel, a
  // submit that may wipe a job's checkpoints): every call is logged with its caller.
  bool audited;
};

// The row of service/method; nullptr when the table has none (the gate then refuses the
// call: a method without a row is open to nobody).
const MethodAccess* FindMethodAccess(absl::string_view service, absl::string_view method);

// Every row, in the table's order (the docs' table and the tests).
const std::vector<MethodAccess>& AccessTable();

}  // namespace shardps

#endif  // SHARDPS_RPC_ACCESS_H_
