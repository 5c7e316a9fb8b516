#pragma once
// Helpers for the kubelet tests: a private directory for sockets, fixtures of pods, a log
// captured to a file, and polling with a generous bound.

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kubelet/pod_resources.h"

namespace gpumeter::kubelet::testing {

// A fresh directory under /tmp, removed with its contents on destruction. /tmp rather than
// $TMPDIR: a unix socket path must fit in 107 bytes.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = "/tmp/gpumeter-kubelet-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed";
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// Polls `done` every 10 ms until it holds or `limit` passes.
inline bool eventually(const std::function<bool()>& done,
                       std::chrono::milliseconds limit = std::chrono::milliseconds(10000)) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// A list the test changes while a server answers from it.
class PodList {
 public:
  explicit PodList(std::vector<PodResources> pods = {}) : pods_(std::move(pods)) {}
  void set(std::vector<PodResources> pods) {
    std::lock_guard lock(mu_);
    pods_ = std::move(pods);
  }
  std::vector<PodResources> get() const {
    std::lock_guard lock(mu_);
    return pods_;
  }
  std::function<std::vector<PodResources>()> fn() {
    return [this] { return get(); };
  }

 private:
  mutable std::mutex mu_;
  std::vector<PodResources> pods_;
};

inline constexpr const char* kUuidA = "GPU-6f1c4a2e-0b9d-4c51-8e3f-2d7a9b1c0e11";
inline constexpr const char* kUuidB = "GPU-8f2c1d90-3e5a-4b17-9c2e-5da9abb51763";
inline constexpr const char* kUuidC = "GPU-0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d";

// A node: a training pod with two whole GPUs, two inference pods sharing time-sliced replicas
// of a third, a pod with a NIC and CPUs only, and a pod with no devices.
inline std::vector<PodResources> sample_node() {
  return {
      {"train-0",
       "ml",
       {{"trainer", {{"nvidia.com/gpu", {kUuidA, kUuidB}}, {"rdma/hca_shared_devices_a", {"hca0"}}}}, {"sidecar", {}}}},
      {"infer-a", "tenants", {{"server", {{"nvidia.com/gpu", {std::string(kUuidC) + "::0"}}}}}},
      {"infer-b", "tenants", {{"server", {{"nvidia.com/gpu", {std::string(kUuidC) + "::1"}}}}}},
      {"net-0", "infra", {{"agent", {{"example.com/nic", {"nic-3"}}}}}},
      {"idle-0", "default", {{"main", {}}}},
  };
}

// A log written to a temporary file, read back after the writer has stopped.
class CapturedLog {
 public:
  CapturedLog() : file_(std::tmpfile()) {}
  ~CapturedLog() {
    if (file_) std::fclose(file_);
  }
  CapturedLog(const CapturedLog&) = delete;
  CapturedLog& operator=(const CapturedLog&) = delete;
  std::FILE* file() { return file_; }
  std::vector<std::string> lines() {
    std::vector<std::string> out;
    std::fflush(file_);
    std::rewind(file_);
    char buf[4096];
    std::string line;
    while (std::fgets(buf, sizeof buf, file_)) {
      line += buf;
      if (!line.empty() && line.back() == '\n') {
        line.pop_back();
        out.push_back(line);
        line.clear();
      }
    }
    if (!line.empty()) out.push_back(line);
    std::fseek(file_, 0, SEEK_END);
    return out;
  }
  size_t count(const std::string& needle) {
    size_t n = 0;
    for (const auto& l : lines()) n += l.find(needle) != std::string::npos;
    return n;
  }

 private:
  std::FILE* file_;
};

}  // namespace gpumeter::kubelet::testing
