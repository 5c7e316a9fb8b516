#include "attribution/slurm_cgroups.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "attribution/procfs.h"

namespace gpumeter {

namespace {

constexpr std::string_view kSourceV1Devices = "cgroup-v1-devices";
constexpr std::string_view kSourceV1Environ = "cgroup-v1-environ";
constexpr std::string_view kSourceV2Environ = "cgroup-v2-environ";

// The variables this source reads, when the allow-list has them.
constexpr std::string_view kJobId = "SLURM_JOB_ID";
constexpr std::string_view kJobGpus = "SLURM_JOB_GPUS";
constexpr std::string_view kStepGpus = "SLURM_STEP_GPUS";
constexpr std::string_view kCudaVisible = "CUDA_VISIBLE_DEVICES";

// Below a job: step_<s>/user/task_<t> on v2, step_<s>/task_<t> on v1.
constexpr int kMaxJobDepth = 4;
// Entries of one directory looked at; a Slurm root, a slice or a job never has this many.
constexpr std::size_t kMaxDirEntries = 65536;

bool digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool ends_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}

// The file or directory is gone (a job ended, a process exited) or is not what was expected.
bool absent(int err) { return slurm_cgroup_entry_gone(err); }

Error io_error(int err, std::string_view what, const std::string& path) {
  return Error{err, fmt::format("Slurm cgroups: {} {}: {}", what, path, std::strerror(err))};
}

// The names of the subdirectories of `path`, never through a symbolic link; nullopt when the
// directory does not exist (any more).
Result<std::optional<std::vector<std::string>>> list_dirs(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (absent(errno)) return std::optional<std::vector<std::string>>();
    return io_error(errno, "cannot open", path);
  }
  DIR* dir = ::fdopendir(fd);
  if (dir == nullptr) {
    const int err = errno;
    ::close(fd);
    return io_error(err, "cannot list", path);
  }
  std::vector<std::string> names;
  std::size_t seen = 0;
  for (;;) {
    errno = 0;
    const dirent* e = ::readdir(dir);
    if (e == nullptr) {
      const int err = errno;
      ::closedir(dir);
      if (err == 0) break;
      if (absent(err)) return std::optional<std::vector<std::string>>();
      return io_error(err, "cannot list", path);
    }
    if (++seen > kMaxDirEntries) {
      ::closedir(dir);
      break;
    }
    std::string_view name = e->d_name;
    if (name == "." || name == "..") continue;
    bool is_dir = e->d_type == DT_DIR;
    if (e->d_type == DT_UNKNOWN) {
      struct stat st {};
      is_dir = ::fstatat(::dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
    }
    if (is_dir) names.emplace_back(name);
  }
  return std::optional<std::vector<std::string>>(std::move(names));
}

// Up to `max` bytes of a file, never through a symbolic link (and never waiting on a FIFO);
// nullopt when it does not exist.
Result<std::optional<std::string>> read_file(const std::string& path, std::size_t max) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    if (absent(errno)) return std::optional<std::string>();
    return io_error(errno, "cannot open", path);
  }
  std::string text;
  char buf[16384];
  while (text.size() < max) {
    const ssize_t n = ::read(fd, buf, std::min(sizeof buf, max - text.size()));
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) break;  // a FIFO with a writer and nothing written
      const int err = errno;
      ::close(fd);
      if (absent(err)) return std::optional<std::string>();
      return io_error(err, "cannot read", path);
    }
    if (n == 0) break;
    text.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return std::optional<std::string>(std::move(text));
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  while (true) {
    const std::size_t at = s.find(sep);
    out.push_back(s.substr(0, at));
    if (at == std::string_view::npos) break;
    s.remove_prefix(at + 1);
  }
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n'))
    s.remove_suffix(1);
  return s;
}

void add_unique(std::vector<std::string>& out, std::string_view v) {
  if (std::find(out.begin(), out.end(), v) == out.end()) out.emplace_back(v);
}

// Numeric job ids in numeric order, then anything else (an unmapped SLUID) in byte order.
bool job_id_less(const std::string& a, const std::string& b) {
  const bool da = digits(a), db = digits(b);
  if (da != db) return da;
  if (da && a.size() != b.size()) return a.size() < b.size();
  return a < b;
}

// Steps in the order their processes are read: the batch and interactive steps carry
// SLURM_JOB_GPUS, numbered steps SLURM_STEP_GPUS, the extern step usually nothing.
int step_rank(std::string_view name) {
  if (name == "step_batch") return 0;
  if (name == "step_interactive") return 1;
  if (starts_with(name, "step_") && digits(name.substr(5))) return 2;
  if (name == "step_extern") return 4;
  return 3;
}

