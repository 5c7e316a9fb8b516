#pragma once
// Processes of real programs on the simulated GPUs: `gpumeter burn` (or any program) running on
// the simulated CUDA driver (src/sim/cuda) appears here with its real pid, the memory it
// allocated and the intervals its kernels ran. The simulated NVML adds them to each GPU's
// timeline beside the scenario's jobs, so the agent meets them as it meets a real compute process.
//
// The driver writes one append-only log per process into a directory both sides know
// (GPUMETER_SIM_CUDA_DIR). Each line is one event, times in unix microseconds:
//   ctx <gpu> <t>              a context was created on NVML GPU <gpu>: the process is on it
//   mem <gpu> <t> <bytes>      the process holds <bytes> of that GPU's memory from <t> on
//   run <gpu> <start> <end>    a kernel runs over [start, end)
//   end <gpu> <t>              the context was destroyed
// parse_live_line() reads one line into a LiveLog; live_processes() turns it into scenario time.

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string_view>
#include <utility>
#include <vector>

#include "sim/scenario/time.h"

namespace gpumeter::sim {

// The job index of a live process's JobShare: it belongs to no scenario job.
inline constexpr std::uint32_t kLiveJob = 0xFFFFFFFFu;

// One process on one GPU, in scenario time.
struct LiveProcess {
  std::uint32_t pid = 0;
  unsigned gpu = 0;
  Micros start = 0;
  Micros end = kForever;                                 // exclusive
  std::vector<std::pair<Micros, std::uint64_t>> memory;  // from each time on, by time
  std::vector<std::pair<Micros, Micros>> busy;           // kernel intervals, by start, disjoint
};

// What one process's log said so far, per GPU, in unix microseconds.
struct LiveLog {
  struct Gpu {
    std::int64_t start_us = -1;  // -1: no context
    std::int64_t end_us = -1;    // -1: still open
    std::vector<std::pair<std::int64_t, std::uint64_t>> memory;
    std::vector<std::pair<std::int64_t, std::int64_t>> busy;
  };
  std::map<unsigned, Gpu> gpus;
};

// Applies one line (without its newline); false when it is not one of the four events.
bool parse_live_line(std::string_view line, LiveLog& log);

// Closes every open context of the log at `t_us` (the process is gone).
void close_live_log(LiveLog& log, std::int64_t t_us);

// The log's processes in scenario time; `to_scenario` maps unix microseconds.
void append_live_processes(std::uint32_t pid, const LiveLog& log,
                           const std::function<Micros(std::int64_t)>& to_scenario, std::vector<LiveProcess>& out);

// The current set of live processes, shared between the thread that reads the logs and the
// GPUs' timelines.
class LiveTable {
 public:
  using Set = std::vector<LiveProcess>;
  std::shared_ptr<const Set> get() const {
    std::lock_guard lock(mu_);
    return set_;
  }
  void set(std::shared_ptr<const Set> s) {
    std::lock_guard lock(mu_);
    set_ = std::move(s);
    version_.fetch_add(1, std::memory_order_release);
  }
  // Counts the changes, so that caches of segments know when to read them again.
  std::uint64_t version() const { return version_.load(std::memory_order_acquire); }

 private:
  mutable std::mutex mu_;
  std::shared_ptr<const Set> set_ = std::make_shared<const Set>();
  std::atomic<std::uint64_t> version_{0};
};

// A live process's state at t: its share (100 while a kernel runs, else 0), its memory, and
// when either next changes.
struct LiveState {
  int percent = 0;
  std::uint64_t memory_bytes = 0;
  Micros next_change = kForever;
};
LiveState live_state_at(const LiveProcess& p, Micros t);

}  // namespace gpumeter::sim
