#include "sim/nvml/live_logs.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <memory>
#include <string_view>

#include <fmt/format.h>

namespace gpumeter::sim {

namespace {

constexpr std::int64_t kMissingDirRecheckNs = 100'000'000;

// The pid a log file is named after ("<pid>.log"), or 0.
std::uint32_t pid_of(std::string_view name) {
  if (name.size() <= 4 || name.substr(name.size() - 4) != ".log") return 0;
  std::uint32_t pid = 0;
  auto [ptr, ec] = std::from_chars(name.data(), name.data() + name.size() - 4, pid);
  return ec == std::errc() && ptr == name.data() + name.size() - 4 ? pid : 0;
}

bool has_open_context(const LiveLog& log) {
  for (const auto& [gpu, g] : log.gpus) {
    if (g.start_us >= 0 && g.end_us < 0) return true;
  }
  return false;
}

std::int64_t last_event_us(const LiveLog& log) {
  std::int64_t last = 0;
  for (const auto& [gpu, g] : log.gpus) {
    last = std::max(last, g.start_us);
    if (!g.memory.empty()) last = std::max(last, g.memory.back().first);
    if (!g.busy.empty()) last = std::max(last, g.busy.back().second);
  }
  return last;
}

}  // namespace

bool LiveLogReader::read_file(std::uint32_t pid, File& f) {
  const std::string path = fmt::format("{}/{}.log", dir_, pid);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool changed = false;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::pread(fd, buf, sizeof buf, static_cast<off_t>(f.offset));
    if (n <= 0) break;
    f.offset += static_cast<std::uint64_t>(n);
    f.partial.append(buf, static_cast<std::size_t>(n));
    std::size_t begin = 0;
    for (std::size_t nl; (nl = f.partial.find('\n', begin)) != std::string::npos; begin = nl + 1) {
      changed |= parse_live_line(std::string_view(f.partial).substr(begin, nl - begin), f.log);
    }
    f.partial.erase(0, begin);
  }
  ::close(fd);
  return changed;
}

bool LiveLogReader::check_alive(std::uint32_t pid, File& f) {
  if (f.dead || !has_open_context(f.log)) return false;
  if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) {
    f.seen_alive = true;
    return false;
  }
  f.dead = true;
  const std::int64_t now_us = ScenarioClock::wall_now_ns() / 1000;
  close_live_log(f.log, f.seen_alive ? now_us : last_event_us(f.log));
  return true;
}

void LiveLogReader::refresh(const ScenarioClock& clock, LiveTable& table) {
  std::lock_guard lock(mu_);
  const std::int64_t now_ns = ScenarioClock::wall_now_ns();
  if (now_ns < next_scan_ns_) return;
  DIR* d = ::opendir(dir_.c_str());
  if (d == nullptr) {
    next_scan_ns_ = now_ns + kMissingDirRecheckNs;
    return;
  }
  bool changed = false;
  while (const dirent* e = ::readdir(d)) {
    const std::uint32_t pid = pid_of(e->d_name);
    if (pid == 0) continue;
    changed |= files_.try_emplace(pid).second;
  }
  ::closedir(d);
  for (auto& [pid, f] : files_) {
    changed |= read_file(pid, f);
    changed |= check_alive(pid, f);
  }
  dirty_ |= changed;
  const auto epoch = clock.epoch_ns();
  if (!dirty_ || !epoch) return;
  dirty_ = false;
  const double scale = clock.scale();
  const std::int64_t epoch_ns = *epoch;
  auto to_scenario = [&](std::int64_t unix_us) {
    return static_cast<Micros>(static_cast<double>(unix_us * 1000 - epoch_ns) * scale / 1000.0);
  };
  auto set = std::make_shared<LiveTable::Set>();
  for (const auto& [pid, f] : files_) append_live_processes(pid, f.log, to_scenario, *set);
  table.set(std::move(set));
}

}  // namespace gpumeter::sim