bool uuid_entry(std::string_view e) {
  if (!starts_with(e, "GPU-") && !starts_with(e, "MIG-")) return false;
  const std::string_view tail = e.substr(4);
  return !tail.empty() && tail.size() <= 128 && std::all_of(tail.begin(), tail.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || c == '/';
  });
}

// What the environment of a job's processes said.
struct EnvFindings {
  std::string job_id;  // SLURM_JOB_ID, first seen
  bool have_job_gpus = false;
  std::vector<std::string> job_gpus;    // SLURM_JOB_GPUS, first seen
  std::vector<std::string> step_gpus;   // SLURM_STEP_GPUS of every step read
  std::vector<std::string> cuda_uuids;  // CUDA_VISIBLE_DEVICES holding UUIDs

  std::vector<std::string> gpus() const {
    if (have_job_gpus) return job_gpus;
    if (!step_gpus.empty()) return step_gpus;
    return cuda_uuids;
  }
};

class Reader {
 public:
  explicit Reader(const SlurmCgroupOptions& o) : o_(o) {
    for (std::string_view name : {kJobId, kJobGpus, kStepGpus, kCudaVisible}) {
      if (std::find(o.environment.begin(), o.environment.end(), name) != o.environment.end()) {
        allow_.emplace_back(name);
      }
    }
  }

  Result<SlurmJobsRead> run() {
    if (auto r = read_v1(); !r) return r.error();
    if (auto r = read_v2(); !r) return r.error();
    std::stable_sort(jobs_.begin(), jobs_.end(),
                     [](const SlurmJobGpus& a, const SlurmJobGpus& b) { return job_id_less(a.job_id, b.job_id); });
    // The same job under two roots (two slurmd on one host): one entry with every GPU.
    for (SlurmJobGpus& j : jobs_) {
      if (!read_.jobs.empty() && read_.jobs.back().job_id == j.job_id) {
        for (const std::string& g : j.gpus) add_unique(read_.jobs.back().gpus, g);
        continue;
      }
      read_.jobs.push_back(std::move(j));
    }
    return std::move(read_);
  }

 private:
  // Whether one more job directory may be read; counts it left out when not.
  bool may_read_job() {
    if (job_dirs_read_ < kMaxSlurmJobDirs) {
      ++job_dirs_read_;
      return true;
    }
    ++read_.jobs_left_out;
    return false;
  }

  // Keeps a job that holds a GPU, within the bound.
  void add(SlurmJobGpus job) {
    if (job.gpus.empty()) return;
    if (jobs_.size() >= kMaxSlurmJobs) {
      ++read_.jobs_left_out;
      return;
    }
    jobs_.push_back(std::move(job));
  }

  // A job that cannot be read is skipped alone: the others' allocations stay known.
  void unreadable(const Error& e) {
    if (read_.jobs_unreadable++ == 0) read_.unreadable_error = e.message;
  }

  // <root>/devices/slurm[_<node>]/uid_<N>/job_<M>/devices.list
  Result<void> read_v1() {
    const std::string devices = o_.cgroup_root + "/devices";
    auto roots = list_dirs(devices);
    if (!roots) return roots.error();
    if (!*roots) return {};
    std::sort((*roots)->begin(), (*roots)->end());
    for (const std::string& slurm : **roots) {
      if (slurm != "slurm" && !starts_with(slurm, "slurm_")) continue;
      const std::string slurm_path = devices + "/" + slurm;
      auto uids = list_dirs(slurm_path);
      if (!uids) return uids.error();
      if (!*uids) continue;
      std::vector<std::pair<std::string, std::string>> jobs;  // (job id, uid)
      for (const std::string& u : **uids) {
        if (!starts_with(u, "uid_") || !digits(std::string_view(u).substr(4))) continue;
        auto names = list_dirs(slurm_path + "/" + u);
        if (!names) {
          unreadable(names.error());
          continue;
        }
        if (!*names) continue;
        for (const std::string& j : **names) {
          if (starts_with(j, "job_") && digits(std::string_view(j).substr(4)))
            jobs.emplace_back(j.substr(4), u.substr(4));
        }
      }
      std::sort(jobs.begin(), jobs.end(), [](const auto& a, const auto& b) { return job_id_less(a.first, b.first); });
      for (const auto& [id, uid] : jobs) {
        if (!may_read_job()) continue;
        const std::string job_path = fmt::format("{}/uid_{}/job_{}", slurm_path, uid, id);
        auto list = read_file(job_path + "/devices.list", kMaxSlurmCgroupFileBytes);
        if (!list) {
          unreadable(list.error());
          continue;
        }
        if (!*list) continue;  // the job ended since the listing
        DevicesListGpus parsed = parse_devices_list(**list);
        SlurmJobGpus job{id, uid, std::move(parsed.gpus), std::string(kSourceV1Devices)};
        if (parsed.all) {
          auto env = read_job_environment(job_path);
          if (!env) {
            unreadable(env.error());
            continue;
          }
          if (!*env) continue;
          job.gpus = (*env)->gpus();
          job.source = std::string(kSourceV1Environ);
        }
        add(std::move(job));
      }
    }
    return {};
  }

