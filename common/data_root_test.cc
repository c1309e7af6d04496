#include "common/data_root.h"

#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "common/test_files.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

class DataRootTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = FreshTestDir("data_root");
    ASSERT_EQ(::mkdir((base_ + "/root").c_str(), 0755), 0);
    ASSERT_EQ(::mkdir((base_ + "/root/ckpt").c_str(), 0755), 0);
    ASSERT_EQ(::mkdir((base_ + "/outside").c_str(), 0755), 0);
    // A symlink inside the root that leads out of it, and one that stays in.
    ASSERT_EQ(::symlink((base_ + "/outside").c_str(), (base_ + "/root/escape").c_str()), 0);
    ASSERT_EQ(::symlink((base_ + "/root/ckpt").c_str(), (base_ + "/root/latest").c_str()), 0);
    absl::StatusOr<DataRoot> root = DataRoot::Open(base_ + "/root", "data_root");
    ASSERT_TRUE(root.ok()) << root.status();
    root_ = *root;
  }
  std::string base_;
  DataRoot root_;
};

TEST_F(DataRootTest, PathsInsideTheRootPass) {
  EXPECT_EQ(*root_.Resolve(base_ + "/root/ckpt/part-0.safetensors", "snapshot"),
            root_.path() + "/ckpt/part-0.safetensors");
  // Not yet existing directories under the root, a relative path, a symlink that stays in.
  EXPECT_TRUE(root_.Resolve(base_ + "/root/new/dir/file", "snapshot").ok());
  EXPECT_EQ(*root_.Resolve("ckpt/manifest.json", "restore"), root_.path() + "/ckpt/manifest.json");
  EXPECT_EQ(*root_.Resolve(base_ + "/root/latest/m.json", "restore"),
            root_.path() + "/ckpt/m.json");
  EXPECT_TRUE(root_.Resolve(base_ + "/root", "dir").ok());
}

TEST_F(DataRootTest, PathTricksAreRefusedNamingThePath) {
  for (const std::string& bad :
       {std::string("/etc/passwd"), base_ + "/outside/x", base_ + "/root/../outside/x",
        base_ + "/root/ckpt/../../outside", std::string("../outside/x"),
        base_ + "/root/escape/x", base_ + "/root/escape/new/dir/file", base_ + "/rootx/file",
        std::string("/")}) {
    absl::StatusOr<std::string> r = root_.Resolve(bad, "snapshot 7's file");
    ASSERT_FALSE(r.ok()) << bad << " -> " << *r;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kPermissionDenied) << bad;
    EXPECT_NE(r.status().message().find(bad), absl::string_view::npos) << r.status();
    EXPECT_NE(r.status().message().find("snapshot 7's file"), absl::string_view::npos);
    EXPECT_NE(r.status().message().find("--data_root"), absl::string_view::npos);
  }
  EXPECT_EQ(root_.Resolve("", "restore").status().code(), absl::StatusCode::kInvalidArgument);
}

// A dataset root is for inputs read only: ResolveInput takes paths in it (and in the data
// root), Resolve (what is written) still refuses them; tricks are refused for both.
TEST_F(DataRootTest, DatasetRootsAreForInputsOnly) {
  ASSERT_EQ(::mkdir((base_ + "/datasets").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((base_ + "/datasets/mnist").c_str(), 0755), 0);
  ASSERT_TRUE(root_.AddDatasetRoots(base_ + "/datasets, " + base_ + "/missing", "dataset_roots",
                                    /*required=*/false)
                  .ok());
  ASSERT_EQ(root_.dataset_roots().size(), 1u);  // the missing default is skipped
  EXPECT_TRUE(root_.ResolveInput(base_ + "/datasets/mnist", "data_dir").ok());
  EXPECT_TRUE(root_.ResolveInput(base_ + "/root/ckpt", "data_dir").ok());
  EXPECT_TRUE(root_.ResolveInput("ckpt", "data_dir").ok());  // relative: to the data root
  EXPECT_EQ(root_.Resolve(base_ + "/datasets/mnist/x", "snapshot").status().code(),
            absl::StatusCode::kPermissionDenied);
  for (const std::string& bad : {std::string("/etc"), base_ + "/datasets/../outside",
                                 base_ + "/root/escape", base_ + "/datasetsx"}) {
    absl::StatusOr<std::string> r = root_.ResolveInput(bad, "job: \"data_dir\"");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kPermissionDenied) << bad;
    EXPECT_NE(r.status().message().find("--dataset_roots"), absl::string_view::npos);
  }
  // Given by the operator, a missing root or the whole file system is an error.
  EXPECT_EQ(root_.AddDatasetRoots(base_ + "/missing", "dataset_roots", true).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(root_.AddDatasetRoots("/", "dataset_roots", true).code(),
            absl::StatusCode::kInvalidArgument);
  // Unconfined, dataset roots change nothing.
  DataRoot open;
  ASSERT_TRUE(open.AddDatasetRoots(base_ + "/datasets", "dataset_roots", true).ok());
  EXPECT_TRUE(open.dataset_roots().empty());
  EXPECT_EQ(*open.ResolveInput("/etc", "x"), "/etc");
}

TEST_F(DataRootTest, UnconfinedLetsEverythingThroughAndABadRootIsAnError) {
  DataRoot open;
  EXPECT_FALSE(open.confined());
  EXPECT_EQ(*open.Resolve("/etc/passwd", "x"), "/etc/passwd");
  EXPECT_FALSE(DataRoot::Open(base_ + "/missing", "data_root").ok());
  EXPECT_NE(DataRoot::Open(base_ + "/missing", "data_root").status().message().find(
                "--data_root="),
            absl::string_view::npos);
  EXPECT_TRUE(DataRoot::Open("", "data_root")->path().empty());
}

}  // namespace
}  // namespace shardps
