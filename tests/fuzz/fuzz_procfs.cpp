// Files of /proc/<pid> that another user's process controls: stat (comm is any 16 bytes,
// parentheses included), status, environ; and /proc/stat's btime.
#include <algorithm>
#include <string>
#include <vector>

#include "attribution/procfs.h"
#include "fuzz_check.h"

using namespace gpumeter;

namespace {

std::vector<std::pair<std::string, std::string>> filter(const std::vector<std::string>& allow, std::string_view bytes,
                                                        std::size_t piece) {
  EnvironFilter f(allow);
  while (!bytes.empty()) {
    const std::size_t n = std::min(piece, bytes.size());
    f.feed(bytes.substr(0, n));
    bytes.remove_prefix(n);
  }
  return f.finish();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto [selector, text] = fuzz::select(data, size, 4);
  switch (selector) {
    case 0:
      if (auto stat = parse_proc_stat(text)) {
        FUZZ_CHECK(stat->comm.size() <= text.size());
        auto again = parse_proc_stat(text);
        FUZZ_CHECK(again && again->comm == stat->comm && again->start_time == stat->start_time);
      }
      break;
    case 1:
      if (auto uid = parse_status_uid(text)) FUZZ_CHECK(parse_status_uid(text).value() == *uid);
      break;
    case 2:
      if (auto btime = parse_boot_time(text)) FUZZ_CHECK(parse_boot_time(text).value() == *btime);
      break;
    default: {
      const std::vector<std::string> allow = {"SLURM_JOB_ID", "PROJECT", "A", "GPUMETER_PROJECT_NAME"};
      const auto whole = filter(allow, text, text.size() + 1);
      // Only allow-listed names, each once, within the value limit.
      for (const auto& [name, value] : whole) {
        FUZZ_CHECK(std::find(allow.begin(), allow.end(), name) != allow.end());
        FUZZ_CHECK(value.size() <= kMaxEnvValueBytes);
      }
      // The kernel hands environ over in reads of any size: the pieces must not matter.
      for (std::size_t piece : {1, 3, 7}) FUZZ_CHECK(filter(allow, text, piece) == whole);
      break;
    }
  }
  return 0;
}
