#pragma once
// Who runs a process, read from procfs: command, real uid and user name, cgroup, and the
// values of allow-listed environment variables. Values of other variables are never kept,
// logged or put in an error message. ProcessCache keys what it read by (pid, start time),
// so a pid the kernel hands to a new process is read afresh, and checks that a cached pid is
// still the same process by the identity of its /proc/<pid> directory: one stat() a round.

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "attribution/cgroup.h"
#include "util/result.h"

namespace gpumeter {

struct ProcessInfo {
  unsigned pid = 0;
  std::uint64_t start_time = 0;  // clock ticks after boot, field 22 of /proc/<pid>/stat
  // When the process started, on the system clock (µs since the Unix epoch): btime from
  // /proc/stat plus start_time. Unset when /proc/stat gives no btime. btime is whole seconds,
  // so on a real host this can be off by up to a second, the same for every process.
  std::optional<std::int64_t> start_unix_us;
  std::string comm;
  unsigned uid = 0;  // real uid
  std::string user;  // passwd name, or the decimal uid
  CgroupInfo cgroup;
  std::vector<std::pair<std::string, std::string>> env;  // allow-listed names only, in allow-list order

  // The value of an allow-listed variable the process has, or nullptr.
  const std::string* env_value(std::string_view name) const;
};

// The identity of one /proc/<pid> directory: device, inode and change time. procfs makes a
// new inode, with its creation time, each time it instantiates a process's directory, and
// never reuses one for another process: while the identity is unchanged, so is the process.
// A changed identity proves nothing either way (the kernel may re-instantiate the directory of
// a process that lives on), so the start time decides then.
struct EntryId {
  std::uint64_t dev = 0, ino = 0;
  std::int64_t ctime_ns = 0;
  bool operator==(const EntryId&) const = default;
};

// Files of a process (stat, status, cgroup) are read up to this size. The kernel keeps them far
// smaller: comm is at most 15 bytes, a cgroup path at most 4 KiB per hierarchy.
inline constexpr std::size_t kMaxProcFileBytes = 64 * 1024;
// /etc/passwd is read up to this size (100,000 users take about 6 MiB); users past it show as
// numbers.
inline constexpr std::size_t kMaxPasswdBytes = 16 << 20;

// <rootfs>/etc/passwd, read again whenever the file's identity, size or mtime changes (one
// stat() per lookup; lookups happen once per new process). Thread-safe.
class PasswdDb {
 public:
  explicit PasswdDb(std::string rootfs_root = "/");
  PasswdDb(const PasswdDb&) = delete;
  PasswdDb& operator=(const PasswdDb&) = delete;

  std::optional<std::string> name_of(unsigned uid);
  std::uint64_t loads() const;  // how many times the file was parsed

 private:
  struct Stamp {
    bool exists = false;
    std::uint64_t dev = 0, ino = 0, size = 0;
    std::int64_t mtime_sec = 0, mtime_nsec = 0;
    bool operator==(const Stamp&) const = default;
  };
  void refresh_locked();

  std::string path_;
  mutable std::mutex mu_;
  bool loaded_ = false;
  Stamp stamp_;
  std::unordered_map<unsigned, std::string> names_;
  std::uint64_t loads_ = 0;
};

// Environment variable names: [A-Za-z_][A-Za-z0-9_]*.
bool valid_env_name(std::string_view name);

// Allow-listed values longer than this are dropped whole (a cut-off id would be wrong).
inline constexpr std::size_t kMaxEnvValueBytes = 4096;
// At most this much of a process's environ is scanned for allow-listed names; variables
// after it are unknown. Linux lets execve() pass up to 6 MiB of arguments and environment
// (3/4 of the 8 MiB stack limit it assumes), 2 MiB under the default 8 MiB stack limit; real
// environments, HPC module systems included, take kilobytes to a few hundred.
inline constexpr std::size_t kMaxEnvironBytes = 1 << 20;

class ProcfsReader {
 public:
  // procfs_root: the /proc mount ("/proc", or a test fixture's proc folder). rootfs_root:
  // where the host's / is ("/", or "/host" in a container); /etc/passwd is read from there.
  ProcfsReader(std::string procfs_root, std::string rootfs_root, std::vector<std::string> env_allow_list);

