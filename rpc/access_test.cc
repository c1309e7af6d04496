// The roles table: every method of every shardps service has exactly one row, and
// docs/security.md prints the same table.
#include "rpc/access.h"

#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/test_files.h"
#include "google/protobuf/descriptor.h"
#include "gtest/gtest.h"
#include "proto/coordinator.grpc.pb.h"
#include "proto/ps.grpc.pb.h"
#include "proto/worker.grpc.pb.h"

namespace shardps {
namespace {

const char* const kServices[] = {"shardps.CoordinatorService", "shardps.PsService",
                                 "shardps.WorkerService"};

TEST(AccessTest, EveryMethodOfEveryServiceHasOneRow) {
  // Linking the generated code registers the descriptors.
  (void)CoordinatorService::service_full_name();
  (void)PsService::service_full_name();
  (void)WorkerService::service_full_name();
  std::set<std::string> methods;
  for (const char* name : kServices) {
    const google::protobuf::ServiceDescriptor* service =
        google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(name);
    ASSERT_NE(service, nullptr) << name;
    for (int i = 0; i < service->method_count(); ++i) {
      const std::string method = service->method(i)->name();
      methods.insert(absl::StrCat(name, "/", method));
      EXPECT_NE(FindMethodAccess(name, method), nullptr)
          << name << "." << method << " has no row in rpc/access.cc: nobody may call it";
    }
  }
  std::set<std::string> rows;
  for (const MethodAccess& row : AccessTable()) {
    const std::string key = absl::StrCat(row.service, "/", row.method);
    EXPECT_TRUE(rows.insert(key).second) << key << " has two rows";
    EXPECT_TRUE(methods.count(key)) << key << " is no method of its service";
  }
  EXPECT_EQ(rows.size(), methods.size());
}

TEST(AccessTest, TheTableSaysWhatTheIssueAsks) {
  auto allowed = [](const char* service, const char* method, Role role) {
    const MethodAccess* row = FindMethodAccess(service, method);
    return row != nullptr && row->roles.Contains(role);
  };
  // A worker pulls and pushes; it cannot administer the ps or control the job.
  EXPECT_TRUE(allowed("shardps.PsService", "Push", Role::kWorker));
  EXPECT_TRUE(allowed("shardps.PsService", "PullRows", Role::kWorker));
  EXPECT_FALSE(allowed("shardps.PsService", "Shutdown", Role::kWorker));
  EXPECT_FALSE(allowed("shardps.PsService", "CreateShards", Role::kWorker));
  EXPECT_FALSE(allowed("shardps.CoordinatorService", "CancelJob", Role::kWorker));
  // A reader reads only.
  EXPECT_TRUE(allowed("shardps.PsService", "Pull", Role::kReader));
  EXPECT_TRUE(allowed("shardps.CoordinatorService", "GetStatus", Role::kReader));
  EXPECT_FALSE(allowed("shardps.PsService", "Push", Role::kReader));
  EXPECT_FALSE(allowed("shardps.CoordinatorService", "ReportEval", Role::kReader));
  // The admin controls the job but not the ps directly; the chief administers the ps.
  EXPECT_TRUE(allowed("shardps.CoordinatorService", "SubmitJob", Role::kAdmin));
  EXPECT_FALSE(allowed("shardps.PsService", "Restore", Role::kAdmin));
  EXPECT_TRUE(allowed("shardps.PsService", "Restore", Role::kChief));
  EXPECT_FALSE(allowed("shardps.CoordinatorService", "SubmitJob", Role::kChief));
  // The ps calls nothing.
  for (const MethodAccess& row : AccessTable()) {
    EXPECT_FALSE(row.roles.Contains(Role::kPs)) << row.service << "." << row.method;
  }
  EXPECT_TRUE(FindMethodAccess("shardps.CoordinatorService", "SubmitJob")->audited);
  EXPECT_TRUE(FindMethodAccess("shardps.PsService", "Shutdown")->audited);
  EXPECT_FALSE(FindMethodAccess("shardps.PsService", "Push")->audited);
  EXPECT_EQ(FindMethodAccess("shardps.PsService", "NoSuchMethod"), nullptr);
}

TEST(AccessTest, RolesRoundTrip) {
  for (int i = 0; i < kNumRoles; ++i) {
    const Role role = static_cast<Role>(i);
    EXPECT_EQ(ParseRole(RoleName(role)), role);
  }
  EXPECT_EQ(ParseRole("root"), std::nullopt);
  EXPECT_EQ(ParseRole("Admin"), std::nullopt);
  EXPECT_EQ(RoleSet().ToString(), "nobody");
  EXPECT_EQ((RoleSet{Role::kWorker, Role::kAdmin}).ToString(), "admin, worker");
}

// docs/security.md's table: "| Service | Method | roles | audited |" rows.
TEST(AccessTest, TheDocsPrintTheSameTable) {
  const std::string path = absl::StrCat(std::getenv("TEST_SRCDIR"), "/shardps/docs/security.md");
  const std::string text = ReadFileBytes(path);
  ASSERT_FALSE(text.empty()) << path;
  std::set<std::string> documented;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    std::vector<std::string> cells = absl::StrSplit(line, '|');
    if (cells.size() != 6) continue;
    for (std::string& cell : cells) {
      cell = std::string(absl::StripAsciiWhitespace(cell));
      absl::StrReplaceAll({{"`", ""}}, &cell);
    }
    const std::string service = absl::StrCat("shardps.", cells[1]);
    const MethodAccess* row = FindMethodAccess(service, cells[2]);
    if (cells[1].find("Service") == std::string::npos) continue;  // the header, other tables
    ASSERT_NE(row, nullptr) << "docs/security.md documents " << cells[1] << "." << cells[2]
                            << ", which rpc/access.cc has no row for";
    EXPECT_EQ(cells[3], row->roles.ToString()) << cells[1] << "." << cells[2];
    EXPECT_EQ(cells[4], row->audited ? "yes" : "") << cells[1] << "." << cells[2];
    documented.insert(absl::StrCat(service, "/", cells[2]));
  }
  for (const MethodAccess& row : AccessTable()) {
    EXPECT_TRUE(documented.count(absl::StrCat(row.service, "/", row.method)))
        << row.service << "." << row.method << " is missing from docs/security.md's table";
  }
}

}  // namespace
}  // namespace shardps
