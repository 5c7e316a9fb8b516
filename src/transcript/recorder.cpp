#include "transcript/recorder.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "transcript/calls.h"
#include "transcript/codec.h"

namespace gpumeter::transcript {

namespace {

// The transcript file and everything the codecs share, under one lock: calls from every
// collection thread are written whole, one line each.
class Recorder {
 public:
  Recorder(std::FILE* f, const RecordOptions& o)
      : file_(f),
        options_(o),
        anonymizer_(o.anonymize),
        start_mono_(mono_ns()),
        deadline_mono_(start_mono_ + std::chrono::duration_cast<std::chrono::nanoseconds>(o.duration).count()) {}

  static std::mutex& registry_mutex() {
    static std::mutex mu;
    return mu;
  }
  static Recorder*& active() {
    static Recorder* r = nullptr;
    return r;
  }

  void header(const std::string& library) {
    // Anonymized: the library's file name only, which says which driver without the host's layout.
    const std::string shown = options_.anonymize ? library.substr(library.rfind('/') + 1) : library;
    json h{{"gpumeter_nvml_transcript", 1},
           {"agent", options_.agent_version},
           {"library", shown},
           {"started_unix_ns", wall_ns()},
           {"started_mono_ns", start_mono_},
           {"anonymized", options_.anonymize},
           {"duration_limit_s", std::chrono::duration<double>(options_.duration).count()},
           {"max_bytes", options_.max_bytes}};
    write_line(h.dump());
    std::fflush(file_);
  }

  // Encodes and writes one call; false once the recording has ended.
  template <typename... A>
  void record(Call call, std::int64_t t, std::int64_t wall, std::int64_t took_ns, nvmlReturn_t rc, A... a) {
    std::lock_guard lock(mu_);
    if (file_ == nullptr) return;
    if (t > deadline_mono_) return finish("duration");
    ArgContext ctx;
    ctx.call = call;
    ctx.rc = rc;
    ctx.tokens = &tokens_;
    ctx.anonymizer = options_.anonymize ? &anonymizer_ : nullptr;
    ctx.counts = {Codec<A>::count(a, rc)...};
    std::size_t i = 0;
    ((ctx.index = i++, ctx.inputs.push_back(Codec<A>::input(a, ctx))), ...);
    json args = json::array();
    i = 0;
    ((ctx.index = i++, args.push_back(Codec<A>::encode(a, ctx))), ...);
    note_gpm_sample(call, json(ctx.inputs), tokens_);
    json line{{"t", t - start_mono_},    {"wall", wall}, {"fn", call_name(call)},
              {"args", std::move(args)}, {"rc", rc},     {"us", took_ns / 1000}};
    std::string text = line.dump(-1, ' ', false, json::error_handler_t::replace);
    if (bytes_ + text.size() + 1 + kEndReserve > options_.max_bytes) return finish("size");
    write_line(text);
    ++calls_;
    if (t - last_flush_ > 1'000'000'000) {
      std::fflush(file_);
      last_flush_ = t;
    }
  }

  void finish(const char* reason) {
    if (file_ == nullptr) return;
    write_line(json{{"end", reason}, {"calls", calls_}, {"t", mono_ns() - start_mono_}}.dump());
    std::fclose(file_);
    file_ = nullptr;
  }

  void stop(const char* reason) {
    std::lock_guard lock(mu_);
    finish(reason);
  }

 private:
  static constexpr std::uint64_t kEndReserve = 128;

  void write_line(const std::string& text) {
    std::fwrite(text.data(), 1, text.size(), file_);
    std::fputc('\n', file_);
    bytes_ += text.size() + 1;
  }

  std::mutex mu_;
  std::FILE* file_;
  RecordOptions options_;
  Tokens tokens_;
  Anonymizer anonymizer_;
  std::int64_t start_mono_;
  std::int64_t deadline_mono_;
  std::int64_t last_flush_ = 0;
  std::uint64_t bytes_ = 0;
  std::uint64_t calls_ = 0;
};

template <Call C, typename Fn>
struct Recorded;

template <Call C, typename... A>
struct Recorded<C, nvmlReturn_t (*)(A...)> {
  static inline nvmlReturn_t (*original)(A...) = nullptr;
  static nvmlReturn_t call(A... a) {
    const std::int64_t t = mono_ns(), wall = wall_ns();
    const nvmlReturn_t rc = original(a...);
    const std::int64_t took = mono_ns() - t;
    if (Recorder* r = Recorder::active(); r != nullptr) r->record(C, t, wall, took, rc, a...);
    return rc;
  }
};

class RecordingSource final : public SymbolSource {
 public:
  explicit RecordingSource(std::unique_ptr<SymbolSource> inner) : inner_(std::move(inner)) {}
  void* symbol(const char* name) const override {
    void* real = inner_->symbol(name);
    if (real == nullptr) return nullptr;
#define GPUMETER_TRANSCRIPT_WRAP(fn, type)      \
  if (std::strcmp(name, #fn) == 0) {            \
    using W = Recorded<Call::fn, type>;         \
    W::original = reinterpret_cast<type>(real); \
    return reinterpret_cast<void*>(&W::call);   \
  }
    GPUMETER_TRANSCRIPT_CALLS(GPUMETER_TRANSCRIPT_WRAP)
#undef GPUMETER_TRANSCRIPT_WRAP
    return real;
  }
  const std::string& path() const override { return inner_->path(); }

 private:
  std::unique_ptr<SymbolSource> inner_;
};

}  // namespace

Result<std::unique_ptr<SymbolSource>> recording_source(std::unique_ptr<SymbolSource> inner,
                                                       const RecordOptions& options) {
  std::lock_guard lock(Recorder::registry_mutex());
  if (Recorder::active() != nullptr) return Error{0, "an NVML recording is already running in this process"};
  std::FILE* f = std::fopen(options.path.c_str(), "we");
  if (f == nullptr) return Error{errno, fmt::format("cannot write {}: {}", options.path, std::strerror(errno))};
  auto* r = new Recorder(f, options);  // process-wide, like the entry points that reach it
  r->header(inner->path());
  Recorder::active() = r;
  return std::unique_ptr<SymbolSource>(new RecordingSource(std::move(inner)));
}

void stop_recording(const char* reason) {
  std::lock_guard lock(Recorder::registry_mutex());
  if (Recorder* r = Recorder::active(); r != nullptr) r->stop(reason);
}

}  // namespace gpumeter::transcript
