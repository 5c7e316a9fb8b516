#pragma once
// dlopen()/dlsym() behind a small interface, so tests can hide symbols of a real library
// and prove that a missing symbol only turns off the metrics it feeds.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "util/result.h"

namespace gpumeter {

class SymbolSource {
 public:
  virtual ~SymbolSource() = default;
  virtual void* symbol(const char* name) const = 0;
  virtual const std::string& path() const = 0;
};

class DynamicLibrary final : public SymbolSource {
 public:
  // Tries each candidate in order; the error lists every attempt and dlerror()'s reason.
  static Result<std::unique_ptr<DynamicLibrary>> open_first(const std::vector<std::string>& candidates);
  ~DynamicLibrary() override;
  DynamicLibrary(const DynamicLibrary&) = delete;
  DynamicLibrary& operator=(const DynamicLibrary&) = delete;

  void* symbol(const char* name) const override;
  const std::string& path() const override { return path_; }

 private:
  DynamicLibrary(void* handle, std::string path) : handle_(handle), path_(std::move(path)) {}
  void* handle_;
  std::string path_;
};

// Wraps another source and reports the listed symbols as absent.
class FilteredSymbolSource final : public SymbolSource {
 public:
  FilteredSymbolSource(std::unique_ptr<SymbolSource> inner, std::vector<std::string> hidden)
      : inner_(std::move(inner)), hidden_(std::move(hidden)) {}
  void* symbol(const char* name) const override;
  const std::string& path() const override { return inner_->path(); }

 private:
  std::unique_ptr<SymbolSource> inner_;
  std::vector<std::string> hidden_;
};

}  // namespace gpumeter
