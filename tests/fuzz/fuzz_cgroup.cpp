// /proc/<pid>/cgroup of any process on the node: whoever runs it chooses the cgroup names.
#include <string>

#include "attribution/cgroup.h"
#include "fuzz_check.h"

using namespace gpumeter;

namespace {

bool lowercase_hex(std::string_view s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

void check(const CgroupInfo& info) {
  if (!info.container_id.empty()) {
    FUZZ_CHECK(info.container_id.size() == 64 && lowercase_hex(info.container_id));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text = fuzz::as_text(data, size);
  const CgroupInfo info = parse_cgroup(text);
  check(info);
  const CgroupInfo by_path = parse_cgroup_path(text);
  check(by_path);
  // The fields come from the path the parser chose: reading that path alone gives them again.
  if (!info.path.empty()) {
    CgroupInfo again = parse_cgroup_path(info.path);
    FUZZ_CHECK(again.container_id == info.container_id);
    FUZZ_CHECK(again.pod_uid == info.pod_uid);
  }
  return 0;
}