  // <root>/<slice>/[<node>_]slurmstepd.scope/{job_<M>,<SLUID>}/...
  Result<void> read_v2() {
    auto top = list_dirs(o_.cgroup_root);
    if (!top) return top.error();
    if (!*top) return {};
    std::sort((*top)->begin(), (*top)->end());
    for (const std::string& slice : **top) {
      if (!ends_with(slice, ".slice")) continue;
      const std::string slice_path = o_.cgroup_root + "/" + slice;
      auto scopes = list_dirs(slice_path);
      if (!scopes) return scopes.error();
      if (!*scopes) continue;
      std::sort((*scopes)->begin(), (*scopes)->end());
      for (const std::string& scope : **scopes) {
        if (scope != "slurmstepd.scope" && !ends_with(scope, "_slurmstepd.scope")) continue;
        if (auto r = read_v2_scope(slice_path + "/" + scope); !r) return r;
      }
    }
    return {};
  }

  Result<void> read_v2_scope(const std::string& scope_path) {
    auto names = list_dirs(scope_path);
    if (!names) return names.error();
    if (!*names) return {};
    struct Dir {
      std::string name, id;  // id: the numeric job id, or the SLUID until the environment maps it
      bool sluid;
    };
    std::vector<Dir> dirs;
    for (const std::string& n : **names) {
      if (starts_with(n, "job_") && digits(std::string_view(n).substr(4))) {
        dirs.push_back({n, n.substr(4), false});
      } else if (is_sluid(n)) {
        dirs.push_back({n, n, true});
      }
    }
    std::sort(dirs.begin(), dirs.end(), [](const Dir& a, const Dir& b) { return job_id_less(a.id, b.id); });
    for (const Dir& d : dirs) {
      if (!may_read_job()) continue;
      auto env = read_job_environment(scope_path + "/" + d.name, /*need_job_id=*/d.sluid);
      if (!env) {
        unreadable(env.error());
        continue;
      }
      if (!*env) continue;  // the job ended since the listing
      std::string id = d.id;
      if (d.sluid && !(*env)->job_id.empty()) id = (*env)->job_id;
      add(SlurmJobGpus{std::move(id), "", (*env)->gpus(), std::string(kSourceV2Environ)});
    }
    return {};
  }

  // The environment of the processes in a job's cgroups, steps with SLURM_JOB_GPUS first;
  // nullopt when the job's directory is gone.
  Result<std::optional<EnvFindings>> read_job_environment(const std::string& job_path, bool need_job_id = false) {
    EnvFindings found;
    std::deque<std::pair<std::string, int>> queue{{job_path, 0}};
    std::size_t walked = 0, pids_read = 0;
    bool first = true;
    auto done = [&] { return found.have_job_gpus && (!need_job_id || !found.job_id.empty()); };
    while (!queue.empty() && walked < kMaxSlurmJobCgroups && !done()) {
      auto [path, depth] = std::move(queue.front());
      queue.pop_front();
      ++walked;
      auto subdirs = list_dirs(path);
      if (!subdirs) return subdirs.error();
      if (!*subdirs) {
        if (first) return std::optional<EnvFindings>();
        continue;
      }
      first = false;
      if (!allow_.empty()) {
        auto procs = read_file(path + "/cgroup.procs", kMaxSlurmCgroupFileBytes);
        if (!procs) return procs.error();
        if (*procs) {
          for (std::string_view line : split(**procs, '\n')) {
            line = trim(line);
            if (!digits(line) || line.size() > 9) continue;
            if (pids_read >= kMaxSlurmPidsPerJob || pids_total_ >= kMaxSlurmPids || done()) break;
            ++pids_read;
            ++pids_total_;
            read_process(line, found);
          }
        }
      }
      if (depth + 1 > kMaxJobDepth) continue;
      std::vector<std::string> next = std::move(**subdirs);
      std::sort(next.begin(), next.end(), [](const std::string& a, const std::string& b) {
        const int ra = step_rank(a), rb = step_rank(b);
        if (ra != rb) return ra < rb;
        if (ra == 2 && a.size() != b.size()) return a.size() < b.size();
        return a < b;
      });
      for (std::string& n : next) {
        // slurmstepd's own cgroup (v2): its environment is the daemon's, not the job's.
        if (n == "slurm" && depth == 1) continue;
        queue.emplace_back(path + "/" + n, depth + 1);
      }
    }
    return std::optional<EnvFindings>(std::move(found));
  }

