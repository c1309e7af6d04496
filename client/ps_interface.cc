#include "client/ps_interface.h"

#include <cstring>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"

namespace shardps {

absl::Status PulledSizeError(const PullRequest& request, int64_t got, int64_t expected) {
  return absl::InternalError(absl::StrCat("pull of \"", request.shard(), "\" rows [",
                                          request.row_begin(), ", ", request.row_end(),
                                          ") returned ", got, " bytes, expected ", expected));
}

void PsInterface::PullIntoAsync(const PullRequest* request, PullResponse* response,
                                absl::Span<char> out, absl::Time deadline,
                                StatusCallback done) {
  PullAsync(request, response, deadline,
            [request, response, out, done = std::move(done)](const absl::Status& s) {
              if (!s.ok()) return done(s);
              const std::string& data = response->data();
              if (data.size() != out.size()) {
                return done(PulledSizeError(*request, static_cast<int64_t>(data.size()),
                                            static_cast<int64_t>(out.size())));
              }
              if (!out.empty()) std::memcpy(out.data(), data.data(), data.size());
              response->clear_data();
              done(absl::OkStatus());
            });
}

void PsInterface::PushFromAsync(const PushRequest* request, absl::Span<const char> data,
                                PushResponse* response, absl::Time deadline,
                                StatusCallback done) {
  auto copy = std::make_shared<PushRequest>(*request);
  copy->set_data(data.data(), data.size());
  PushAsync(copy.get(), response, deadline,
            [copy, done = std::move(done)](const absl::Status& s) { done(s); });
}

}  // namespace shardps
