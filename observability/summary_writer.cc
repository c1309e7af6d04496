#include "observability/summary_writer.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace shardps {

SummaryWriter::SummaryWriter(std::string dir, Options options)
    : dir_(std::move(dir)), options_(std::move(options)) {
  if (!options_.log_error) {
    options_.log_error = [](absl::string_view line) { LogError() << line; };
  }
  if (!options_.log_info) {
    options_.log_info = [](absl::string_view line) { LogInfo() << line; };
  }
}

bool SummaryWriter::Write(int64_t step, const std::vector<Scalar>& scalars) {
  absl::MutexLock lock(&mu_);
  absl::Status status;
  if (file_ == nullptr) {
    absl::StatusOr<std::unique_ptr<TfEventsWriter>> created =
        TfEventsWriter::Create(dir_, options_.file);
    if (created.ok()) {
      file_ = *std::move(created);
    } else {
      status = created.status();
    }
  }
  if (status.ok()) status = file_->WriteScalars(step, scalars);
  if (!status.ok()) {
    if (!failing_) {
      options_.log_error(absl::StrCat(status.message(),
                                      "; going on without TensorBoard's series until a write "
                                      "succeeds (said once)"));
    }
    failing_ = true;
    return false;
  }
  if (failing_) {
    options_.log_info(absl::StrCat("TensorBoard event file \"", file_->path(),
                                   "\": writing again"));
  }
  failing_ = false;
  return true;
}

std::string SummaryWriter::path() const {
  absl::MutexLock lock(&mu_);
  return file_ != nullptr ? file_->path() : std::string();
}

}  // namespace shardps
