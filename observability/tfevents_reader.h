// Reads back what observability/tfevents_writer.h writes: a TFRecord file's records, each
// checked against its two masked CRC-32Cs, and the Event of each. For tests and tools; the
// reader people use is TensorBoard itself.
//
// Thread-safety: pure functions.
#ifndef SHARDPS_OBSERVABILITY_TFEVENTS_READER_H_
#define SHARDPS_OBSERVABILITY_TFEVENTS_READER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "observability/tfevents.pb.h"

namespace shardps {

// Every record of the TFRecord file at `path`, in order. NOT_FOUND when it cannot be read;
// DATA_LOSS naming the file, the record's offset and what is wrong when a length or data CRC
// does not match or the file ends inside a record.
absl::StatusOr<std::vector<std::string>> ReadTfRecords(const std::string& path);

// Every record of the file parsed as an Event; DATA_LOSS also for a record that is no Event.
absl::StatusOr<std::vector<tfevents::Event>> ReadTfEvents(const std::string& path);

}  // namespace shardps

#endif  // SHARDPS_OBSERVABILITY_TFEVENTS_READER_H_
