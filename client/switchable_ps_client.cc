#include "client/switchable_ps_client.h"

#include <utility>

namespace shardps {

std::shared_ptr<PsClient> SwitchablePsClient::Switch(std::shared_ptr<PsClient> next) {
  absl::MutexLock lock(&mu_);
  std::swap(current_, next);
  return next;
}

std::shared_ptr<PsClient> SwitchablePsClient::current() const {
  absl::MutexLock lock(&mu_);
  return current_;
}

StatusCallback SwitchablePsClient::Keeping(std::shared_ptr<PsClient> client,
                                           StatusCallback done) {
  return [client = std::move(client), done = std::move(done)](const absl::Status& s) mutable {
    done(s);
  };
}

void SwitchablePsClient::PullAsync(std::vector<PullTarget> targets, const PullOptions& options,
                                   PullVersions* versions, StatusCallback done) {
  std::shared_ptr<PsClient> c = current();
  PsClient* raw = c.get();
  raw->PullAsync(std::move(targets), options, versions, Keeping(std::move(c), std::move(done)));
}

void SwitchablePsClient::PushAsync(std::vector<PushSource> sources, const PushOptions& options,
                                   StatusCallback done) {
  std::shared_ptr<PsClient> c = current();
  PsClient* raw = c.get();
  raw->PushAsync(std::move(sources), options, Keeping(std::move(c), std::move(done)));
}

void SwitchablePsClient::PullRowsManyAsync(std::vector<RowsPullTarget> targets,
                                           const PullOptions& options, PullVersions* versions,
                                           StatusCallback done) {
  std::shared_ptr<PsClient> c = current();
  PsClient* raw = c.get();
  raw->PullRowsManyAsync(std::move(targets), options, versions,
                         Keeping(std::move(c), std::move(done)));
}

void SwitchablePsClient::PushRowsManyAsync(std::vector<RowsPushSource> sources,
                                           const PushOptions& options, StatusCallback done) {
  std::shared_ptr<PsClient> c = current();
  PsClient* raw = c.get();
  raw->PushRowsManyAsync(std::move(sources), options, Keeping(std::move(c), std::move(done)));
}

void SwitchablePsClient::AssignAsync(const std::string& name, absl::Span<const float> values,
                                     StatusCallback done) {
  std::shared_ptr<PsClient> c = current();
  PsClient* raw = c.get();
  raw->AssignAsync(name, values, Keeping(std::move(c), std::move(done)));
}

}  // namespace shardps
