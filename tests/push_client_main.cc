// A client process for the concurrency test: pushes `--pushes` deterministic gradients to
// `--variable` on the ps tasks `--ps` (comma-separated), then exits 0.
#include <iostream>

#include "absl/strings/str_split.h"
#include "client/ps_client.h"
#include "common/flags.h"
#include "tests/test_gradients.h"

int main(int argc, char** argv) {
  std::string ps, variable;
  int64_t pushes = 10, client_index = 0;
  shardps::FlagParser flags("push_client", "pushes deterministic gradients");
  flags.AddString("ps", &ps, "ps addresses, comma-separated");
  flags.AddString("variable", &variable, "variable name");
  flags.AddInt("pushes", &pushes, "number of pushes");
  flags.AddInt("client", &client_index, "this client's index (selects the gradients)");
  int rc = shardps::HandleParseResult(flags, flags.Parse(argc, argv));
  if (rc >= 0) return rc;
  auto client = shardps::NewGrpcPsClient(absl::StrSplit(ps, ','), {});
  if (!client.ok() || !(*client)->Discover().ok()) {
    std::cerr << "cannot reach ps\n";
    return 1;
  }
  auto layout = (*client)->GetLayout(variable);
  if (!layout.ok()) {
    std::cerr << layout.status() << "\n";
    return 1;
  }
  for (int64_t k = 0; k < pushes; ++k) {
    std::vector<float> g = shardps::testing::TestGradient(client_index, k, layout->num_elements);
    absl::Status s = (*client)->Push(variable, g);
    if (!s.ok()) {
      std::cerr << s << "\n";
      return 1;
    }
  }
  return 0;
}
