#include "common/process_tuning.h"

#include <sys/resource.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"

namespace shardps {
namespace {

long MinorFaults() {
  rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// The pattern of a bulk transfer: blocks of a few MiB allocated, written and freed, over and
// over. Once tuned, the second round onwards reuses memory that is already faulted in.
TEST(MallocTuningTest, RepeatedLargeBlocksAreReusedWithoutPageFaults) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "built with AddressSanitizer, whose allocator takes no mallopt tuning";
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  GTEST_SKIP() << "built with AddressSanitizer, whose allocator takes no mallopt tuning";
#endif
#endif
  ASSERT_TRUE(TuneMallocForBulkTransfers());
  const std::vector<size_t> sizes = {4 << 20, 1 << 20, 8 << 20, 3 << 20, 16 << 20};
  auto round = [&] {
    std::vector<char*> blocks;
    for (size_t size : sizes) {
      char* p = static_cast<char*>(std::malloc(size));
      ASSERT_NE(p, nullptr);
      std::memset(p, 1, size);
      blocks.push_back(p);
    }
    for (char* p : blocks) std::free(p);
  };
  round();  // the first round faults its pages in
  const long before = MinorFaults();
  for (int i = 0; i < 10; ++i) round();
  const long faults = MinorFaults() - before;
  // Untuned, every round maps and zeroes 32 MiB again: about 8 000 faults per round.
  EXPECT_LT(faults, 1000) << "freed blocks were returned to the kernel";
}

}  // namespace
}  // namespace shardps
