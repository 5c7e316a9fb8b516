#include "render/landing_page.h"

#include <gtest/gtest.h>

#include "fixture_snapshot.h"

namespace gpumeter {
namespace {

bool contains(const std::string& s, const std::string& sub) { return s.find(sub) != std::string::npos; }

TEST(LandingPage, SelfContainedHtml5WithLinks) {
  LandingPageOptions opt;
  opt.telemetry_path = "/gpu-metrics";
  opt.now_unix = testing::kFixtureNowUnix;
  std::string html = render_landing_page(testing::fixture_snapshot(), opt);
  EXPECT_TRUE(html.starts_with("<!DOCTYPE html>\n"));
  EXPECT_TRUE(contains(html, "<title>gpumeter</title>"));
  EXPECT_TRUE(contains(html, "<style>"));
  EXPECT_TRUE(contains(html, "version <b>0.1.0</b> (revision abc1234)"));
  EXPECT_TRUE(contains(html, "<a href=\"/gpu-metrics\">"));
  EXPECT_TRUE(contains(html, "<a href=\"/-/healthy\">"));
  EXPECT_TRUE(contains(html, "<a href=\"/-/ready\">"));
  EXPECT_TRUE(contains(html, "Snapshot taken 2023-11-14 22:13:20 UTC, 1.2 s ago."));
  EXPECT_TRUE(contains(html, "id=\"processes\""));
  // No external assets of any kind.
  for (const char* bad : {"http://", "https://", "src=", "<link", "@import", "url("}) {
    EXPECT_FALSE(contains(html, bad)) << bad;
  }
  EXPECT_TRUE(html.ends_with("</html>\n"));
}

TEST(LandingPage, GpuTableRows) {
  std::string html = render_landing_page(testing::fixture_snapshot(), {});
  EXPECT_TRUE(contains(html,
                       "<tr><td class=\"num\">0</td><td>NVIDIA H100 80GB HBM3</td>"
                       "<td><code>GPU-6f2d9d6c-1c3e-4b7e-9a43-2b8b0f3c1a10</code></td><td class=\"up\">up</td>"
                       "<td class=\"num\">53 %</td><td class=\"num\">40.0 / 79.6 GiB</td>"
                       "<td class=\"num\">312 W</td><td class=\"num\">64 &deg;C</td></tr>"));
  // Down GPU: the reason, and no numbers.
  EXPECT_TRUE(contains(html,
                       "<td class=\"down\">down: GPU is lost (NVML_ERROR_GPU_IS_LOST)</td>"
                       "<td class=\"num\" colspan=\"4\">&ndash;</td>"));
  // Backend state with the reason when down.
  EXPECT_TRUE(contains(html,
                       "<td>rocm_smi</td><td class=\"down\">down: librocm_smi64.so: cannot open shared "
                       "object file</td>"));
  EXPECT_TRUE(contains(html, "<td>nvml</td><td class=\"up\">up</td>"));
}

TEST(LandingPage, MissingValuesShowADash) {
  Snapshot s = testing::fixture_snapshot();
  auto r = std::make_shared<DeviceReading>();
  s.gpus[1].reading = r;  // up, but nothing supported
  std::string html = render_landing_page(s, {});
  EXPECT_TRUE(contains(html,
                       "<td class=\"up\">up</td><td class=\"num\">&ndash;</td><td class=\"num\">&ndash;</td>"
                       "<td class=\"num\">&ndash;</td><td class=\"num\">&ndash;</td></tr>"));
}

TEST(LandingPage, EscapesEverySnapshotString) {
  Snapshot s = testing::fixture_snapshot();
  s.build.version = "<script>alert(1)</script>";
  s.gpus[0].identity.model = "A&B \"quoted\" 'single'";
  s.gpus[0].identity.uuid = "<uuid>";
  s.gpus[2].down_reason = "<b>lost</b>";
  s.backends[1].detail = "<img src=x>";
  LandingPageOptions opt;
  opt.notice = "<i>notice</i>";
  opt.telemetry_path = "/m\"onclick=\"x";
  std::string html = render_landing_page(s, opt);
  EXPECT_FALSE(contains(html, "<script>"));
  EXPECT_FALSE(contains(html, "<img"));
  EXPECT_FALSE(contains(html, "<b>lost"));
  EXPECT_FALSE(contains(html, "<i>notice"));
  EXPECT_FALSE(contains(html, "<uuid>"));
  EXPECT_FALSE(contains(html, "\"onclick"));
  EXPECT_TRUE(contains(html, "&lt;script&gt;alert(1)&lt;/script&gt;"));
  EXPECT_TRUE(contains(html, "A&amp;B &quot;quoted&quot; &#39;single&#39;"));
  EXPECT_TRUE(contains(html, "<p class=\"notice\">&lt;i&gt;notice&lt;/i&gt;</p>"));
}

TEST(LandingPage, EmptySnapshot) {
  LandingPageOptions opt;
  opt.notice = "No snapshot yet.";
  std::string html = render_landing_page(Snapshot{}, opt);
  EXPECT_TRUE(contains(html, "version <b>unknown</b>"));
  EXPECT_TRUE(contains(html, "No GPUs found."));
  EXPECT_TRUE(contains(html, "No GPU backend is configured."));
  EXPECT_FALSE(contains(html, "Snapshot taken"));
}

TEST(LandingPage, ProcessesWithTheirOwners) {
  Snapshot snap = testing::fixture_snapshot();
  EXPECT_TRUE(contains(render_landing_page(snap, {}), "Attribution is off."));
  snap.attribution.enabled = true;
  EXPECT_TRUE(contains(render_landing_page(snap, {}), "No processes on any GPU."));
  OwnerLabels o;
  o.project = "nlp";
  o.user = "dana";
  o.namespace_ = "team-nlp";
  o.pod = "trainer-<0>";
  o.container = "trainer";
  snap.gpus[0].processes.push_back({31001, o, 8.0 * (1ULL << 30), 0.42, true});
  snap.gpus[0].processes.push_back({31002, o, 0.0, std::nullopt, false});
  std::string html = render_landing_page(snap, {});
  EXPECT_TRUE(contains(html,
                       "<tr><td class=\"num\">0</td><td class=\"num\">31001</td><td>nlp</td><td>dana</td>"
                       "<td>team-nlp</td><td>trainer-&lt;0&gt;</td><td>trainer</td><td></td>"
                       "<td class=\"num\">8.0 GiB</td><td class=\"num\">42 %</td></tr>"));
  EXPECT_TRUE(contains(html, "31002 (exited)"));
}

}  // namespace
}  // namespace gpumeter
