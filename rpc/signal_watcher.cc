#include "rpc/signal_watcher.h"

#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace shardps {
namespace {

sigset_t TerminationSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

}  // namespace

void SignalWatcher::BlockTerminationSignals() {
  const sigset_t set = TerminationSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

absl::StatusOr<std::unique_ptr<SignalWatcher>> SignalWatcher::Start(
    std::function<void(int)> on_signal) {
  const sigset_t set = TerminationSignals();
  const int signal_fd = signalfd(-1, &set, SFD_CLOEXEC);
  if (signal_fd < 0) {
    return absl::InternalError(absl::StrCat("signalfd: ", std::strerror(errno)));
  }
  const int wake_fd = eventfd(0, EFD_CLOEXEC);
  if (wake_fd < 0) {
    const int error = errno;
    close(signal_fd);
    return absl::InternalError(absl::StrCat("eventfd: ", std::strerror(error)));
  }
  return std::unique_ptr<SignalWatcher>(
      new SignalWatcher(signal_fd, wake_fd, std::move(on_signal)));
}

SignalWatcher::SignalWatcher(int signal_fd, int wake_fd, std::function<void(int)> on_signal)
    : signal_fd_(signal_fd),
      wake_fd_(wake_fd),
      on_signal_(std::move(on_signal)),
      thread_([this] { Loop(); }) {}

SignalWatcher::~SignalWatcher() {
  const uint64_t one = 1;
  while (write(wake_fd_, &one, sizeof(one)) < 0 && errno == EINTR) {
  }
  thread_.join();
  close(wake_fd_);
  close(signal_fd_);
}

void SignalWatcher::Loop() {
  while (true) {
    pollfd fds[2] = {{signal_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;  // cannot wait: the daemon still stops on request or by the orphan watch
    }
    if (fds[1].revents != 0) return;
    if (fds[0].revents == 0) continue;
    signalfd_siginfo info;
    const ssize_t n = read(signal_fd_, &info, sizeof(info));
    if (n == static_cast<ssize_t>(sizeof(info))) on_signal_(static_cast<int>(info.ssi_signo));
  }
}

}  // namespace shardps
