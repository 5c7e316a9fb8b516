// A remote read answer as it arrives from the store: frames of protobuf holding XOR chunks,
// read by ChunkedReader in the pieces the network delivers. The first byte chooses where the
// answer is cut in two, so a frame split anywhere is exercised.
#include <string>
#include <vector>

#include <google/protobuf/stubs/logging.h>

#include "fuzz_check.h"
#include "report/remote_read.h"

using namespace gpumeter;

namespace {

constexpr std::int64_t kStart = 1'000'000, kEnd = 2'000'000'000'000;

// The series read, or none when the answer is refused.
std::vector<report::Series> read(std::string_view body, std::size_t cut, bool& ok) {
  std::vector<report::Series> out;
  report::ChunkedReader reader(kStart, kEnd, [&](report::Series&& s) -> Result<void> {
    out.push_back(std::move(s));
    return {};
  });
  cut = std::min(cut, body.size());
  ok = reader.feed(body.substr(0, cut)).ok() && reader.feed(body.substr(cut)).ok() && reader.finish().ok();
  return out;
}

}  // namespace

// Protobuf logs what it cannot parse; the fuzzer makes millions of such inputs.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view body = fuzz::as_text(data + 1, size - 1);
  bool whole_ok = false, split_ok = false;
  const auto whole = read(body, body.size(), whole_ok);
  const auto split = read(body, static_cast<std::size_t>(data[0]) * body.size() / 255, split_ok);
  // Where the network cuts the answer changes nothing.
  FUZZ_CHECK(whole_ok == split_ok);
  if (!whole_ok) return 0;
  FUZZ_CHECK(whole.size() == split.size());
  for (std::size_t i = 0; i < whole.size(); ++i) {
    const auto& s = whole[i];
    FUZZ_CHECK(s.labels == split[i].labels && s.samples.size() == split[i].samples.size());
    FUZZ_CHECK(!s.samples.empty() && s.labels.count("__name__") == 0);
    for (std::size_t k = 0; k < s.samples.size(); ++k) {
      FUZZ_CHECK(s.samples[k].t * 1000 >= kStart && s.samples[k].t * 1000 <= kEnd);
      FUZZ_CHECK(k == 0 || s.samples[k].t > s.samples[k - 1].t);
      FUZZ_CHECK(s.samples[k].t == split[i].samples[k].t);
    }
  }
  return 0;
}
