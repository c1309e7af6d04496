// Interoperability with the reference safetensors implementation (the `safetensors` Python
// package with numpy): a file written by WriteSafetensors loads there with the right dtypes,
// shapes, values and metadata, and a file written there opens and reads here.
//
// Needs the virtualenv of deploy/python_env.sh, named by SHARDPS_VENV:
//   bazel test //checkpoint:safetensors_python_test
//       --test_env=SHARDPS_VENV=$(deploy/python_env.sh)
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "checkpoint/safetensors.h"
#include "common/test_files.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

template <typename T>
TensorToWrite Tensor(const std::string& name, const std::string& dtype,
                     std::vector<int64_t> shape, std::vector<T> values) {
  auto owned = std::make_shared<std::vector<T>>(std::move(values));
  TensorToWrite t;
  t.name = name;
  t.dtype = dtype;
  t.shape = std::move(shape);
  if (!owned->empty()) {
    t.pieces.emplace_back(reinterpret_cast<const char*>(owned->data()), owned->size() * sizeof(T));
  }
  t.holds.push_back(owned);
  return t;
}

// Runs `command` through the shell; its exit status, and its output in `output`.
int RunShell(const std::string& command, std::string* output) {
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return -1;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) output->append(buf, n);
  const int status = ::pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

template <typename T>
std::vector<T> Read(const SafetensorsFile& file, const TensorInfo& t) {
  std::vector<T> out(static_cast<size_t>(t.data_end() - t.data_begin()) / sizeof(T));
  EXPECT_TRUE(file.ReadRange(t, 0, t.data_end() - t.data_begin(),
                             reinterpret_cast<char*>(out.data()))
                  .ok());
  return out;
}

TEST(SafetensorsPythonTest, ReferenceImplementationReadsAndWritesOurFormat) {
  const char* venv = std::getenv("SHARDPS_VENV");
  const std::string python = venv == nullptr ? "" : std::string(venv) + "/bin/python";
  if (venv == nullptr || *venv == '\0' || ::access(python.c_str(), X_OK) != 0) {
    GTEST_SKIP() << "\n*** SKIPPED: no Python virtualenv with the safetensors package: "
                 << (venv == nullptr || *venv == '\0'
                         ? std::string("SHARDPS_VENV is not set")
                         : "SHARDPS_VENV=" + std::string(venv) + " has no bin/python")
                 << ". The interoperability with the reference safetensors implementation is "
                    "NOT checked. Run:\n***   bazel test //checkpoint:safetensors_python_test "
                    "--test_env=SHARDPS_VENV=$(deploy/python_env.sh)\n";
  }
  const std::string dir = MakeTestDir("pyinterop");
  const std::string ours = dir + "/from_shardps.safetensors";
  const std::string theirs = dir + "/from_python.safetensors";

  std::vector<float> kernel(12);
  for (int i = 0; i < 12; ++i) kernel[i] = i * 0.5f - 1.0f;
  std::vector<TensorToWrite> tensors;
  tensors.push_back(Tensor<float>("dense/kernel", "F32", {3, 4}, kernel));
  tensors.push_back(Tensor<double>("dense/bias", "F64", {2}, {1.0 / 3.0, -2.5e-300}));
  tensors.push_back(Tensor<int64_t>("global_step", "I64", {}, {1234567890123}));
  tensors.push_back(Tensor<float>("empty", "F32", {0, 5}, {}));
  tensors.push_back(Tensor<uint8_t>("mask", "BOOL", {3}, {1, 0, 1}));
  tensors.push_back(Tensor<uint16_t>("half", "F16", {2}, {0x3E00, 0xB400}));  // 1.5, -0.25
  tensors.push_back(Tensor<int32_t>("ids", "I32", {2, 2}, {1, -2, 3, -4}));
  tensors.push_back(Tensor<uint8_t>("bytes", "U8", {4}, {0, 1, 254, 255}));
  SafetensorsWriteOptions options;
  options.metadata = {{"job_id", "interop-1"}, {"note", "written by shardps"}};
  absl::StatusOr<DataFileInfo> info = WriteSafetensors(ours, std::move(tensors), options);
  ASSERT_TRUE(info.ok()) << info.status();

  std::string output;
  const int rc = RunShell(absl::StrCat(python, " checkpoint/testdata/check_safetensors.py ", ours, " ",
                                  theirs),
                     &output);
  ASSERT_EQ(rc, 0) << output;
  std::cout << output;

  absl::StatusOr<std::unique_ptr<SafetensorsFile>> file = SafetensorsFile::Open(theirs);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->metadata(), (std::map<std::string, std::string>{{"writer", "python"}}));
  ASSERT_EQ((*file)->tensors().size(), 4u);
  const TensorInfo* matrix = (*file)->Find("py/matrix");
  ASSERT_NE(matrix, nullptr);
  EXPECT_EQ(matrix->dtype(), "F32");
  EXPECT_EQ(std::vector<int64_t>(matrix->shape().begin(), matrix->shape().end()),
            (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(Read<float>(**file, *matrix),
            (std::vector<float>{0.0f, 0.25f, 0.5f, 0.75f, 1.0f, 1.25f}));
  const TensorInfo* scalar = (*file)->Find("py/scalar");
  ASSERT_NE(scalar, nullptr);
  EXPECT_EQ(scalar->dtype(), "I64");
  EXPECT_EQ(scalar->shape_size(), 0);
  EXPECT_EQ(Read<int64_t>(**file, *scalar), (std::vector<int64_t>{-7}));
  const TensorInfo* doubles = (*file)->Find("py/doubles");
  ASSERT_NE(doubles, nullptr);
  const std::vector<double> d = Read<double>(**file, *doubles);
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0], M_PI);
  EXPECT_TRUE(std::signbit(d[1]) && d[1] == 0.0);
  EXPECT_EQ(d[2], 1e308);
  const TensorInfo* empty = (*file)->Find("py/empty");
  ASSERT_NE(empty, nullptr);
  EXPECT_EQ(empty->data_end(), empty->data_begin());
  EXPECT_EQ(std::vector<int64_t>(empty->shape().begin(), empty->shape().end()),
            (std::vector<int64_t>{2, 0}));
}

}  // namespace
}  // namespace shardps
