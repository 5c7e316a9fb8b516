#include "render/prepared_exposition.h"

#include <cmath>

#include "render/families.h"
#include "render/text_writer.h"

namespace gpumeter {

namespace {

Result<PreparedBody> prepare_body(const std::vector<MetricFamily>& families, ExpositionFormat format) {
  PreparedBody body;
  body.text = render(families, format);
  auto gz = make_gzip_prefix(body.text);
  if (!gz) return gz.error();
  body.gzip = std::move(gz).value();
  return body;
}

}  // namespace

Result<PreparedExposition> prepare_exposition(const std::vector<MetricFamily>& families, double taken_unix) {
  PreparedExposition p;
  p.taken_unix = taken_unix;
  auto text = prepare_body(families, ExpositionFormat::kText004);
  if (!text) return text.error();
  auto om = prepare_body(families, ExpositionFormat::kOpenMetrics100);
  if (!om) return om.error();
  p.text004 = std::move(text).value();
  p.openmetrics = std::move(om).value();
  return p;
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

ScrapeBody make_scrape_body(const PreparedExposition& prepared, ExpositionFormat format, bool gzip,
                            double now_unix) {
  const PreparedBody& body = prepared.body(format);
  std::string trailer = render_trailer(format, now_unix - prepared.taken_unix);
  if (!gzip) return ScrapeBody{body.text, std::move(trailer)};
  ScrapeBody out{body.gzip.bytes, {}};
  append_gzip_tail(out.tail, body.gzip, trailer);
  return out;
}

}  // namespace gpumeter
