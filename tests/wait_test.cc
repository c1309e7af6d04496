// The waits: PollUntil's deadline and interval, a port found open or given up on, a file's
// text found.
#include "tests/wait.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace shardps {
namespace testing {
namespace {

// A socket listening on 127.0.0.1 at a port the kernel chose; closed by the destructor.
class Listener {
 public:
  Listener() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(listen(fd_, 8), 0);
    socklen_t len = sizeof(addr);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    address_ = absl::StrCat("127.0.0.1:", ntohs(addr.sin_port));
  }
  ~Listener() { close(fd_); }
  const std::string& address() const { return address_; }

 private:
  int fd_ = -1;
  std::string address_;
};

TEST(WaitTest, PollUntilReturnsOnceTheConditionHolds) {
  int calls = 0;
  EXPECT_TRUE(PollUntil([&] { return ++calls == 3; }, absl::InfiniteFuture(),
                        absl::Milliseconds(1)));
  EXPECT_EQ(calls, 3);
}

TEST(WaitTest, PollUntilGivesUpAtTheDeadlineAfterALastLook) {
  int calls = 0;
  const absl::Time start = absl::Now();
  EXPECT_FALSE(PollUntil([&] { return ++calls < 0; }, start + absl::Milliseconds(50),
                         absl::Milliseconds(20)));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(50));
  EXPECT_GE(calls, 3);  // at 0, 20, 40 and the deadline
  EXPECT_LE(calls, 6);
  int once = 0;
  EXPECT_FALSE(PollUntil([&] { return ++once < 0; }, absl::InfinitePast()));
  EXPECT_EQ(once, 1);
}

TEST(WaitTest, APortIsFoundOpenOrGivenUpOn) {
  std::string closed;
  {
    Listener gone;
    closed = gone.address();
  }
  Listener open;
  EXPECT_TRUE(AcceptsConnections(open.address()));
  EXPECT_FALSE(AcceptsConnections(closed));
  EXPECT_FALSE(AcceptsConnections("localhost:80"));  // names are not resolved
  EXPECT_TRUE(WaitForPort(open.address(), absl::Now() + absl::Seconds(10)).ok());

  const absl::Status expired = WaitForPort(closed, absl::Now() + absl::Milliseconds(50));
  EXPECT_EQ(expired.code(), absl::StatusCode::kDeadlineExceeded) << expired;
  EXPECT_NE(expired.message().find(closed), absl::string_view::npos);

  const absl::Status exited =
      WaitForPort(closed, absl::InfiniteFuture(), [] { return false; });
  EXPECT_EQ(exited.code(), absl::StatusCode::kUnavailable) << exited;
}

TEST(WaitTest, WaitForFileTextSeesTextWrittenMeanwhile) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string path = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/wait_test.log");
  std::ofstream(path) << "starting\n";
  std::thread writer([&] {
    absl::SleepFor(absl::Milliseconds(30));
    std::ofstream(path, std::ios::app) << "serving on 127.0.0.1:5\n";
  });
  EXPECT_TRUE(WaitForFileText(path, "serving on", absl::Now() + absl::Seconds(30)));
  writer.join();
  EXPECT_FALSE(WaitForFileText(path, "never written", absl::Now() + absl::Milliseconds(30)));
  EXPECT_EQ(ReadWholeFile(path), "starting\nserving on 127.0.0.1:5\n");
  EXPECT_EQ(ReadWholeFile(path + ".missing"), "");
}

}  // namespace
}  // namespace testing
}  // namespace shardps
