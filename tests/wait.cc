#include "tests/wait.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace shardps {
namespace testing {

bool PollUntil(const std::function<bool()>& done, absl::Time deadline, absl::Duration interval) {
  while (true) {
    if (done()) return true;
    const absl::Time now = absl::Now();
    if (now >= deadline) return false;
    absl::SleepFor(std::min(interval, deadline - now));
  }
}

bool AcceptsConnections(const std::string& address) {
  const size_t colon = address.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port)) {
    return false;
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, address.substr(0, colon).c_str(), &addr.sin_addr) != 1) return false;
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

absl::Status WaitForPort(const std::string& address, absl::Time deadline,
                         const std::function<bool()>& keep_waiting) {
  bool gave_up = false;
  const bool open = PollUntil(
      [&] {
        if (AcceptsConnections(address)) return true;
        gave_up = keep_waiting != nullptr && !keep_waiting();
        return gave_up;
      },
      deadline, absl::Milliseconds(20));
  if (open && !gave_up) return absl::OkStatus();
  if (gave_up) {
    return absl::UnavailableError(
        absl::StrCat("nothing will listen on ", address, ": its process has exited"));
  }
  return absl::DeadlineExceededError(absl::StrCat(address, " accepts no connections"));
}

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool WaitForFileText(const std::string& path, absl::string_view text, absl::Time deadline) {
  return PollUntil([&] { return absl::StrContains(ReadWholeFile(path), text); }, deadline);
}

}  // namespace testing
}  // namespace shardps