  Result<ProcessInfo> read(unsigned pid) const;
  Result<std::uint64_t> start_time(unsigned pid) const;
  // The identity of the /proc/<pid> directory: one stat(), no file opened.
  Result<EntryId> entry_id(unsigned pid) const;
  // btime from <procfs>/stat, read once and kept (it is fixed for a boot); unset if absent.
  std::optional<std::int64_t> boot_time() const;

  const std::vector<std::string>& env_allow_list() const { return allow_; }

 private:
  Result<ProcessInfo> read_once(unsigned pid) const;
  std::string path(unsigned pid, std::string_view file) const;

  std::string procfs_;
  std::vector<std::string> allow_;
  std::unique_ptr<PasswdDb> passwd_;
  struct BootTime {
    std::once_flag once;
    std::optional<std::int64_t> btime;
  };
  std::unique_ptr<BootTime> boot_;
  // The procfs root, opened once (O_PATH): a process's directory is then one name to look up,
  // not the whole path. -1 when it cannot be opened; paths are used then.
  struct RootFd {
    std::once_flag once;
    int fd = -1;
    ~RootFd();
  };
  std::unique_ptr<RootFd> root_;
};

// Parsers of single procfs files, exposed for tests. Their errors never quote the input.
struct StatFields {
  std::string comm;
  std::uint64_t start_time = 0;
};
Result<StatFields> parse_proc_stat(std::string_view text);
Result<unsigned> parse_status_uid(std::string_view text);
// The `btime` line of /proc/stat: the boot time in seconds since the Unix epoch.
Result<std::int64_t> parse_boot_time(std::string_view proc_stat_text);

// Reads NUL-separated NAME=value entries fed in arbitrary pieces and keeps only the names
// in `allow`. A value is copied only after its name has been matched, so the bytes of other
// variables are never stored.
class EnvironFilter {
 public:
  explicit EnvironFilter(const std::vector<std::string>& allow);
  void feed(std::string_view bytes);
  // Ends the last entry (environ normally ends with a NUL) and returns the kept entries in
  // allow-list order; the first occurrence of a name wins, as with getenv().
  std::vector<std::pair<std::string, std::string>> finish();
  // The input was cut short (see kMaxEnvironBytes): forgets the entry in progress, whose value
  // may be incomplete. finish() then returns the entries before it.
  void cut();

 private:
  void end_entry();

  const std::vector<std::string>& allow_;
  std::size_t max_name_ = 0;
  enum class State { kName, kKeep, kSkip } state_ = State::kName;
  std::string name_;
  std::string value_;
  bool value_too_long_ = false;
  std::size_t matched_ = 0;
  std::vector<std::optional<std::string>> found_;
};

// Process information by pid, read once per (pid, start time). Thread-safe.
class ProcessCache {
 public:
  explicit ProcessCache(ProcfsReader reader);

  // The cached entry while the pid's directory is the one it was read from (one stat());
  // else re-reads the start time (one small read) and keeps the entry when it matches;
  // otherwise reads the process in full. A pid whose start time changed is a new process.
  Result<std::shared_ptr<const ProcessInfo>> lookup(unsigned pid);
  // What the last lookup of `pid` read, without touching procfs; null if none.
  std::shared_ptr<const ProcessInfo> peek(unsigned pid) const;
  // Forgets every pid not in `live_pids`.
  void prune(const std::vector<unsigned>& live_pids);

  std::size_t size() const;
  std::uint64_t hits() const { return hits_.load(std::memory_order_relaxed); }
  std::uint64_t misses() const { return misses_.load(std::memory_order_relaxed); }
  std::uint64_t errors() const { return errors_.load(std::memory_order_relaxed); }
  const ProcfsReader& reader() const { return reader_; }

 private:
  ProcfsReader reader_;
  mutable std::mutex mu_;
  struct Entry {
    EntryId id;
    std::shared_ptr<const ProcessInfo> info;
  };
  std::unordered_map<unsigned, Entry> entries_;
  std::atomic<std::uint64_t> hits_{0}, misses_{0}, errors_{0};
};

}  // namespace gpumeter
