#pragma once
// Prometheus' remote read protocol (POST /api/v1/read), as the report reads raw samples with
// it: the request asks for streamed XOR chunks, and the answer is a stream of frames that hold
// the store's own compressed chunks. Prometheus copies the chunks out of its blocks instead of
// evaluating PromQL over every sample, so a month of a large fleet's counters costs it a few
// seconds where the query API costs it minutes (docs/report-accuracy.md#scaling).
//
// The protocol's parts, each checked as it is read:
//   - request: a protobuf ReadRequest (proto/remote_read.proto), snappy-compressed;
//   - answer: frames of uvarint size, big-endian CRC32C (Castagnoli) of the message, and a
//     protobuf ChunkedReadResponse; a series' chunks come in time order, and a series may
//     continue in the next frame under the same labels;
//   - chunk: Prometheus' XOR encoding (Gorilla's delta-of-delta timestamps, XORed values), as
//     tsdb/chunkenc/xor.go writes it.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "report/prom_api.h"
#include "util/result.h"

namespace gpumeter::report {

struct RawMatcher {
  std::string name;
  std::string value;
  bool regex = false;  // =~ rather than =
};

// The request body for the samples of the series matching all `matchers` with timestamps in
// [start_ms, end_ms], snappy-compressed.
std::string remote_read_request(const std::vector<RawMatcher>& matchers, std::int64_t start_ms, std::int64_t end_ms);

// `data` snappy-compressed as literals only: a valid snappy block that the server's decoder
// reads like any other. A request is a few KiB of mostly distinct uuids, so compressing it
// would save little, and this keeps the library out of the build (libsnappy is in Debian, but
// would be one more library for every release target to carry).
std::string snappy_literal_block(std::string_view data);

// CRC32C (Castagnoli), as the protocol checks each frame with. Hand-written (a table of 256
// words): none of the libraries the build already has exports it.
std::uint32_t crc32c(std::string_view data);

// Appends the samples of one XOR chunk with timestamps in [start_ms, end_ms] to `out` (unix
// seconds), leaving out staleness markers (Prometheus' marker NaN for a series that ended),
// which no query answer shows either. Fails on a chunk that ends early or is malformed.
Result<void> decode_xor_chunk(std::string_view data, std::int64_t start_ms, std::int64_t end_ms,
                              std::vector<Sample>& out);

// Reads an answer's frames as they come, calling `each` once per series (labels without
// __name__) with its samples in [start_ms, end_ms], in time order; a series split across frames
// is handed over once, whole, and one with no sample in the range not at all. What is held is
// the frame being read (Prometheus sends at most 1 MiB each) and one series' samples. Fails on
// a bad frame, a checksum that does not match, a chunk that is not XOR (a native histogram) or
// time that goes backwards, and with the first error `each` returns.
class ChunkedReader {
 public:
  using Each = std::function<Result<void>(Series&&)>;
  ChunkedReader(std::int64_t start_ms, std::int64_t end_ms, Each each);
  ~ChunkedReader();
  ChunkedReader(const ChunkedReader&) = delete;
  ChunkedReader& operator=(const ChunkedReader&) = delete;

  Result<void> feed(std::string_view piece);
  // After the last piece: the stream must end between frames.
  Result<void> finish();

 private:
  Result<void> frame(std::string_view message);
  Result<void> flush();

  struct Parsed;
  std::int64_t start_ms_, end_ms_;
  Each each_;
  std::string pending_;  // the start of a frame not yet complete
  std::size_t frames_ = 0;
  Series current_;
  bool have_ = false;
  double last_t_ = 0;               // the current series' last sample time
  std::unique_ptr<Parsed> parsed_;  // the protobuf message, reused from frame to frame
};

// A whole answer through ChunkedReader.
Result<void> read_chunked_response(std::string_view body, std::int64_t start_ms, std::int64_t end_ms,
                                   const ChunkedReader::Each& each);

}  // namespace gpumeter::report
