#pragma once
// Rendering happens once per snapshot, not once per scrape. PreparedExposition holds, per format, the
// rendered body and its gzip prefix; a scrape adds only a small trailer (the snapshot age and, for
// OpenMetrics, "# EOF") and, when gzipped, one stored deflate block and the gzip footer.

#include <algorithm>
#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "model/metric_family.h"
#include "render/exposition_format.h"
#include "render/gzip_framing.h"
#include "util/result.h"

namespace gpumeter {

struct PreparedBody {
  std::string text;  // rendered families, without the per-scrape trailer
  GzipPrefix gzip;   // gzip header + sync-flushed deflate of `text`
};

struct PreparedExposition {
  double taken_unix = 0;  // Snapshot::taken_unix, the reference for the snapshot age
  PreparedBody text004;
  PreparedBody openmetrics;

  const PreparedBody& body(ExpositionFormat format) const {
    return format == ExpositionFormat::kOpenMetrics100 ? openmetrics : text004;
  }
};

Result<PreparedExposition> prepare_exposition(const std::vector<MetricFamily>& families, double taken_unix);

// The per-scrape trailer: the gpumeter_snapshot_age_seconds family (never negative, rounded to
// microseconds so that it prints short) and, for OpenMetrics, "# EOF\n".
std::string render_trailer(ExpositionFormat format, double age_seconds);

// One scrape's response body as two pieces: a view into the PreparedExposition (which must outlive
// it) and the small owned tail built for this scrape. The HTTP layer writes them with a known
// Content-Length and never copies the body.
struct ScrapeBody {
  std::string_view head;  // the prepared body, or its gzip prefix
  std::string tail;       // the trailer, or the stored block(s) + trailer + gzip footer

  size_t size() const { return head.size() + tail.size(); }
  std::array<std::string_view, 2> pieces() const { return {head, std::string_view(tail)}; }
  // Calls sink(data, len) for the bytes in [offset, offset + length), in order, across pieces.
  template <typename Sink>
  void for_range(size_t offset, size_t length, Sink&& sink) const;
  std::string flatten() const { return std::string(head) + tail; }  // for tests
};

ScrapeBody make_scrape_body(const PreparedExposition& prepared, ExpositionFormat format, bool gzip,
                            double now_unix);

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
