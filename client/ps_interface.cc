#include "client/ps_interface.h"

#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/fanout.h"

namespace shardps {
namespace {

// A batch's pushes, issued in order, one at a time, as the ps applies a batch; stops at the
// first failure.
struct PushChain {
  PsInterface* ps = nullptr;
  std::vector<PushRequest> items;
  PushBatchResponse* response = nullptr;
  absl::Time deadline;
  StatusCallback done;

  static void Run(std::shared_ptr<PushChain> chain, int i) {
    if (i == static_cast<int>(chain->items.size())) return chain->done(absl::OkStatus());
    PushChain* c = chain.get();
    c->ps->PushAsync(&c->items[i], c->response->mutable_pushes(i), c->deadline,
                     [chain = std::move(chain), i](const absl::Status& s) {
                       if (!s.ok()) return chain->done(s);
                       Run(chain, i + 1);
                     });
  }
};

// A batch's row pushes, issued in order, one at a time, as the ps applies a batch; stops
// at the first failure.
struct PushRowsChain {
  PsInterface* ps = nullptr;
  const PushRowsBatchRequest* request = nullptr;
  PushRowsBatchResponse* response = nullptr;
  absl::Time deadline;
  StatusCallback done;

  static void Run(std::shared_ptr<PushRowsChain> chain, int i) {
    if (i == chain->request->pushes_size()) return chain->done(absl::OkStatus());
    PushRowsChain* c = chain.get();
    c->ps->PushRowsAsync(&c->request->pushes(i), c->response->mutable_pushes(i), c->deadline,
                         [chain = std::move(chain), i](const absl::Status& s) {
                           if (!s.ok()) return chain->done(s);
                           Run(chain, i + 1);
                         });
  }
};

}  // namespace

int64_t RowRequestIds(const PullRowsRequest& request) {
  return request.ids_size() + static_cast<int64_t>(request.ids_bytes().size() / sizeof(int64_t));
}

void PsInterface::PullRowsBatchIntoAsync(const PullRowsBatchRequest* request,
                                         PullRowsBatchResponse* response,
                                         absl::Span<const absl::Span<char>> outs,
                                         absl::Time deadline, StatusCallback done) {
  const int n = request->pulls_size();
  int64_t rows = 0;
  for (const PullRowsRequest& item : request->pulls()) rows += RowRequestIds(item);
  if (rows != static_cast<int64_t>(outs.size())) {
    return done(absl::InvalidArgumentError(absl::StrCat(
        "pull rows batch of ", n, " items and ", rows, " ids has ", outs.size(), " outputs")));
  }
  response->Clear();
  for (int i = 0; i < n; ++i) response->add_pulls();
  if (n == 0) return done(absl::OkStatus());
  auto join = Fanout::Make(static_cast<size_t>(n), std::move(done));
  size_t offset = 0;
  for (int i = 0; i < n; ++i) {
    const size_t count = static_cast<size_t>(RowRequestIds(request->pulls(i)));
    PullRowsIntoAsync(&request->pulls(i), response->mutable_pulls(i), outs.subspan(offset, count),
                      deadline, [join](const absl::Status& s) { join->Finish(s); });
    offset += count;
  }
}

void PsInterface::PushRowsBatchAsync(const PushRowsBatchRequest* request,
                                     PushRowsBatchResponse* response, absl::Time deadline,
                                     StatusCallback done) {
  auto chain = std::make_shared<PushRowsChain>();
  chain->ps = this;
  chain->request = request;
  chain->response = response;
  chain->deadline = deadline;
  chain->done = std::move(done);
  response->Clear();
  for (int i = 0; i < request->pushes_size(); ++i) response->add_pushes();
  PushRowsChain::Run(std::move(chain), 0);
}

absl::Status PulledSizeError(const PullRequest& request, int64_t got, int64_t expected) {
  return absl::InternalError(absl::StrCat("pull of \"", request.shard(), "\" rows [",
                                          request.row_begin(), ", ", request.row_end(),
                                          ") returned ", got, " bytes, expected ", expected));
}

void PsInterface::PullBatchAsync(const PullBatchRequest* request, PullBatchResponse* response,
                                 absl::Span<const absl::Span<char>> outs, absl::Time deadline,
                                 StatusCallback done) {
  const int n = request->pulls_size();
  if (static_cast<size_t>(n) != outs.size()) {
    return done(absl::InvalidArgumentError(
        absl::StrCat("pull batch of ", n, " items has ", outs.size(), " outputs")));
  }
  response->Clear();
  for (int i = 0; i < n; ++i) response->add_pulls();
  if (n == 0) return done(absl::OkStatus());
  auto join = Fanout::Make(static_cast<size_t>(n), std::move(done));
  for (int i = 0; i < n; ++i) {
    const PullRequest* item = &request->pulls(i);
    PullResponse* reply = response->mutable_pulls(i);
    absl::Span<char> out = outs[i];
    PullAsync(item, reply, deadline, [item, reply, out, join](const absl::Status& s) {
      absl::Status status = s;
      if (status.ok() && reply->data().size() != out.size()) {
        status = PulledSizeError(*item, static_cast<int64_t>(reply->data().size()),
                                 static_cast<int64_t>(out.size()));
      }
      if (status.ok() && !out.empty()) {
        std::memcpy(out.data(), reply->data().data(), out.size());
      }
      reply->clear_data();
      join->Finish(status);
    });
  }
}

absl::Status PulledRowsSizeError(const PullRowsRequest& request, int64_t got, int64_t expected) {
  return absl::InternalError(absl::StrCat("row pull of \"", request.shard(), "\" returned ", got,
                                          " bytes, expected ", expected));
}

void PsInterface::PullRowsIntoAsync(const PullRowsRequest* request, PullRowsResponse* response,
                                    absl::Span<const absl::Span<char>> outs, absl::Time deadline,
                                    StatusCallback done) {
  PullRowsAsync(request, response, deadline,
                [request, response, outs, done = std::move(done)](const absl::Status& s) {
                  absl::Status status = s;
                  const std::string& data = response->data();
                  size_t expected = 0;
                  for (absl::Span<char> out : outs) expected += out.size();
                  if (status.ok() && data.size() != expected) {
                    status = PulledRowsSizeError(*request, static_cast<int64_t>(data.size()),
                                                 static_cast<int64_t>(expected));
                  }
                  if (status.ok()) {
                    size_t offset = 0;
                    for (absl::Span<char> out : outs) {
                      std::memcpy(out.data(), data.data() + offset, out.size());
                      offset += out.size();
                    }
                  }
                  response->clear_data();
                  done(status);
                });
}

void PsInterface::PushBatchAsync(const PushBatchRequest* request,
                                 absl::Span<const absl::Span<const char>> data,
                                 PushBatchResponse* response, absl::Time deadline,
                                 StatusCallback done) {
  const int n = request->pushes_size();
  if (static_cast<size_t>(n) != data.size()) {
    return done(absl::InvalidArgumentError(
        absl::StrCat("push batch of ", n, " items has ", data.size(), " gradients")));
  }
  auto chain = std::make_shared<PushChain>();
  chain->ps = this;
  chain->items.assign(request->pushes().begin(), request->pushes().end());
  for (int i = 0; i < n; ++i) chain->items[i].set_data(data[i].data(), data[i].size());
  chain->response = response;
  chain->deadline = deadline;
  chain->done = std::move(done);
  response->Clear();
  for (int i = 0; i < n; ++i) response->add_pushes();
  PushChain::Run(std::move(chain), 0);
}

}  // namespace shardps
