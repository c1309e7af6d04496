// Prints training-step throughput (examples/s) of the MLP's computes on an MLP
// 784-256-128-10 (Fashion-MNIST's shape) with random data.
//
//   mlp_bench [batch=256] [threads=0 (all)] [seconds=2]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "compute/cuda_device.h"
#include "model/mlp/mlp_cpu.h"
#include "model/mlp/mlp_cuda.h"

namespace shardps {
namespace {

void Bench(MlpCompute* compute, const MlpSpec& spec, int batch, double seconds) {
  std::mt19937 gen(1);
  std::uniform_real_distribution<float> uniform(-0.05f, 0.05f);
  std::vector<std::vector<float>> params, grads;
  std::vector<const float*> param_ptrs;
  std::vector<float*> grad_ptrs;
  for (const ParamInfo& info : Params(spec)) {
    params.emplace_back(info.num_elements());
    for (float& v : params.back()) v = uniform(gen);
    grads.emplace_back(info.num_elements());
  }
  for (size_t i = 0; i < params.size(); ++i) {
    param_ptrs.push_back(params[i].data());
    grad_ptrs.push_back(grads[i].data());
  }
  std::vector<float> features(int64_t{batch} * spec.input_dim);
  for (float& v : features) v = uniform(gen) + 0.5f;
  std::vector<int32_t> labels(batch);
  for (int i = 0; i < batch; ++i) labels[i] = i % spec.num_classes;

  StepResult result;
  auto step = [&] {
    const absl::Status s = compute->ForwardBackward(spec, param_ptrs, features.data(),
                                                    labels.data(), batch, &result, grad_ptrs);
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
      std::exit(1);
    }
  };
  for (int i = 0; i < 3; ++i) step();  // Warm up: caches, device buffers.
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  int64_t steps = 0;
  double elapsed = 0;
  while (elapsed < seconds) {
    step();
    ++steps;
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  }
  std::printf("%-40s batch %5d  %8.3f ms/step  %10.0f examples/s\n", compute->Name().c_str(),
              batch, 1e3 * elapsed / steps, steps * batch / elapsed);
}

}  // namespace
}  // namespace shardps

int main(int argc, char** argv) {
  const int batch = argc > 1 ? std::atoi(argv[1]) : 256;
  const int threads = argc > 2 ? std::atoi(argv[2]) : 0;
  const double seconds = argc > 3 ? std::atof(argv[3]) : 2.0;
  const shardps::MlpSpec spec{784, {256, 128}, 10};
  std::printf("model mlp:256,128 on 784 inputs, 10 classes\n");
  shardps::Bench(shardps::NewMlpCpuCompute(1).get(), spec, batch, seconds);
  std::unique_ptr<shardps::MlpCompute> cpu = shardps::NewMlpCpuCompute(threads);
  if (cpu->Name() != "cpu (Eigen, 1 thread)") shardps::Bench(cpu.get(), spec, batch, seconds);
  if (shardps::CudaDeviceCount() > 0) {
    absl::StatusOr<std::unique_ptr<shardps::MlpCompute>> gpu = shardps::NewMlpCudaCompute();
    if (!gpu.ok()) {
      std::fprintf(stderr, "%s\n", std::string(gpu.status().message()).c_str());
      return 1;
    }
    shardps::Bench(gpu->get(), spec, batch, seconds);
  } else {
    std::printf("no CUDA device: GPU not measured\n");
  }
  return 0;
}
