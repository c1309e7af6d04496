#include "client/layout_map.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

TEST(LayoutMapTest, PutGetForget) {
  LayoutMap map;
  const absl::Status missing = map.Get("a").status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.message(),
            "variable \"a\" is not known to this client (create it or Discover())");
  map.Put({MakeLayout("b", {2, 2}), MakeLayout("a", {3})});
  EXPECT_EQ(map.Names(), (std::vector<std::string>{"a", "b"}));
  ASSERT_TRUE(map.Get("a").ok());
  EXPECT_EQ(map.Get("a")->num_elements, 3);
  map.Put({MakeLayout("a", {5})});  // replaces
  EXPECT_EQ(map.Get("a")->num_elements, 5);

  DropShardsRequest drop;
  drop.add_variables("a");
  map.Forget(drop);
  EXPECT_EQ(map.Names(), std::vector<std::string>{"b"});
  drop.Clear();
  drop.set_all(true);
  map.Forget(drop);
  EXPECT_TRUE(map.Names().empty());
}

TEST(LayoutMapTest, GetDenseChecksTheSize) {
  LayoutMap map;
  map.Put({MakeLayout("m", {2, 2})});
  EXPECT_TRUE(map.GetDense("m", "pull", 4).ok());
  EXPECT_EQ(map.GetDense("m", "pull", 3).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(map.GetDense("x", "pull", 3).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace shardps
