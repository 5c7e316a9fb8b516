#pragma once
// Comma lists and the like (`--gpus 0,1`, CUDA_VISIBLE_DEVICES, GPUMETER_SIM_UNSUPPORTED): the
// parts of a text between its separators, empty parts included, so that each caller decides
// what an empty one means ("a,,b" is {"a", "", "b"}; "" is {""}).

#include <string_view>
#include <vector>

namespace gpumeter {

inline std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  for (;;) {
    const std::size_t at = text.find(separator);
    parts.push_back(text.substr(0, at));
    if (at == std::string_view::npos) return parts;
    text.remove_prefix(at + 1);
  }
}

}  // namespace gpumeter
