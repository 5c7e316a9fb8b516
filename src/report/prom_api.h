#pragma once
// A client for the Prometheus HTTP query API, as Prometheus, VictoriaMetrics, Thanos and Mimir
// serve it. Every call returns a value or an Error whose message names the request and what
// was wrong with the answer (unreachable, HTTP status, not JSON, unexpected JSON), so the
// report can stop with one clear line instead of printing a partial invoice.

#include <atomic>
#include <chrono>
#include <functional>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace gpumeter::report {

using Labels = std::map<std::string, std::string, std::less<>>;  // without __name__

// The identity of a label set as one string (for maps).
std::string labels_key(const Labels& labels);
// ... and as a 64-bit hash, for what is kept per series of a whole fleet.
std::uint64_t series_id(const Labels& labels);

struct Sample {
  double t = 0;  // unix seconds
  double v = 0;
};

struct Series {
  Labels labels;
  std::vector<Sample> samples;  // one for an instant vector; in time order for a matrix
};

struct ApiOptions {
  std::string url;  // scheme://host[:port][/path prefix], e.g. http://vm:8428/prometheus
  // For the whole of one request, from connecting to the last byte of the answer: a server that
  // trickles its answer cannot hold the report for ever.
  std::chrono::milliseconds timeout{120'000};
  // Larger answers are refused, so a broken or hostile server cannot exhaust memory.
  std::size_t max_answer_bytes = std::size_t{256} << 20;
};

// One request as it went out, for progress output.
struct RequestInfo {
  std::string what;  // "query_range gpu_busy_seconds_total"
  double seconds = 0;
};

// The URL as messages and reports show it: user:password@ removed. A URL connect() would refuse
// is returned as it is.
std::string url_for_display(const std::string& url);

class PromApi {
 public:
  // Fails on a URL that is not http(s)://host[:port][/prefix].
  static Result<std::unique_ptr<PromApi>> connect(const ApiOptions& options);
  virtual ~PromApi() = default;

  // An instant vector expression at `t`: one sample per series; a matrix or a scalar is rejected.
  virtual Result<std::vector<Series>> query(std::string_view expr, double t) = 0;
  // Range query on the grid start, start+step, ... <= end.
  virtual Result<std::vector<Series>> query_range(std::string_view expr, double start, double end, double step) = 0;
  // The raw samples of the series matching `selector` in (after, upto].
  virtual Result<std::vector<Series>> raw_samples(std::string_view selector, double after, double upto) = 0;
  // Prometheus' remote read API (report/remote_read.h): every series of `metric`, with a uuid
  // among `uuids` when any are given, handed to `each` one at a time with its raw samples in
  // (after, upto]. The store sends its compressed chunks rather than evaluating a query. Where
  // the server answers, but not with remote read (VictoriaMetrics, Thanos' querier, a proxy in
  // between), the Error's code is kNoRemoteRead.
  static constexpr int kNoRemoteRead = 404;
  virtual Result<void> read_raw(std::string_view metric, const std::vector<std::string>& uuids, double after,
                                double upto, const std::function<Result<void>(Series&&)>& each);
  // /api/v1/series: the label sets (with __name__) of the series matching `match` in [start, end].
  virtual Result<std::vector<Labels>> series(std::string_view match, double start, double end) = 0;
  // /api/v1/label/<name>/values: the values of label `name` among the series matching any of
  // `matches` in [start, end] (as the store's index knows them: its blocks or days overlapping
  // the range, so possibly a few more).
  virtual Result<std::vector<std::string>> label_values(std::string_view name, const std::vector<std::string>& matches,
                                                        double start, double end) = 0;
  // "Prometheus 2.42.0", "VictoriaMetrics", or "unknown"; never fails.
  virtual std::string backend() = 0;

  // Another connection to the same API, so requests can run in parallel, each connection on
  // one thread; its requests count in requests() of both. Null when the API cannot do that.
  virtual std::unique_ptr<PromApi> another() { return nullptr; }

  int requests() const { return *requests_; }
  void on_request(std::function<void(const RequestInfo&)> callback) { on_request_ = std::move(callback); }

 protected:
  void count_request() { ++*requests_; }
  // Shared with the connections another() makes.
  std::shared_ptr<std::atomic<int>> requests_ = std::make_shared<std::atomic<int>>(0);
  std::function<void(const RequestInfo&)> on_request_;
};

// Parses an API answer's body: the envelope, then data per resultType. Exposed for tests.
Result<std::vector<Series>> parse_query_response(std::string_view body, std::string_view what);
// The same through nlohmann-json's SAX reader alone, without the reader of the usual shape
// (canonical_answer.h) that parse_query_response() tries first: the tests hold the two to the
// same result.
Result<std::vector<Series>> parse_query_response_sax(std::string_view body, std::string_view what);
Result<std::vector<Labels>> parse_series_response(std::string_view body, std::string_view what);
Result<std::vector<std::string>> parse_label_values_response(std::string_view body, std::string_view what);

// A printable excerpt of an answer for an error message: no control characters, at most `max`
// bytes and "..." after them.
std::string excerpt(std::string_view body, std::size_t max = 160);

// Keeps the samples in (after, upto] (to the millisecond, the APIs' resolution); drops series left empty.
std::vector<Series> samples_between(std::vector<Series> series, double after, double upto);

// "1h30m15.250s"-free PromQL range: whole milliseconds, rounded up, e.g. "5400000ms".
std::string promql_range(double seconds);
// The PromQL string literal for `s` ("..." with \ and " escaped).
std::string promql_string(std::string_view s);
// A regex matching exactly the given values (special characters escaped), for `label=~"..."`.
std::string exact_alternation(const std::vector<std::string>& values);

}  // namespace gpumeter::report
