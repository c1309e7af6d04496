#include "client/call_window.h"

#include <functional>
#include <memory>
#include <vector>

#include "gtest/gtest.h"

namespace shardps {
namespace {

// Calls that finish only when the test says so.
struct Pending {
  std::vector<int> started;
  std::vector<std::function<void()>> next;
  CallWindow::Call Make(int id) {
    return [this, id](std::function<void()> finish) {
      started.push_back(id);
      next.push_back(std::move(finish));
    };
  }
};

TEST(CallWindowTest, StartsAtMostTheWindowPerPsAndTheNextAsEachFinishes) {
  Pending pending;
  auto window = std::make_shared<CallWindow>(2, 2);
  for (int id : {10, 11, 12}) window->Add(0, pending.Make(id));
  window->Add(1, pending.Make(20));
  window->Start();
  EXPECT_EQ(pending.started, (std::vector<int>{10, 11, 20}));
  pending.next[1]();  // 11 finished: ps 0 starts 12
  EXPECT_EQ(pending.started, (std::vector<int>{10, 11, 20, 12}));
  for (size_t i = 0; i < pending.next.size(); ++i) {
    if (i != 1) pending.next[i]();
  }
  EXPECT_EQ(pending.started.size(), 4u);
}

TEST(CallWindowTest, ZeroStartsEverything) {
  Pending pending;
  auto window = std::make_shared<CallWindow>(1, 0);
  for (int id : {1, 2, 3}) window->Add(0, pending.Make(id));
  window->Start();
  EXPECT_EQ(pending.started, (std::vector<int>{1, 2, 3}));
}

TEST(CallWindowTest, CallsThatFinishAtOnceRunInOrder) {
  std::vector<int> ran;
  auto window = std::make_shared<CallWindow>(1, 1);
  for (int id : {1, 2, 3}) {
    window->Add(0, [&ran, id](std::function<void()> next) {
      ran.push_back(id);
      next();
    });
  }
  window->Start();
  EXPECT_EQ(ran, (std::vector<int>{1, 2, 3}));
}

TEST(CallWindowTest, ACallHoldsTheWindow) {
  std::function<void()> next;
  std::weak_ptr<CallWindow> weak;
  {
    auto window = std::make_shared<CallWindow>(1, 1);
    weak = window;
    window->Add(0, [&next](std::function<void()> finish) { next = std::move(finish); });
    window->Start();
  }
  EXPECT_FALSE(weak.expired());
  next();
  next = nullptr;
  EXPECT_TRUE(weak.expired());
}

}  // namespace
}  // namespace shardps
