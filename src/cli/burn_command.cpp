#include "cli/burn_command.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "backend/dynamic_library.h"
#include "burn/burn.h"
#include "cli/agent_setup.h"
#include "util/atomic_file.h"
#include "util/duration.h"
#include "util/split.h"
#include "util/yaml_reader.h"

extern char** environ;

namespace gpumeter::cli {

namespace {

std::atomic<bool> g_stop{false};

void on_signal(int) { g_stop.store(true); }

// SIGINT and SIGTERM: what stops a burn.
sigset_t stop_signals() {
  sigset_t stops;
  sigemptyset(&stops);
  sigaddset(&stops, SIGINT);
  sigaddset(&stops, SIGTERM);
  return stops;
}

void fail_line(const std::string& message) { fmt::print(stderr, "gpumeter burn: {}\n", message); }

Result<std::vector<int>> parse_gpus(const std::string& text) {
  std::vector<int> out;
  for (std::string_view item : split(text, ',')) {
    auto v = units::parse_unsigned(item);
    if (!v || *v > 255)
      return Error{0, fmt::format("--gpus: expected CUDA device numbers such as 0 or 0,1, got '{}'", text)};
    for (int g : out) {
      if (g == static_cast<int>(*v)) return Error{0, fmt::format("--gpus: GPU {} is named twice", g)};
    }
    out.push_back(static_cast<int>(*v));
  }
  return out;
}

Result<burn::BurnOptions> burn_options(const BurnCommandOptions& o) {
  burn::BurnOptions b;
  auto gpus = parse_gpus(o.gpus);
  if (!gpus) return gpus.error();
  b.gpus = *gpus;
  auto duration = parse_duration(o.duration);
  if (!duration || duration->count() <= 0)
    return Error{0, fmt::format("--duration: expected a duration such as 60s, got '{}'", o.duration)};
  b.duration = *duration;
  auto period = parse_duration(o.period);
  if (!period || *period < std::chrono::milliseconds(10) || *period > std::chrono::seconds(10))
    return Error{0, fmt::format("--period: expected a duration from 10ms to 10s, got '{}'", o.period)};
  b.period = *period;
  if (o.duty > 100) return Error{0, fmt::format("--duty: expected a percentage from 0 to 100, got {}", o.duty)};
  b.duty_percent = o.duty;
  auto memory = units::parse_byte_size(o.memory);
  if (!memory) return Error{0, fmt::format("--memory: expected a size such as 1GiB or 0, got '{}'", o.memory)};
  b.memory_bytes = *memory;
  const char* fault = std::getenv("GPUMETER_TEST_BURN_FAULT");
  if (fault != nullptr && *fault != '\0') {
    if (std::string_view(fault) != "half-duty")
      return Error{0, fmt::format("GPUMETER_TEST_BURN_FAULT: the one planted fault is half-duty, got '{}'", fault)};
    b.half_duty_fault = true;
  }
  return b;
}

nlohmann::json report_json(const burn::BurnReport& r, const burn::BurnOptions& b, const std::string& library) {
  nlohmann::json gpus = nlohmann::json::array();
  for (const burn::GpuBurn& g : r.gpus) {
    gpus.push_back({{"index", g.ordinal},
                    {"uuid", g.uuid},
                    {"name", g.name},
                    {"start_unix", g.start_unix},
                    {"end_unix", g.end_unix},
                    {"seconds", g.end_unix - g.start_unix},
                    {"run_seconds", g.run_seconds},
                    {"busy_seconds", g.busy_seconds},
                    {"duty_achieved_percent", g.run_seconds > 0 ? 100.0 * g.busy_seconds / g.run_seconds : 0.0},
                    {"memory_bytes", g.memory_bytes},
                    {"kernels", g.kernels}});
  }
  return {{"pid", static_cast<long>(::getpid())},
          {"cuda_library", library},
          {"driver_version", r.driver_version},
          {"duty_percent", b.duty_percent},
          {"period_seconds", std::chrono::duration<double>(b.period).count()},
          {"duration_seconds", std::chrono::duration<double>(b.duration).count()},
          {"interrupted", r.interrupted},
          {"gpus", gpus}};
}

// Prints the report and writes --report; the exit code.
int emit(const nlohmann::json& report, const BurnCommandOptions& o, int code) {
  const std::string text = report.dump(2) + "\n";
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
  if (!o.report_file.empty()) {
    if (auto w = write_file_atomic(o.report_file, text, 0644); !w) {
      fail_line(fmt::format("cannot write {}: {}", o.report_file, w.error().message));
      return 1;
    }
  }
  return code;
}

int run_one(const BurnCommandOptions& o, const burn::BurnOptions& b) {
  std::string library = o.cuda_library;
  if (!o.sim_scenario.empty()) {
    // The simulated driver reads its scenario from the environment, as the simulated NVML does.
    setenv("GPUMETER_SIM_SCENARIO", o.sim_scenario.c_str(), 1);
    if (library.empty()) library = bundled_simulator_library("libcuda.so.1");
  }
  auto lib = DynamicLibrary::open_first(burn::cuda_library_candidates(library));
  if (!lib) {
    fail_line(fmt::format("no CUDA driver: {}", lib.error().message));
    return 1;
  }
  auto cuda = burn::CudaSymbols::resolve(**lib);
  if (!cuda) {
    fail_line(cuda.error().message);
    return 1;
  }
  std::mutex progress_mu;
  auto progress = [&](const std::string& line) {
    std::lock_guard lock(progress_mu);
    fmt::print(stderr, "gpumeter burn: {}\n", line);
  };
  fmt::print(stderr, "gpumeter burn: pid {}, GPUs {}, {}% of every {} for {}, {} each, driver {}\n", ::getpid(), o.gpus,
             b.duty_percent, o.period, o.duration, o.memory, (*lib)->path());
  auto report = burn::run_burn(*cuda, b, g_stop, progress);
  if (!report) {
    fail_line(report.error().message);
    return 1;
  }
  return emit(report_json(*report, b, (*lib)->path()), o, report->interrupted ? 130 : 0);
}

// The arguments of a child: the same load, without --as and --report.
std::vector<std::string> child_arguments(const BurnCommandOptions& o) {
  std::vector<std::string> out = {"gpumeter",   "burn",     "--gpus",   o.gpus,
                                  "--duration", o.duration, "--duty",   std::to_string(o.duty),
                                  "--period",   o.period,   "--memory", o.memory};
  if (!o.cuda_library.empty()) out.insert(out.end(), {"--cuda.library", o.cuda_library});
  if (!o.sim_scenario.empty()) out.insert(out.end(), {"--sim.scenario", o.sim_scenario});
  return out;
}

using Env = std::vector<std::pair<std::string, std::string>>;

// "NAME=VALUE[,NAME=VALUE...]", a --as value.
Result<Env> parse_as(const std::string& spec) {
  Env env;
  for (std::string_view item : split(spec, ',')) {
    const std::size_t eq = item.find('=');
    if (eq == 0 || eq == std::string_view::npos)
      return Error{0, fmt::format("--as: expected NAME=VALUE[,NAME=VALUE...], got '{}'", spec)};
    env.emplace_back(item.substr(0, eq), item.substr(eq + 1));
  }
  return env;
}

struct Child {
  pid_t pid = 0;
  int out = -1;  // the read end of its stdout
  Env env;
};

// Starts `gpumeter burn` with our environment plus `env`, its stdout a pipe to us.
Result<Child> spawn_child(const BurnCommandOptions& o, Env env) {
  std::vector<std::string> env_strings, args = child_arguments(o);
  for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp, argv;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return Error{errno, fmt::format("pipe: {}", std::strerror(errno))};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  // The child starts with SIGINT and SIGTERM blocked, and unblocks them once it handles them: a
  // stop passed on while it is still starting waits for it, rather than killing it reportless.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  const sigset_t stops = stop_signals();
  posix_spawnattr_setsigmask(&attr, &stops);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  Child c;
  const int rc = posix_spawn(&c.pid, "/proc/self/exe", &actions, &attr, argv.data(), envp.data());
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    return Error{rc, fmt::format("cannot start a child: {}", std::strerror(rc))};
  }
  c.out = fds[0];
  c.env = std::move(env);
  return c;
}

// Reads a child's report and waits for it; a stop (our SIGINT or SIGTERM) is passed on to it.
// Its report gains the variables it was given and its exit code; `code` the first failure.
nlohmann::json collect_child(Child& c, int& code) {
  std::string text;
  char buf[4096];
  bool passed_on = false;
  for (;;) {
    if (g_stop.load() && !passed_on) {
      ::kill(c.pid, SIGTERM);
      passed_on = true;
    }
    // Waits at most 100 ms at a time, so that a stop that comes just before the wait is passed
    // on without waiting for the child to finish.
    pollfd ready{c.out, POLLIN, 0};
    const int polled = ::poll(&ready, 1, 100);
    if (polled == 0 || (polled < 0 && errno == EINTR)) continue;  // nothing yet, or a signal came
    if (polled < 0) break;
    const ssize_t n = ::read(c.out, buf, sizeof buf);
    if (n == 0) break;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    text.append(buf, static_cast<std::size_t>(n));
  }
  ::close(c.out);
  int status = 0;
  while (::waitpid(c.pid, &status, 0) < 0 && errno == EINTR) {
  }
  const int child_code = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
  nlohmann::json report = nlohmann::json::parse(text, nullptr, false);
  if (report.is_discarded()) report = nlohmann::json::object();
  if (code == 0 && (child_code != 0 || report.empty())) code = child_code != 0 ? child_code : 1;
  nlohmann::json env = nlohmann::json::object();
  for (const auto& [k, v] : c.env) env[k] = v;
  report["env"] = env;
  report["exit_code"] = child_code;
  return report;
}

// One child per --as value, all at once; their reports.
int run_children(const BurnCommandOptions& o) {
  std::vector<Env> envs;
  for (const std::string& spec : o.as) {
    auto env = parse_as(spec);
    if (!env) {
      fail_line(env.error().message);
      return 2;
    }
    envs.push_back(std::move(env).value());
  }
  std::vector<Child> children;
  int code = 0;
  for (Env& env : envs) {
    auto child = spawn_child(o, std::move(env));
    if (!child) {
      fail_line(child.error().message);
      g_stop.store(true);  // the ones already started stop, and report
      code = 1;
      break;
    }
    children.push_back(std::move(child).value());
  }
  nlohmann::json processes = nlohmann::json::array();
  for (Child& c : children) processes.push_back(collect_child(c, code));
  return emit({{"processes", processes}}, o, code);
}

}  // namespace