  // A process that cannot be read (gone, or another user's without the privilege) adds nothing.
  void read_process(std::string_view pid, EnvFindings& found) {
    const std::string path = fmt::format("{}/{}/environ", o_.procfs, pid);
    int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) return;
    EnvironFilter filter(allow_);
    std::size_t total = 0;
    char buf[16384];
    bool cut = false;
    for (;;) {
      if (total >= kMaxEnvironBytes) {
        cut = true;
        break;
      }
      const ssize_t n = ::read(fd, buf, std::min(sizeof buf, kMaxEnvironBytes - total));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      total += static_cast<std::size_t>(n);
      filter.feed(std::string_view(buf, static_cast<std::size_t>(n)));
    }
    ::close(fd);
    if (cut) filter.cut();
    for (const auto& [name, value] : filter.finish()) {
      if (name == kJobId) {
        if (found.job_id.empty() && digits(value) && value.size() <= 20) found.job_id = value;
      } else if (name == kJobGpus) {
        if (!found.have_job_gpus) {
          auto gpus = parse_gpu_list(value, /*indices=*/true);
          if (!gpus.empty()) {
            found.have_job_gpus = true;
            found.job_gpus = std::move(gpus);
          }
        }
      } else if (name == kStepGpus) {
        for (const std::string& g : parse_gpu_list(value, true)) add_unique(found.step_gpus, g);
      } else if (name == kCudaVisible) {
        // Only UUIDs: indices may be renumbered inside the job's device cgroup.
        for (const std::string& g : parse_gpu_list(value, false)) add_unique(found.cuda_uuids, g);
      }
    }
  }

  const SlurmCgroupOptions& o_;
  std::vector<std::string> allow_;
  std::vector<SlurmJobGpus> jobs_;
  SlurmJobsRead read_;
  std::size_t job_dirs_read_ = 0;
  std::size_t pids_total_ = 0;
};

}  // namespace

DevicesListGpus parse_devices_list(std::string_view text) {
  DevicesListGpus out;
  std::vector<unsigned> minors;
  for (std::string_view line : split(text, '\n')) {
    line = trim(line);
    // "<type> <major>:<minor> <access>", type a, b or c; major and minor a number or *.
    auto fields = split(line, ' ');
    if (fields.size() != 3 || fields[0].size() != 1) continue;
    const char type = fields[0][0];
    const std::size_t colon = fields[1].find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view major = fields[1].substr(0, colon), minor = fields[1].substr(colon + 1);
    const std::string_view access = fields[2];
    if (access.empty() || access.size() > 3 ||
        !std::all_of(access.begin(), access.end(), [](char c) { return c == 'r' || c == 'w' || c == 'm'; })) {
      continue;
    }
    const bool usable = access.find('r') != std::string_view::npos || access.find('w') != std::string_view::npos;
    if ((major != "*" && !digits(major)) || (minor != "*" && !digits(minor))) continue;
    if (type == 'a') {
      out.all = true;
      continue;
    }
    if (type != 'c' || !usable) continue;
    if (major == "*") {
      out.all = true;
      continue;
    }
    if (major.size() > 9 || std::stoul(std::string(major)) != kNvidiaMajor) continue;
    if (minor == "*") {
      out.all = true;
      continue;
    }
    if (minor.size() > 9) continue;
    const unsigned m = static_cast<unsigned>(std::stoul(std::string(minor)));
    if (m >= 254) continue;  // nvidia-modeset, nvidiactl
    if (std::find(minors.begin(), minors.end(), m) == minors.end()) minors.push_back(m);
  }
  std::sort(minors.begin(), minors.end());
  for (unsigned m : minors) out.gpus.push_back(std::to_string(m));
  return out;
}

bool is_sluid(std::string_view name) {
  if (name.size() != 14 || name[0] != 's') return false;
  return std::all_of(name.begin() + 1, name.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z' && c != 'I' && c != 'L' && c != 'O' && c != 'U');
  });
}

std::vector<std::string> parse_gpu_list(std::string_view value, bool indices) {
  std::vector<std::string> out;
  value = trim(value);
  if (value.empty()) return out;
  for (std::string_view e : split(value, ',')) {
    e = trim(e);
    const bool ok = indices ? digits(e) && e.size() <= 4 : uuid_entry(e);
    if (!ok) return {};
    add_unique(out, e);
  }
  return out;
}

bool slurm_cgroup_entry_gone(int err) {
  return err == ENOENT || err == ENOTDIR || err == ESRCH || err == ELOOP || err == ENODEV;
}

Result<SlurmJobsRead> read_slurm_job_gpus(const SlurmCgroupOptions& options) { return Reader(options).run(); }

}  // namespace gpumeter
