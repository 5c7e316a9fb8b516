#pragma once
// Rendering happens at most once per snapshot and format, and only for a format somebody asks for:
// a snapshot nobody scrapes is never rendered, and gzip is prepared only for a client that asks
// for it. PreparedExposition holds, per format, the rendered body and its gzip prefix, each made
// on first use; a scrape adds only a small trailer (the snapshot age and, for OpenMetrics,
// "# EOF") and, when gzipped, one stored deflate block and the gzip footer.

#include <algorithm>
#include <array>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/metric_family.h"
#include "render/exposition_format.h"
#include "render/gzip_framing.h"
#include "util/result.h"

namespace gpumeter {

class PreparedExposition {
 public:
  // `families` is called at most once, on the first use of either format.
  PreparedExposition(std::function<std::vector<MetricFamily>()> families, double taken_unix);
  PreparedExposition(const PreparedExposition&) = delete;
  PreparedExposition& operator=(const PreparedExposition&) = delete;

  double taken_unix() const { return taken_unix_; }  // Snapshot::taken_unix, the reference for the age

  // The rendered families without the per-scrape trailer. Safe from any number of threads: the
  // first caller renders, the others wait for it.
  const std::string& text(ExpositionFormat format) const;
  // The gzip header and sync-flushed deflate of text(format); an error when zlib failed.
  const Result<GzipPrefix>& gzip(ExpositionFormat format) const;

 private:
  struct Slot {
    std::once_flag text_once;
    std::string text;
    std::once_flag gzip_once;
    std::optional<Result<GzipPrefix>> gzip;
  };
  const std::vector<MetricFamily>& families() const;

  double taken_unix_;
  mutable std::function<std::vector<MetricFamily>()> source_;
  mutable std::once_flag families_once_;
  mutable std::vector<MetricFamily> families_;
  mutable std::array<Slot, 2> slots_;
};

// A PreparedExposition of families already built (tests and benchmarks).
std::unique_ptr<PreparedExposition> prepare_exposition(std::vector<MetricFamily> families, double taken_unix);

// The per-scrape trailer: the gpumeter_snapshot_age_seconds family (never negative, rounded to
// microseconds so that it prints short) and, for OpenMetrics, "# EOF\n".
std::string render_trailer(ExpositionFormat format, double age_seconds);

// One scrape's response body as two pieces: a view into the PreparedExposition (which must outlive
// it) and the small owned tail built for this scrape. The HTTP layer writes them with a known
// Content-Length and never copies the body.
struct ScrapeBody {
  std::string_view head;  // the prepared body, or its gzip prefix
  std::string tail;       // the trailer, or the stored block(s) + trailer + gzip footer
  bool gzipped = false;   // gzip was asked for and could be prepared

  size_t size() const { return head.size() + tail.size(); }
  std::array<std::string_view, 2> pieces() const { return {head, std::string_view(tail)}; }
  // Calls sink(data, len) for the bytes in [offset, offset + length), in order, across pieces.
  template <typename Sink>
  void for_range(size_t offset, size_t length, Sink&& sink) const;
  std::string flatten() const { return std::string(head) + tail; }  // for tests
};

ScrapeBody make_scrape_body(const PreparedExposition& prepared, ExpositionFormat format, bool gzip, double now_unix);

template <typename Sink>
void ScrapeBody::for_range(size_t offset, size_t length, Sink&& sink) const {
  for (std::string_view piece : pieces()) {
    if (length == 0) return;
    if (offset >= piece.size()) {
      offset -= piece.size();
      continue;
    }
    const size_t n = std::min(length, piece.size() - offset);
    sink(piece.data() + offset, n);
    offset = 0;
    length -= n;
  }
}

}  // namespace gpumeter
