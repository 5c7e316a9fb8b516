#include "cli/slurm_epilog.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "report/http_client.h"
#include "util/duration.h"

extern char** environ;

namespace gpumeter::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct Line {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

// One sample line of the text exposition format: name{label="value",...} value [timestamp].
// Written here because only the few families below are read, from our own agent.
std::optional<Line> parse_line(std::string_view s) {
  Line out;
  std::size_t i = 0;
  while (i < s.size() && s[i] != '{' && s[i] != ' ') ++i;
  out.name = std::string(s.substr(0, i));
  if (i < s.size() && s[i] == '{') {
    ++i;
    while (i < s.size() && s[i] != '}') {
      const std::size_t eq = s.find("=\"", i);
      if (eq == std::string_view::npos) return std::nullopt;
      std::string key(s.substr(i, eq - i)), value;
      for (i = eq + 2; i < s.size() && s[i] != '"'; ++i) {
        if (s[i] == '\\' && i + 1 < s.size()) {
          ++i;
          value += s[i] == 'n' ? '\n' : s[i];
        } else {
          value += s[i];
        }
      }
      if (i >= s.size()) return std::nullopt;
      ++i;  // the closing quote
      if (i < s.size() && s[i] == ',') ++i;
      out.labels.emplace(std::move(key), std::move(value));
    }
    if (i >= s.size()) return std::nullopt;
    ++i;  // '}'
  }
  while (i < s.size() && s[i] == ' ') ++i;
  const std::string number(s.substr(i, s.find(' ', i) - i));
  char* end = nullptr;
  out.value = std::strtod(number.c_str(), &end);
  if (number.empty() || *end != '\0') return std::nullopt;
  return out;
}

constexpr std::string_view kCounters[] = {"gpu_allocated_seconds_total", "gpu_busy_seconds_total",
                                          "gpu_memory_byte_seconds_total", "gpu_attributed_energy_joules_total"};

std::string decimal(double v) { return fmt::format("{:.6f}", v); }

// The agent's exposition, or an error naming what failed.
Result<std::string> scrape(report::HttpClient& client, Clock::time_point deadline) {
  auto answer = client.send({"GET", "/metrics", {{"Accept", "text/plain"}}, ""}, deadline);
  if (!answer) return answer.error();
  if (answer->status != 200) return Error{1, fmt::format("GET /metrics answered HTTP {}", answer->status)};
  return std::move(answer->body);
}

// Calls `f` with each line of `text`; stops at the first error `f` returns.
template <typename F>
Result<void> for_each_line(std::string_view text, F f) {
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    if (auto ok = f(text.substr(start, end - start)); !ok) return ok;
    start = end + 1;
  }
  return {};
}

// Sum of the ledger's covered seconds of `gpus` (every GPU when empty): it grows each time the
// ledger integrates them.
double covered(std::string_view exposition, const std::set<std::string>& gpus) {
  double sum = 0;
  (void)for_each_line(exposition, [&](std::string_view line) -> Result<void> {
    if (line.rfind("gpumeter_ledger_covered_seconds_total", 0) != 0) return {};
    auto l = parse_line(line);
    if (l && (gpus.empty() || gpus.count(l->labels["uuid"]))) sum += l->value;
    return {};
  });
  return sum;
}

// Runs argv with no shell, killed at the deadline; its exit status, or an error.
Result<int> run_until(const std::vector<std::string>& args, Clock::time_point deadline) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  const int rc = posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return Error{1, fmt::format("cannot run {}: {}", args[0], std::strerror(rc))};
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (Clock::now() >= deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return Error{1, fmt::format("{} did not finish within the deadline; killed", args[0])};
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

void log_line(std::string_view job, std::string_view what) {
  std::fprintf(stderr, "gpumeter slurm epilog: job %.*s: %.*s\n", static_cast<int>(job.size()), job.data(),
               static_cast<int>(what.size()), what.data());
}

}  // namespace

Result<JobSummary> summarize_job(std::string_view exposition, std::string_view job, const pricing::Pricing* pricing,
                                 double now) {
  JobSummary s;
  std::map<std::string, std::string> model;  // uuid -> gpu_info's model
  std::map<std::string, std::array<double, 4>> per_gpu;
  auto read = for_each_line(exposition, [&](std::string_view text) -> Result<void> {
    if (text.empty() || text.front() == '#') return {};
    int field = -1;
    for (int f = 0; f < 4; ++f) {
      if (text.rfind(kCounters[f], 0) == 0 && text.size() > kCounters[f].size() && text[kCounters[f].size()] == '{') {
        field = f;
      }
    }
    const bool info = text.rfind("gpu_info{", 0) == 0;
    if (field < 0 && !info) return {};
    auto line = parse_line(text);
    if (!line) return Error{1, fmt::format("the agent's /metrics has a line that cannot be read: {}", text)};
    if (info) {
      model[line->labels["uuid"]] = line->labels["model"];
    } else if (line->labels["hpc_job"] == job) {
      per_gpu[line->labels["uuid"]][static_cast<std::size_t>(field)] += line->value;
    }
    return {};
  });
  if (!read) return read.error();
  double cost = 0;
  bool priced = pricing != nullptr;
  for (const auto& [uuid, v] : per_gpu) {
    s.gpus.insert(uuid);
    s.gpu_seconds += v[0];
    s.busy_seconds += v[1];
    s.memory_byte_seconds += v[2];
    s.energy_joules += v[3];
    if (!priced) continue;
    auto price = pricing->gpu_price(model[uuid], now);
    if (!price) {
      priced = false;
      continue;
    }
    auto energy = pricing->energy_price(now);
    cost += v[0] / 3600 * price->gpu_hour + v[1] / 3600 * price->busy_gpu_hour +
            (energy ? v[3] / 3.6e6 * energy->kwh * energy->pue : 0.0);
  }
  if (priced) {
    s.cost = cost;
    s.currency = pricing->currency;
  }
  return s;
}

