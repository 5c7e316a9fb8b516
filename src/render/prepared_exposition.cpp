#include "render/prepared_exposition.h"

#include <cmath>

#include "render/families.h"
#include "render/text_writer.h"

namespace gpumeter {

namespace {

size_t slot_of(ExpositionFormat format) { return format == ExpositionFormat::kOpenMetrics100 ? 1 : 0; }

}  // namespace

PreparedExposition::PreparedExposition(std::function<std::vector<MetricFamily>()> families, double taken_unix)
    : taken_unix_(taken_unix), source_(std::move(families)) {}

const std::vector<MetricFamily>& PreparedExposition::families() const {
  std::call_once(families_once_, [&] {
    families_ = source_();
    source_ = nullptr;  // what it captured (a snapshot) is no longer needed for this
  });
  return families_;
}

const std::string& PreparedExposition::text(ExpositionFormat format) const {
  Slot& slot = slots_[slot_of(format)];
  std::call_once(slot.text_once, [&] { slot.text = render(families(), format); });
  return slot.text;
}

const Result<GzipPrefix>& PreparedExposition::gzip(ExpositionFormat format) const {
  Slot& slot = slots_[slot_of(format)];
  std::call_once(slot.gzip_once, [&] { slot.gzip = make_gzip_prefix(text(format)); });
  return *slot.gzip;
}

std::unique_ptr<PreparedExposition> prepare_exposition(std::vector<MetricFamily> families, double taken_unix) {
  auto shared = std::make_shared<std::vector<MetricFamily>>(std::move(families));
  return std::make_unique<PreparedExposition>([shared] { return std::move(*shared); }, taken_unix);
}

std::string render_trailer(ExpositionFormat format, double age_seconds) {
  // A clock stepped backwards would give a negative age; "just taken" is the honest reading.
  double age = std::isfinite(age_seconds) && age_seconds > 0 ? std::round(age_seconds * 1e6) / 1e6 : 0;
  std::string out;
  out.reserve(192);
  append_family(out, snapshot_age_family(age), format);
  if (format == ExpositionFormat::kOpenMetrics100) out.append(kOpenMetricsEof);
  return out;
}

ScrapeBody make_scrape_body(const PreparedExposition& prepared, ExpositionFormat format, bool gzip, double now_unix) {
  std::string trailer = render_trailer(format, now_unix - prepared.taken_unix());
  // Should zlib fail, the body goes out uncompressed, which every client accepts.
  const Result<GzipPrefix>* prefix = gzip ? &prepared.gzip(format) : nullptr;
  if (prefix == nullptr || !prefix->ok()) return ScrapeBody{prepared.text(format), std::move(trailer), false};
  ScrapeBody out{(*prefix)->bytes, {}, true};
  append_gzip_tail(out.tail, **prefix, trailer);
  return out;
}

}  // namespace gpumeter
