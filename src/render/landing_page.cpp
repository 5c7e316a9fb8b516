#include "render/landing_page.h"

#include <algorithm>
#include <ctime>
#include <string_view>

#include "render/number_format.h"
#include "util/html_escape.h"

namespace gpumeter {

namespace {

constexpr std::string_view kStyle =
    "body{font-family:system-ui,sans-serif;margin:2em;color:#222}"
    "table{border-collapse:collapse;margin:1em 0}"
    "th,td{border:1px solid #ccc;padding:.3em .6em;text-align:left}"
    "th{background:#f3f3f3}td.num{text-align:right;font-variant-numeric:tabular-nums}"
    ".up{color:#17702a;font-weight:600}.down{color:#b3261e;font-weight:600}.absent{color:#555}"
    ".notice{background:#fff4ce;padding:.5em 1em;border-left:4px solid #e0b000}"
    "code{background:#f3f3f3;padding:0 .2em}";

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

class Html {
 public:
  Html& raw(std::string_view s) {
    out_.append(s);
    return *this;
  }
  Html& text(std::string_view s) {
    append_html_escaped(out_, s);
    return *this;
  }
  Html& fixed(double v, int decimals) {
    append_fixed(out_, v, decimals);
    return *this;
  }
  std::string take() && { return std::move(out_); }