std::string admin_comment(const JobSummary& s) {
  std::string out =
      fmt::format("gpumeter=1;gpus={};gpu_seconds={};busy_seconds={};memory_gib_hours={};energy_kwh={}", s.gpus.size(),
                  decimal(s.gpu_seconds), decimal(s.busy_seconds),
                  decimal(s.memory_byte_seconds / (1024.0 * 1024 * 1024) / 3600), decimal(s.energy_joules / 3.6e6));
  if (s.cost) out += fmt::format(";cost={};currency={}", decimal(*s.cost), s.currency);
  // sacctmgr lowercases the value (seen on Slurm 22.05): written so, it reads back the same.
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

void setup_slurm_command(CLI::App& cmd, SlurmEpilogOptions& o, int& exit_code) {
  cmd.require_subcommand(1);
  auto* epilog = cmd.add_subcommand(
      "epilog",
      "Run from Slurm's node Epilog: write the finished job's GPU use on this node into its accounting\n"
      "record (AdminComment, through sacctmgr): GPU-seconds, busy seconds, memory, energy and, with\n"
      "--pricing, cost at the prices in force. Reads the local agent's /metrics. Never fails the job:\n"
      "errors are one line on stderr and exit 0, all within --deadline. See docs/slurm.md.");
  epilog->add_option("--job", o.job, "Job id (default: $SLURM_JOB_ID)");
  epilog->add_option("--agent", o.agent, "host:port of the node's gpumeter agent")->capture_default_str();
  epilog->add_option("--pricing", o.pricing_file, "Pricing file, for the cost (optional)");
  epilog->add_option("--deadline", o.deadline, "Everything, sacctmgr included, is given up after this")
      ->capture_default_str();
  epilog->add_option("--sacctmgr", o.sacctmgr, "The sacctmgr to run")->capture_default_str();
  epilog->add_flag("--dry-run", o.dry_run, "Print the comment on stdout instead of writing it");
  epilog->callback([&o, &exit_code] { exit_code = run_slurm_epilog(o); });
}

int run_slurm_epilog(const SlurmEpilogOptions& o) {
  const auto started = Clock::now();
  std::string job = o.job;
  if (job.empty()) {
    const char* env = std::getenv("SLURM_JOB_ID");
    job = env ? env : "";
  }
  if (job.empty() || job.find_first_not_of("0123456789_+") != std::string::npos) {
    log_line(job, "no job id (set --job or SLURM_JOB_ID to digits); nothing written");
    return 0;
  }
  auto deadline_ms = parse_duration(o.deadline);
  const auto deadline = started + (deadline_ms ? *deadline_ms : std::chrono::milliseconds(10000));
  pricing::Pricing prices;
  const pricing::Pricing* priced = nullptr;
  if (!o.pricing_file.empty()) {
    auto loaded = pricing::load_pricing(o.pricing_file);
    if (!loaded) {
      log_line(job, loaded.error().message + "; writing the summary without cost");
    } else {
      prices = std::move(*loaded);
      priced = &prices;
    }
  }
  report::HttpClient client(report::split_authority(o.agent, false), std::chrono::milliseconds(2000), 64u << 20);
  // The ledger integrates the job's last seconds at its next read of the GPUs: wait until the
  // covered seconds of the job's GPUs have grown once after the epilog began.
  auto first = scrape(client, deadline);
  if (!first) {
    log_line(job, fmt::format("cannot read the agent at {}: {}; nothing written", o.agent, first.error().message));
    return 0;
  }
  auto summary = summarize_job(*first, job, priced, std::time(nullptr));
  if (!summary) {
    log_line(job, summary.error().message + "; nothing written");
    return 0;
  }
  if (summary->gpus.empty()) {
    // A job with no GPU use here: nothing to say, and another node's summary stays.
    log_line(job, "no GPU use on this node in the agent's ledger; nothing written");
    return 0;
  }
  const double before = covered(*first, summary->gpus);
  bool settled = false;
  while (Clock::now() + std::chrono::milliseconds(1500) < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    auto next = scrape(client, deadline);
    if (!next) break;
    if (covered(*next, summary->gpus) > before) {
      if (auto s = summarize_job(*next, job, priced, std::time(nullptr))) summary = std::move(s);
      settled = true;
      break;
    }
  }
  if (!settled) log_line(job, "the agent did not integrate the GPUs again before the deadline; its last figures");
  const std::string comment = admin_comment(*summary);
  if (o.dry_run) {
    std::printf("%s\n", comment.c_str());
    return 0;
  }
  auto rc = run_until({o.sacctmgr, "-i", "modify", "job", "where", "jobid=" + job, "set", "AdminComment=" + comment},
                      deadline);
  if (!rc) {
    log_line(job, rc.error().message);
  } else if (*rc != 0) {
    log_line(job, fmt::format("{} exited {}; the comment was {}", o.sacctmgr, *rc, comment));
  } else {
    log_line(job, "wrote " + comment);
  }
  return 0;
}

}  // namespace gpumeter::cli