void setup_burn_command(CLI::App& cmd, BurnCommandOptions& o, int& exit_code) {
  cmd.add_option("--gpus", o.gpus,
                 "CUDA devices to load, comma-separated (CUDA's numbering, which "
                 "CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER change; the report names each by UUID)")
      ->capture_default_str();
  cmd.add_option("--duration", o.duration, "How long to run the load, exactly (Prometheus duration syntax: 90s, 5m)")
      ->capture_default_str();
  cmd.add_option("--duty", o.duty, "Percent of every period the GPU runs a kernel (0 holds memory only)")
      ->capture_default_str();
  cmd.add_option("--period", o.period, "The duty cycle's period (10ms to 10s)")->capture_default_str();
  cmd.add_option("--memory", o.memory, "GPU memory to allocate and hold on each GPU (e.g. 1GiB, 512MiB, 0)")
      ->capture_default_str();
  cmd.add_option("--cuda.library", o.cuda_library,
                 "Path of the CUDA driver library (default: libcuda.so.1, then libcuda.so; no CUDA toolkit needed)");
  cmd.add_option("--sim.scenario", o.sim_scenario,
                 "Run on the simulator's CUDA driver playing this scenario (loads the bundled libcuda.so.1 unless "
                 "--cuda.library is given); a `gpumeter serve --sim.scenario` on the same file sees the load")
      ->check(CLI::ExistingFile);
  cmd.add_option("--report", o.report_file, "Also write the JSON report to this file");
  cmd.add_option("--as", o.as,
                 "Run one child process per value, with these environment variables added (NAME=VALUE[,...]), so "
                 "one node plays several owners; the report lists the children's")
      ->type_name("NAME=VALUE");
  cmd.footer(
      "Loads the GPUs through the CUDA driver API: the kernel is PTX text that the driver compiles, so only\n"
      "the driver is needed. Prints one JSON report on stdout: per GPU, when the context was created and\n"
      "destroyed (start_unix, end_unix: the process is on the GPU in between), the busy loop's length\n"
      "(run_seconds, the --duration asked), the kernels' time (busy_seconds) and the memory held.\n"
      "Progress goes to stderr. SIGINT or SIGTERM stop the load early; the report still comes (exit 130).");
  cmd.callback([&o, &exit_code] {
    auto b = burn_options(o);
    if (!b) {
      fail_line(b.error().message);
      exit_code = 2;
      return;
    }
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    // A child of --as starts with them blocked (spawn_child): handled now, they may come.
    const sigset_t stops = stop_signals();
    pthread_sigmask(SIG_UNBLOCK, &stops, nullptr);
    exit_code = o.as.empty() ? run_one(o, *b) : run_children(o);
  });
}

}  // namespace gpumeter::cli
