#include "observability/tfevents_writer.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "checkpoint/crc32c.h"

namespace shardps {
namespace {

constexpr uint32_t kMaskDelta = 0xa282ead8u;

void StoreLittleEndian(uint64_t value, int bytes, char* out) {
  for (int i = 0; i < bytes; ++i) out[i] = static_cast<char>((value >> (8 * i)) & 0xff);
}

std::string Hostname() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

// Writes all of `data` at the end of `fd`; errno's text on failure.
absl::Status WriteAll(int fd, absl::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::UnavailableError(std::strerror(errno));
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

}  // namespace

uint32_t MaskedCrc32c(absl::string_view data) {
  const uint32_t crc = Crc32c(data);
  return ((crc >> 15) | (crc << 17)) + kMaskDelta;
}

std::string FrameTfRecord(absl::string_view data) {
  std::string record(8 + 4 + data.size() + 4, '\0');
  char* p = record.data();
  StoreLittleEndian(data.size(), 8, p);
  StoreLittleEndian(MaskedCrc32c(absl::string_view(p, 8)), 4, p + 8);
  std::memcpy(p + 12, data.data(), data.size());
  StoreLittleEndian(MaskedCrc32c(data), 4, p + 12 + data.size());
  return record;
}

absl::StatusOr<std::unique_ptr<TfEventsWriter>> TfEventsWriter::Create(const std::string& dir,
                                                                        Options options) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    return absl::UnavailableError(absl::StrCat("TensorBoard directory \"", dir,
                                               "\": cannot create it: ", error.message()));
  }
  if (!options.now) options.now = [] { return absl::Now(); };
  if (options.hostname.empty()) options.hostname = Hostname();
  const std::string base =
      absl::StrCat(dir, "/events.out.tfevents.", absl::ToUnixSeconds(options.now()), ".",
                   options.hostname);
  std::string path = base;
  int fd = -1;
  for (int suffix = 1; suffix <= 100; ++suffix) {
    fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0 || errno != EEXIST) break;
    path = absl::StrCat(base, ".", suffix);
  }
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("TensorBoard event file \"", path,
                                               "\": cannot create it: ", std::strerror(errno)));
  }
  std::unique_ptr<TfEventsWriter> writer(new TfEventsWriter(path, fd, std::move(options)));
  tfevents::Event version;
  version.set_wall_time(absl::ToDoubleSeconds(writer->options_.now() - absl::UnixEpoch()));
  version.set_file_version(kTfEventsFileVersion);
  absl::Status written = writer->WriteEvent(version);
  if (!written.ok()) {
    writer.reset();
    ::unlink(path.c_str());  // an empty file would only make TensorBoard look at it
    return written;
  }
  return writer;
}

TfEventsWriter::~TfEventsWriter() { ::close(fd_); }

absl::Status TfEventsWriter::WriteScalars(int64_t step, const std::vector<Scalar>& scalars) {
  tfevents::Event event;
  event.set_wall_time(absl::ToDoubleSeconds(options_.now() - absl::UnixEpoch()));
  event.set_step(step);
  tfevents::Summary* summary = event.mutable_summary();
  for (const Scalar& scalar : scalars) {
    tfevents::Summary::Value* value = summary->add_value();
    value->set_tag(scalar.tag);
    value->set_simple_value(static_cast<float>(scalar.value));
  }
  return WriteEvent(event);
}

absl::Status TfEventsWriter::WriteEvent(const tfevents::Event& event) {
  const std::string record = FrameTfRecord(event.SerializeAsString());
  absl::MutexLock lock(&mu_);
  absl::Status written = WriteAll(fd_, record);
  if (!written.ok()) {
    // Cut off what reached the file, so that the next record follows a whole one. Should
    // that fail too, the reader stops at the torn record: the series ends there.
    (void)::ftruncate(fd_, size_);
    return absl::UnavailableError(
        absl::StrCat("TensorBoard event file \"", path_, "\": write failed: ", written.message()));
  }
  size_ += static_cast<int64_t>(record.size());
  return absl::OkStatus();
}

}  // namespace shardps
