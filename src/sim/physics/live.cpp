#include "sim/physics/live.h"

#include <algorithm>
#include <charconv>

namespace gpumeter::sim {

namespace {

// Splits off the next space-separated word.
std::string_view next_word(std::string_view& s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  const std::size_t space = s.find(' ');
  std::string_view word = s.substr(0, space);
  s = space == std::string_view::npos ? std::string_view{} : s.substr(space);
  return word;
}

template <typename T>
bool next_number(std::string_view& s, T& out) {
  std::string_view w = next_word(s);
  if (w.empty()) return false;
  auto [ptr, ec] = std::from_chars(w.data(), w.data() + w.size(), out);
  return ec == std::errc() && ptr == w.data() + w.size();
}

}  // namespace

bool parse_live_line(std::string_view line, LiveLog& log) {
  const std::string_view kind = next_word(line);
  unsigned gpu = 0;
  std::int64_t t = 0;
  if (!next_number(line, gpu) || !next_number(line, t) || t < 0) return false;
  LiveLog::Gpu& g = log.gpus[gpu];
  if (kind == "ctx") {
    g = LiveLog::Gpu{};
    g.start_us = t;
  } else if (kind == "end") {
    if (g.start_us < 0) return false;
    g.end_us = std::max(t, g.start_us);
  } else if (kind == "mem") {
    std::uint64_t bytes = 0;
    if (!next_number(line, bytes)) return false;
    if (!g.memory.empty() && t < g.memory.back().first) t = g.memory.back().first;
    g.memory.emplace_back(t, bytes);
  } else if (kind == "run") {
    std::int64_t end = 0;
    if (!next_number(line, end) || end < t) return false;
    // Kernels of one context run one after another: a launch queues behind the last.
    if (!g.busy.empty() && t < g.busy.back().second) {
      const std::int64_t shift = g.busy.back().second - t;
      t += shift;
      end += shift;
    }
    if (end > t) g.busy.emplace_back(t, end);
  } else {
    return false;
  }
  return next_word(line).empty();
}

void close_live_log(LiveLog& log, std::int64_t t_us) {
  for (auto& [gpu, g] : log.gpus) {
    if (g.start_us >= 0 && g.end_us < 0) g.end_us = std::max(t_us, g.start_us);
  }
}

void append_live_processes(std::uint32_t pid, const LiveLog& log,
                           const std::function<Micros(std::int64_t)>& to_scenario, std::vector<LiveProcess>& out) {
  for (const auto& [gpu, g] : log.gpus) {
    if (g.start_us < 0) continue;
    LiveProcess p;
    p.pid = pid;
    p.gpu = gpu;
    p.start = to_scenario(g.start_us);
    p.end = g.end_us < 0 ? kForever : to_scenario(g.end_us);
    for (const auto& [t, bytes] : g.memory) p.memory.emplace_back(to_scenario(t), bytes);
    for (const auto& [a, b] : g.busy) {
      const Micros s = to_scenario(a), e = to_scenario(b);
      if (e > s) p.busy.emplace_back(s, e);
    }
    out.push_back(std::move(p));
  }
}

LiveState live_state_at(const LiveProcess& p, Micros t) {
  LiveState st;
  // Memory: the last step at or before t.
  auto m =
      std::upper_bound(p.memory.begin(), p.memory.end(), t, [](Micros v, const auto& step) { return v < step.first; });
  if (m != p.memory.begin()) st.memory_bytes = std::prev(m)->second;
  if (m != p.memory.end()) st.next_change = m->first;
  // Kernels: the first interval that ends after t.
  auto k = std::upper_bound(p.busy.begin(), p.busy.end(), t, [](Micros v, const auto& run) { return v < run.second; });
  if (k != p.busy.end()) {
    if (k->first <= t) {
      st.percent = 100;
      st.next_change = std::min(st.next_change, k->second);
    } else {
      st.next_change = std::min(st.next_change, k->first);
    }
  }
  return st;
}

}  // namespace gpumeter::sim
