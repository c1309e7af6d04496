#include "observability/tfevents_reader.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "observability/tfevents_writer.h"

namespace shardps {
namespace {

uint64_t LoadLittleEndian(const char* p, int bytes) {
  uint64_t value = 0;
  for (int i = bytes - 1; i >= 0; --i) value = (value << 8) | static_cast<unsigned char>(p[i]);
  return value;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ReadTfRecords(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("\"", path, "\": cannot read it"));
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string bytes = buffer.str();
  std::vector<std::string> records;
  size_t at = 0;
  while (at < bytes.size()) {
    auto loss = [&](absl::string_view what) {
      return absl::DataLossError(
          absl::StrCat("\"", path, "\": record ", records.size(), " at byte ", at, ": ", what));
    };
    if (bytes.size() - at < 12) return loss("the file ends inside the record's header");
    const absl::string_view header(bytes.data() + at, 8);
    if (LoadLittleEndian(bytes.data() + at + 8, 4) != MaskedCrc32c(header)) {
      return loss("the length's CRC-32C does not match");
    }
    const uint64_t length = LoadLittleEndian(header.data(), 8);
    if (bytes.size() - at - 12 < length || bytes.size() - at - 12 - length < 4) {
      return loss(absl::StrCat("the file ends inside the record's ", length, " bytes of data"));
    }
    const absl::string_view data(bytes.data() + at + 12, length);
    if (LoadLittleEndian(data.data() + length, 4) != MaskedCrc32c(data)) {
      return loss("the data's CRC-32C does not match");
    }
    records.emplace_back(data);
    at += 12 + length + 4;
  }
  return records;
}

absl::StatusOr<std::vector<tfevents::Event>> ReadTfEvents(const std::string& path) {
  absl::StatusOr<std::vector<std::string>> records = ReadTfRecords(path);
  if (!records.ok()) return records.status();
  std::vector<tfevents::Event> events(records->size());
  for (size_t i = 0; i < records->size(); ++i) {
    if (!events[i].ParseFromString((*records)[i])) {
      return absl::DataLossError(absl::StrCat("\"", path, "\": record ", i, " is no Event"));
    }
  }
  return events;
}

}  // namespace shardps