 private:
  std::string out_;
};

void status_cell(Html& h, bool up, std::string_view reason) {
  h.raw(up ? "<td class=\"up\">up</td>" : "<td class=\"down\">down");
  if (!up) {
    if (!reason.empty()) h.raw(": ").text(reason);
    h.raw("</td>");
  }
}

std::string utc_time(double unix_seconds) {
  std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  if (!gmtime_r(&t, &tm)) return "?";
  char buf[32];
  // No locale-dependent conversions in this format.
  size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return std::string(buf, n);
}

void backends_section(Html& h, const Snapshot& snap) {
  h.raw("<h2>Backends</h2>\n");
  if (snap.backends.empty()) {
    h.raw("<p>No GPU backend is configured.</p>\n");
    return;
  }
  h.raw(
      "<table>\n<thead><tr><th>Backend</th><th>Status</th><th>Library</th><th>Driver</th></tr></"
      "thead>\n<tbody>\n");
  for (const auto& b : snap.backends) {
    h.raw("<tr><td>").text(b.backend).raw("</td>");
    if (b.absent) {
      h.raw("<td class=\"absent\">absent: ").text(b.detail).raw("</td>");
    } else {
      status_cell(h, b.up, b.detail);
    }
    h.raw("<td>").text(b.library).raw("</td><td>").text(b.driver_version).raw("</td></tr>\n");
  }
  h.raw("</tbody>\n</table>\n");
}

void optional_cell(Html& h, const std::optional<double>& v, double scale, int decimals, std::string_view unit) {
  h.raw("<td class=\"num\">");
  if (v) {
    h.fixed(*v * scale, decimals).raw(unit);
  } else {
    h.raw("&ndash;");
  }
  h.raw("</td>");
}

const LabeledValue* gpu_temperature(const DeviceReading& r) {
  for (const auto& t : r.device.temperature_celsius) {
    if (t.label == "gpu") return &t;
  }
  return r.device.temperature_celsius.empty() ? nullptr : &r.device.temperature_celsius.front();
}

void gpus_section(Html& h, const Snapshot& snap) {
  h.raw("<h2>GPUs</h2>\n");
  if (snap.gpus.empty()) {
    h.raw("<p>No GPUs found.</p>\n");
    return;
  }
  h.raw(
      "<table>\n<thead><tr><th>GPU</th><th>Model</th><th>UUID</th><th>Status</th><th>Utilization</th>"
      "<th>Memory used / total</th><th>Power</th><th>Temperature</th></tr></thead>\n<tbody>\n");
  for (const auto& g : snap.gpus) {
    h.raw("<tr><td class=\"num\">").raw(std::to_string(g.identity.index)).raw("</td><td>");
    h.text(g.identity.model).raw("</td><td><code>").text(g.identity.uuid).raw("</code></td>");
    status_cell(h, g.up, g.down_reason);
    const DeviceReading* r = g.up ? g.reading.get() : nullptr;
    if (!r) {
      h.raw("<td class=\"num\" colspan=\"4\">&ndash;</td></tr>\n");
      continue;
    }
    optional_cell(h, r->device.utilization_ratio, 100, 0, " %");
    h.raw("<td class=\"num\">");
    if (r->device.memory_used_bytes && r->device.memory_total_bytes) {
      h.fixed(*r->device.memory_used_bytes / kGiB, 1)
          .raw(" / ")
          .fixed(*r->device.memory_total_bytes / kGiB, 1)
          .raw(" GiB");
    } else {
      h.raw("&ndash;");
    }
    h.raw("</td>");
    optional_cell(h, r->device.power_watts, 1, 0, " W");
    const LabeledValue* t = gpu_temperature(*r);
    optional_cell(h, t ? std::optional<double>(t->value) : std::nullopt, 1, 0, " &deg;C");
    h.raw("</tr>\n");
  }
  h.raw("</tbody>\n</table>\n");
}

// Who is on each GPU: its processes with their owners (within the per-process limit).
void processes_section(Html& h, const Snapshot& snap) {
  h.raw("<h2 id=\"processes\">Processes and owners</h2>\n");
  if (!snap.attribution.enabled) {
    h.raw("<p>Attribution is off.</p>\n");
    return;
  }
  bool any = false;
  for (const auto& g : snap.gpus) {
    any = any || std::any_of(g.processes.begin(), g.processes.end(), [](const auto& p) { return p.series; });
  }
  if (!any) {
    h.raw("<p>No processes on any GPU.</p>\n");
    return;
  }
  h.raw(
      "<table>\n<thead><tr><th>GPU</th><th>PID</th><th>Project</th><th>User</th><th>Namespace</th><th>Pod</th>"
      "<th>Container</th><th>HPC job</th><th>Memory</th><th>SM</th></tr></thead>\n<tbody>\n");
  for (const auto& g : snap.gpus) {
    for (const auto& p : g.processes) {
      if (!p.series) continue;
      h.raw("<tr><td class=\"num\">").raw(std::to_string(g.identity.index)).raw("</td><td class=\"num\">");
      h.raw(std::to_string(p.pid)).raw(p.running ? "" : " (exited)").raw("</td>");
      for (const std::string* v :
           {&p.owner.project, &p.owner.user, &p.owner.namespace_, &p.owner.pod, &p.owner.container, &p.owner.hpc_job}) {
        h.raw("<td>").text(*v).raw("</td>");
      }
      h.raw("<td class=\"num\">");
      if (p.memory_bytes) {
        h.fixed(*p.memory_bytes / kGiB, 1).raw(" GiB");
      } else {
        h.raw("&ndash;");
      }
      h.raw("</td>");
      optional_cell(h, p.utilization_ratio, 100, 0, " %");
      h.raw("</tr>\n");
    }
  }
  h.raw("</tbody>\n</table>\n");
}

}  // namespace

std::string render_landing_page(const Snapshot& snap, const LandingPageOptions& opt) {
  Html h;
  h.raw("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n")
      .raw("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n")
      .raw("<title>gpumeter</title>\n<style>")
      .raw(kStyle)
      .raw("</style>\n</head>\n<body>\n<h1>gpumeter</h1>\n<p>GPU monitoring agent, version <b>")
      .text(snap.build.version.empty() ? "unknown" : snap.build.version)
      .raw("</b>");
  if (!snap.build.revision.empty()) h.raw(" (revision ").text(snap.build.revision).raw(")");
  h.raw(".</p>\n");
  if (!opt.notice.empty()) h.raw("<p class=\"notice\">").text(opt.notice).raw("</p>\n");
  if (snap.taken_unix > 0) {
    h.raw("<p>Snapshot taken ").text(utc_time(snap.taken_unix));
    if (opt.now_unix > 0) {
      h.raw(", ").fixed(opt.now_unix > snap.taken_unix ? opt.now_unix - snap.taken_unix : 0, 1).raw(" s ago");
    }
    h.raw(".</p>\n");
  }
  h.raw("<ul>\n<li><a href=\"").text(opt.telemetry_path).raw("\">Metrics</a> (<code>");
  h.text(opt.telemetry_path).raw("</code>)</li>\n");
  h.raw("<li><a href=\"/-/healthy\">Health</a></li>\n<li><a href=\"/-/ready\">Readiness</a></li>\n</ul>\n");
  backends_section(h, snap);
  gpus_section(h, snap);
  processes_section(h, snap);
  h.raw("</body>\n</html>\n");
  return std::move(h).take();
}

}  // namespace gpumeter
