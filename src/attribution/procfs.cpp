#include "attribution/procfs.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <unordered_set>

namespace gpumeter {

namespace {

std::string join_path(std::string_view root, std::string_view rest) {
  std::string out(root);
  while (!out.empty() && out.back() == '/') out.pop_back();
  out += '/';
  out += rest;
  return out;
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

Error errno_error(int err, std::string_view what, const std::string& path) {
  return Error{err, fmt::format("{} {}: {}", what, path, std::strerror(err))};
}

// A file read until EOF (procfs files report size 0), or its first `limit` bytes.
Result<std::string> read_small_file(const std::string& path, std::size_t limit = kMaxProcFileBytes) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return errno_error(errno, "opening", path);
  std::string out;
  char buf[4096];
  while (out.size() < limit) {
    ssize_t n = ::read(fd.get(), buf, std::min(sizeof buf, limit - out.size()));
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno_error(errno, "reading", path);
    }
    if (n == 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

template <typename T>
std::optional<T> parse_number(std::string_view s) {
  T v{};
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || p != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

bool process_gone(int err) { return err == ENOENT || err == ESRCH; }

}  // namespace

const std::string* ProcessInfo::env_value(std::string_view name) const {
  for (const auto& [k, v] : env) {
    if (k == name) return &v;
  }
  return nullptr;
}

bool valid_env_name(std::string_view name) {
  if (name.empty()) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' || (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

// ---- PasswdDb ----

PasswdDb::PasswdDb(std::string rootfs_root) : path_(join_path(rootfs_root, "etc/passwd")) {}

std::uint64_t PasswdDb::loads() const {
  std::lock_guard lock(mu_);
  return loads_;
}

void PasswdDb::refresh_locked() {
  Stamp now;
  struct stat st {};
  if (::stat(path_.c_str(), &st) == 0) {
    now.exists = true;
    now.dev = st.st_dev;
    now.ino = st.st_ino;
    now.size = static_cast<std::uint64_t>(st.st_size);
    now.mtime_sec = st.st_mtim.tv_sec;
    now.mtime_nsec = st.st_mtim.tv_nsec;
  }
  if (loaded_ && now == stamp_) return;
  names_.clear();
  loaded_ = true;
  stamp_ = now;
  if (!now.exists) return;
  // A missing or unreadable file leaves every uid unnamed: users then show as numbers.
  auto text = read_small_file(path_, kMaxPasswdBytes);
  if (!text) return;
  ++loads_;
  std::string_view rest = *text;
  // Cut at the limit: the last line may be partial ("alice:x:10" of uid 1000), so it is left out.
  if (text->size() == kMaxPasswdBytes) rest = rest.substr(0, rest.rfind('\n') + 1);
  while (!rest.empty()) {
    std::size_t nl = rest.find('\n');
    std::string_view line = rest.substr(0, nl);
    rest.remove_prefix(nl == std::string_view::npos ? rest.size() : nl + 1);
    // name:password:uid:gid:gecos:home:shell
    if (line.empty() || line[0] == '#' || line[0] == '+' || line[0] == '-') continue;
    std::size_t a = line.find(':');
    if (a == std::string_view::npos || a == 0) continue;
    std::size_t b = line.find(':', a + 1);
    if (b == std::string_view::npos) continue;
    std::size_t c = line.find(':', b + 1);
    std::string_view uid_text = line.substr(b + 1, c == std::string_view::npos ? std::string_view::npos : c - b - 1);
    auto uid = parse_number<unsigned>(uid_text);
    if (!uid) continue;
    names_.emplace(*uid, std::string(line.substr(0, a)));  // the first entry for a uid wins
  }
}

std::optional<std::string> PasswdDb::name_of(unsigned uid) {
  std::lock_guard lock(mu_);
  refresh_locked();
  auto it = names_.find(uid);
  if (it == names_.end()) return std::nullopt;
  return it->second;
}

// ---- single-file parsers ----

Result<StatFields> parse_proc_stat(std::string_view text) {
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so it runs from the
  // first '(' to the last ')'.
  std::size_t open = text.find('(');
  std::size_t close = text.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open) {
    return Error{EINVAL, "no (command) field"};
  }
  StatFields f;
  f.comm = std::string(text.substr(open + 1, close - open - 1));
  std::string_view rest = text.substr(close + 1);
  // Fields from 3 (state) on; start time is field 22.
  int field = 2;
  while (!rest.empty()) {
    while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\n')) rest.remove_prefix(1);
    if (rest.empty()) break;
    std::size_t end = rest.find_first_of(" \n");
    std::string_view token = rest.substr(0, end);
    rest.remove_prefix(end == std::string_view::npos ? rest.size() : end);
    ++field;
    if (field == 22) {
      auto v = parse_number<std::uint64_t>(token);
      if (!v) return Error{EINVAL, "field 22 (start time) is not a number"};
      f.start_time = *v;
      return f;
    }
  }
  return Error{EINVAL, fmt::format("only {} fields, expected at least 22", field)};
}

Result<unsigned> parse_status_uid(std::string_view text) {
  while (!text.empty()) {
    std::size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (line.substr(0, 4) != "Uid:") continue;
    line.remove_prefix(4);
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    std::size_t end = line.find_first_of(" \t");
    auto uid = parse_number<unsigned>(line.substr(0, end));
    if (!uid) return Error{EINVAL, "the Uid: line does not start with a number"};
    return *uid;
  }
  return Error{EINVAL, "no Uid: line"};
}

Result<std::int64_t> parse_boot_time(std::string_view text) {
  while (!text.empty()) {
    std::size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (!line.starts_with("btime ")) continue;
    auto v = parse_number<std::int64_t>(line.substr(6));
    if (!v || *v <= 0) return Error{EINVAL, "the btime line does not hold a positive number"};
    return *v;
  }
  return Error{EINVAL, "no btime line"};
}

// ---- EnvironFilter ----

EnvironFilter::EnvironFilter(const std::vector<std::string>& allow) : allow_(allow), found_(allow.size()) {
  for (const auto& n : allow_) max_name_ = std::max(max_name_, n.size());
}

void EnvironFilter::feed(std::string_view bytes) {
  for (char c : bytes) {
    if (c == '\0') {
      end_entry();
      continue;
    }
    switch (state_) {
      case State::kName:
        if (c == '=') {
          state_ = State::kSkip;
          for (std::size_t i = 0; i < allow_.size(); ++i) {
            if (allow_[i] == name_ && !found_[i]) {
              state_ = State::kKeep;
              matched_ = i;
              break;
            }
          }
        } else if (name_.size() >= max_name_) {
          state_ = State::kSkip;  // longer than any allowed name
        } else {
          name_ += c;
        }
        break;
      case State::kKeep:
        if (value_.size() >= kMaxEnvValueBytes) {
          value_too_long_ = true;
        } else {
          value_ += c;
        }
        break;
      case State::kSkip:
        break;
    }
  }
}

void EnvironFilter::end_entry() {
  if (state_ == State::kKeep && !value_too_long_) found_[matched_] = std::move(value_);
  state_ = State::kName;
  name_.clear();
  value_.clear();
  value_too_long_ = false;
}

void EnvironFilter::cut() {
  state_ = State::kName;
  name_.clear();
  value_.clear();
  value_too_long_ = false;
}

std::vector<std::pair<std::string, std::string>> EnvironFilter::finish() {
  end_entry();
  std::vector<std::pair<std::string, std::string>> out;
  for (std::size_t i = 0; i < allow_.size(); ++i) {
    if (found_[i]) out.emplace_back(allow_[i], std::move(*found_[i]));
  }
  found_.assign(allow_.size(), std::nullopt);
  return out;
}

// ---- ProcfsReader ----

ProcfsReader::ProcfsReader(std::string procfs_root, std::string rootfs_root, std::vector<std::string> env_allow_list)
    : procfs_(std::move(procfs_root)),
      allow_(std::move(env_allow_list)),
      passwd_(std::make_unique<PasswdDb>(std::move(rootfs_root))),
      boot_(std::make_unique<BootTime>()),
      root_(std::make_unique<RootFd>()) {
  // Duplicates would only waste comparisons; drop them keeping the first.
  std::unordered_set<std::string> seen;
  allow_.erase(
      std::remove_if(allow_.begin(), allow_.end(), [&](const std::string& n) { return !seen.insert(n).second; }),
      allow_.end());
}

std::string ProcfsReader::path(unsigned pid, std::string_view file) const {
  return join_path(procfs_, fmt::format("{}/{}", pid, file));
}

Result<std::uint64_t> ProcfsReader::start_time(unsigned pid) const {
  std::string p = path(pid, "stat");
  auto text = read_small_file(p);
  if (!text) return text.error();
  auto f = parse_proc_stat(*text);
  if (!f) return Error{f.error().code, fmt::format("parsing {}: {}", p, f.error().message)};
  return f->start_time;
}

ProcfsReader::RootFd::~RootFd() {
  if (fd >= 0) ::close(fd);
}

Result<EntryId> ProcfsReader::entry_id(unsigned pid) const {
  std::call_once(root_->once, [this] { root_->fd = ::open(procfs_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC); });
  const std::string name = std::to_string(pid);
  struct stat st {};
  const int rc =
      root_->fd >= 0 ? ::fstatat(root_->fd, name.c_str(), &st, 0) : ::stat(join_path(procfs_, name).c_str(), &st);
  if (rc != 0) {
    const int err = errno;
    return Error{err, fmt::format("cannot stat {}: {}", join_path(procfs_, name), std::strerror(err))};
  }
  return EntryId{static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino),
                 static_cast<std::int64_t>(st.st_ctim.tv_sec) * 1'000'000'000 + st.st_ctim.tv_nsec};
}

std::optional<std::int64_t> ProcfsReader::boot_time() const {
  std::call_once(boot_->once, [this] {
    // The interrupt line before btime grows with the machine; a megabyte covers any host.
    constexpr std::size_t kMaxProcStat = 1 << 20;
    const std::string p = join_path(procfs_, "stat");
    Fd fd(::open(p.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) return;
    std::string text;
    char buf[16384];
    while (text.size() < kMaxProcStat) {
      ssize_t n = ::read(fd.get(), buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      text.append(buf, static_cast<std::size_t>(n));
    }
    if (auto b = parse_boot_time(text)) boot_->btime = *b;
  });
  return boot_->btime;
}

Result<ProcessInfo> ProcfsReader::read_once(unsigned pid) const {
  ProcessInfo info;
  info.pid = pid;

  std::string stat_path = path(pid, "stat");
  auto stat_text = read_small_file(stat_path);
  if (!stat_text) return stat_text.error();
  auto stat = parse_proc_stat(*stat_text);
  if (!stat) return Error{stat.error().code, fmt::format("parsing {}: {}", stat_path, stat.error().message)};
  info.comm = std::move(stat->comm);
  info.start_time = stat->start_time;
  if (auto btime = boot_time()) {
    static const long ticks = ::sysconf(_SC_CLK_TCK);
    if (ticks > 0) {
      info.start_unix_us = *btime * 1'000'000 +
                           static_cast<std::int64_t>(stat->start_time * 1'000'000 / static_cast<std::uint64_t>(ticks));
    }
  }

  std::string status_path = path(pid, "status");
  auto status_text = read_small_file(status_path);
  if (!status_text) return status_text.error();
  auto uid = parse_status_uid(*status_text);
  if (!uid) return Error{uid.error().code, fmt::format("parsing {}: {}", status_path, uid.error().message)};
  info.uid = *uid;
  info.user = passwd_->name_of(info.uid).value_or(std::to_string(info.uid));

  std::string cgroup_path = path(pid, "cgroup");
  auto cgroup_text = read_small_file(cgroup_path);
  if (!cgroup_text) return cgroup_text.error();
  info.cgroup = parse_cgroup(*cgroup_text);

  if (!allow_.empty()) {
    // Streamed through a fixed buffer that is wiped afterwards: values of variables outside
    // the allow-list exist only transiently in `buf`.
    std::string environ_path = path(pid, "environ");
    Fd fd(::open(environ_path.c_str(), O_RDONLY | O_CLOEXEC));
    int err = fd.get() < 0 ? errno : 0;
    EnvironFilter filter(allow_);
    char buf[4096];
    std::size_t scanned = 0;
    while (err == 0) {
      // One byte past the limit tells a cut-off environment from one of exactly that size.
      const std::size_t want = std::min(sizeof buf, kMaxEnvironBytes + 1 - scanned);
      ssize_t n = ::read(fd.get(), buf, want);
      if (n < 0) {
        if (errno == EINTR) continue;
        err = errno;
        break;
      }
      if (n == 0) break;
      const auto got = static_cast<std::size_t>(n);
      if (scanned + got > kMaxEnvironBytes) {
        filter.feed(std::string_view(buf, kMaxEnvironBytes - scanned));
        filter.cut();
        break;
      }
      scanned += got;
      filter.feed(std::string_view(buf, got));
    }
    ::explicit_bzero(buf, sizeof buf);
    if (err != 0 && process_gone(err)) return errno_error(err, "reading", environ_path);
    // Any other failure (EACCES for another user's process without CAP_SYS_PTRACE, EPERM)
    // only means the environment is unknown.
    if (err == 0) info.env = filter.finish();
  }
  return info;
}

Result<ProcessInfo> ProcfsReader::read(unsigned pid) const {
  // The files are read one by one; if the pid was reused meanwhile the start time differs
  // afterwards, and the read is repeated once.
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto info = read_once(pid);
    if (!info) return info;
    auto again = start_time(pid);
    if (!again) return again.error();
    if (*again == info->start_time) return info;
  }
  return Error{EAGAIN, fmt::format("process {} was replaced while it was being read", pid)};
}

// ---- ProcessCache ----

ProcessCache::ProcessCache(ProcfsReader reader) : reader_(std::move(reader)) {}

Result<std::shared_ptr<const ProcessInfo>> ProcessCache::lookup(unsigned pid) {
  // The directory's identity first: a process that replaces this one after it is taken gets
  // a directory of its own, so the next lookup sees the change.
  auto id = reader_.entry_id(pid);
  auto forget = [&](Error e) -> Result<std::shared_ptr<const ProcessInfo>> {
    errors_.fetch_add(1, std::memory_order_relaxed);
    std::lock_guard lock(mu_);
    entries_.erase(pid);  // gone or unreadable: whatever was cached is stale
    return e;
  };
  if (!id) return forget(id.error());
  std::shared_ptr<const ProcessInfo> cached;
  {
    std::lock_guard lock(mu_);
    if (auto it = entries_.find(pid); it != entries_.end()) {
      if (it->second.id == *id) {
        hits_.fetch_add(1, std::memory_order_relaxed);
        return it->second.info;
      }
      cached = it->second.info;
    }
  }
  if (cached) {
    auto start = reader_.start_time(pid);
    if (!start) return forget(start.error());
    if (cached->start_time == *start) {
      hits_.fetch_add(1, std::memory_order_relaxed);
      std::lock_guard lock(mu_);
      if (auto it = entries_.find(pid); it != entries_.end() && it->second.info == cached) it->second.id = *id;
      return cached;
    }
  }
  misses_.fetch_add(1, std::memory_order_relaxed);
  auto info = reader_.read(pid);  // outside the lock: a slow read must not block other lookups
  if (!info) return forget(info.error());
  auto entry = std::make_shared<const ProcessInfo>(std::move(*info));
  std::lock_guard lock(mu_);
  entries_[pid] = Entry{*id, entry};
  return entry;
}

std::shared_ptr<const ProcessInfo> ProcessCache::peek(unsigned pid) const {
  std::lock_guard lock(mu_);
  auto it = entries_.find(pid);
  return it == entries_.end() ? nullptr : it->second.info;
}

void ProcessCache::prune(const std::vector<unsigned>& live_pids) {
  std::unordered_set<unsigned> live(live_pids.begin(), live_pids.end());
  std::lock_guard lock(mu_);
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (live.count(it->first) == 0) {
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
}

std::size_t ProcessCache::size() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

}  // namespace gpumeter
