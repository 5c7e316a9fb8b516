#include "backend/dynamic_library.h"

#include <dlfcn.h>

#include <algorithm>

namespace gpumeter {

Result<std::unique_ptr<DynamicLibrary>> DynamicLibrary::open_first(const std::vector<std::string>& candidates) {
  std::string tried;
  for (const auto& path : candidates) {
    // RTLD_LOCAL keeps the vendor library's symbols out of the global namespace.
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h != nullptr) return std::unique_ptr<DynamicLibrary>(new DynamicLibrary(h, path));
    const char* err = dlerror();
    if (!tried.empty()) tried += "; ";
    tried += path + ": " + (err != nullptr ? err : "unknown dlopen error");
  }
  return Error{0, "tried " + tried};
}

DynamicLibrary::~DynamicLibrary() {
  if (handle_ != nullptr) dlclose(handle_);
}

void* DynamicLibrary::symbol(const char* name) const { return dlsym(handle_, name); }

void* FilteredSymbolSource::symbol(const char* name) const {
  if (std::find(hidden_.begin(), hidden_.end(), name) != hidden_.end()) return nullptr;
  return inner_->symbol(name);
}

}  // namespace gpumeter
