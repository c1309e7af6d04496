#include "client/buffer_pool.h"

#include <string>

#include "gtest/gtest.h"

namespace shardps {
namespace {

TEST(BufferPoolTest, KeepsLargeBuffersForReuse) {
  BufferPool pool;
  EXPECT_EQ(pool.Get().capacity(), std::string().capacity());  // nothing kept yet
  std::string big(BufferPool::kMinBytes, 'x');
  const char* data = big.data();
  pool.Put(std::move(big));
  std::string again = pool.Get();
  EXPECT_EQ(again.data(), data);  // the same allocation
  EXPECT_GE(again.capacity(), BufferPool::kMinBytes);
  EXPECT_EQ(pool.Get().capacity(), std::string().capacity());  // taken
}

TEST(BufferPoolTest, DropsSmallBuffersAndKeepsWithinItsBound) {
  BufferPool pool;
  pool.Put(std::string(BufferPool::kMinBytes - 1, 'x'));
  EXPECT_LT(pool.Get().capacity(), BufferPool::kMinBytes);
  const size_t each = BufferPool::kMaxBytes / 2;
  for (int i = 0; i < 3; ++i) {
    std::string buffer;
    buffer.reserve(each);  // capacity without touching the pages
    ASSERT_EQ(buffer.capacity(), each);
    pool.Put(std::move(buffer));
  }
  int kept = 0;
  while (pool.Get().capacity() >= each) ++kept;
  EXPECT_EQ(kept, 2);  // the third would pass kMaxBytes
}

}  // namespace
}  // namespace shardps
