"""The HTML page of `gpumeter report`, rendered by headless Chromium: the four SVG charts are in the
DOM, and a screenshot shows each of them drawn, in the palette's colours, inside the page's width.

The page comes from the report_html_fixture tool (a realistic synthetic report: 12 projects, 30 daily
steps, an idle row, budgets and two warnings), which sits beside GPUMETER_BIN in the build's bin/.
The screenshot is written to a temporary folder whose path is printed; run with
GPUMETER_KEEP_TEST_DIRS=1 (tests/integration/harness.py) to keep it for a person to look at.
"""
import html.parser
import json
import os
import shutil
import signal
import subprocess
import tempfile
import unittest

from harness import BIN

FIXTURE = os.path.join(os.path.dirname(BIN), "report_html_fixture") if BIN else ""
WIDTH, HEIGHT = 1280, 2400
CHARTS = ("chart-cost", "chart-efficiency", "chart-timeline", "chart-idle")

# src/report/svg_chart.h and format_html.cpp: the series palette, and the other fixed colours.
PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#9c755f")
OTHER, IDLE = "#bab0ac", "#d7dbe0"
EFFICIENCY_BANDS = ("#e15759", "#edc948", "#59a14f")
IDLE_LINE, DONUT_REST = "#d9822b", "#c9d6e4"

# Appended to a copy of the page only: it measures the layout and leaves it in the DOM, where
# --dump-dom can read it. The page itself has no script.
MEASURE = """<script>(function () {
  function box(el) {
    var r = el.getBoundingClientRect();
    return {x: r.left + scrollX, y: r.top + scrollY, w: r.width, h: r.height};
  }
  var out = {scrollWidth: document.documentElement.scrollWidth,
             scrollHeight: document.documentElement.scrollHeight, charts: {}};
  document.querySelectorAll("svg.chart").forEach(function (s) { out.charts[s.id] = box(s); });
  out.overflowing = [];
  document.querySelectorAll(".card, .panel, header").forEach(function (el) {
    if (el.scrollWidth > el.clientWidth + 1) out.overflowing.push(el.className + ": " + el.textContent.slice(0, 60));
  });
  var table = document.getElementById("rows");
  out.table = {width: table.scrollWidth, room: table.parentNode.clientWidth};
  var pre = document.createElement("pre");
  pre.id = "layout";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();</script>"""


def chromium(args, timeout=120):
    """Runs headless Chromium in a process group of its own and always kills the whole group, so
    no renderer or zygote outlives the test, whether it passes, fails or hangs."""
    profile = tempfile.mkdtemp(prefix="gpumeter-chromium-")
    cmd = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--hide-scrollbars", "--host-resolver-rules=MAP * ~NOTFOUND",  # nothing may be fetched
           "--window-size=%d,%d" % (WIDTH, HEIGHT), "--user-data-dir=" + profile] + args
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise AssertionError("chromium did not finish in %d s: %s" % (timeout, " ".join(args)))
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        shutil.rmtree(profile, ignore_errors=True)
    if proc.returncode != 0:
        raise AssertionError("chromium failed (%d): %s" % (proc.returncode, err[-2000:]))
    return out


def rgb(hex_color):
    return tuple(int(hex_color[i:i + 2], 16) for i in (1, 3, 5))


def count_color(image, hex_color, tolerance=3):
    """Pixels of an RGB `image` within `tolerance` of the colour in every channel."""
    target = rgb(hex_color)
    return sum(n for n, pixel in image.getcolors(maxcolors=1 << 24)
               if all(abs(p - t) <= tolerance for p, t in zip(pixel, target)))


class DomCharts(html.parser.HTMLParser):
    """Counts the shapes inside each <svg>, the rows of the groups table, and any script."""

    def __init__(self):
        super().__init__()
        self.svgs, self._svg = {}, None
        self.table_rows, self._in_rows_body, self._in_rows = 0, False, False
        self.scripts, self.text = 0, []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "svg":
            self._svg = a.get("id")
            self.svgs[self._svg] = {"rect": 0, "path": 0, "text": 0, "circle": 0}
        elif self._svg and tag in self.svgs[self._svg]:
            self.svgs[self._svg][tag] += 1
        elif tag == "table" and a.get("id") == "rows":
            self._in_rows = True
        elif tag == "tbody" and self._in_rows:
            self._in_rows_body = True
        elif tag == "tr" and self._in_rows_body:
            self.table_rows += 1
        elif tag == "script":
            self.scripts += 1

    def handle_endtag(self, tag):
        if tag == "svg":
            self._svg = None
        elif tag == "tbody":
            self._in_rows_body = False
        elif tag == "table":
            self._in_rows = False

    def handle_data(self, data):
        self.text.append(data)


class ReportHtml(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.access(FIXTURE, os.X_OK):
            raise AssertionError("no fixture tool at %r: build the report_html_fixture target" % FIXTURE)
        if not shutil.which("chromium"):
            raise AssertionError("chromium is not installed (Debian package chromium)")
        cls.dir = tempfile.mkdtemp(prefix="gpumeter-report-html-")
        cls.page = os.path.join(cls.dir, "report.html")
        subprocess.run([FIXTURE, cls.page], check=True, timeout=60)
        with open(cls.page, encoding="utf-8") as f:
            cls.source = f.read()
        print("\nreport page: %s" % cls.page)

    def render(self, path):
        return chromium(["--dump-dom", "file://" + path])

    def layout(self):
        measured = os.path.join(self.dir, "measured.html")
        with open(measured, "w", encoding="utf-8") as f:
            f.write(self.source.replace("</body>", MEASURE + "</body>"))
        dom = self.render(measured)
        start = dom.index('<pre id="layout">') + len('<pre id="layout">')
        return json.loads(html.unescape(dom[start:dom.index("</pre>", start)]))

    def test_dom_has_the_four_charts_the_table_and_no_script(self):
        parser = DomCharts()
        parser.feed(self.render(self.page))
        self.assertEqual(set(parser.svgs), set(CHARTS))
        self.assertEqual(parser.scripts, 0)
        # 12 projects, idle and unattributed: 14 bars, 13 of them with an efficiency.
        self.assertEqual(parser.svgs["chart-cost"]["rect"], 14)
        self.assertEqual(parser.svgs["chart-efficiency"]["rect"], 13)
        # 8 series and "other", each a path and a legend swatch.
        self.assertEqual(parser.svgs["chart-timeline"]["path"], 9)
        self.assertEqual(parser.svgs["chart-timeline"]["rect"], 9)
        self.assertEqual(parser.svgs["chart-idle"]["circle"], 2)
        self.assertGreaterEqual(parser.svgs["chart-idle"]["path"], 2)
        self.assertEqual(parser.table_rows, 14)
        text = "".join(parser.text)
        self.assertIn('<student> & "intern" lab', text)  # shown as text, not markup
        self.assertIn("GPU chargeback report", text)
        self.assertIn("2 warnings", text)

    def test_unpriced_page_shows_gpu_hours(self):
        path = os.path.join(self.dir, "unpriced.html")
        subprocess.run([FIXTURE, path, "--unpriced"], check=True, timeout=60)
        parser = DomCharts()
        parser.feed(self.render(path))
        self.assertEqual(set(parser.svgs), set(CHARTS))
        text = "".join(parser.text)
        self.assertIn("GPU usage report", text)
        self.assertIn("GPU-h per 1 d", text)
        self.assertNotIn("EUR", text)

    def test_screenshot_shows_every_chart_in_its_colours(self):
        from PIL import Image  # python3-pil

        layout = self.layout()
        self.assertLessEqual(layout["scrollWidth"], WIDTH, "the page scrolls sideways")
        self.assertLessEqual(layout["table"]["width"], layout["table"]["room"], "the table scrolls sideways")
        self.assertEqual(layout["overflowing"], [], "content wider than its box")
        self.assertEqual(set(layout["charts"]), set(CHARTS))

        shot = os.path.join(self.dir, "report.png")
        chromium(["--screenshot=" + shot, "file://" + self.page])
        print("\nscreenshot: %s" % shot)
        image = Image.open(shot).convert("RGB")
        self.assertEqual(image.size, (WIDTH, HEIGHT))
        self.assertGreater(len(image.getcolors(maxcolors=1 << 24)), 50, "the screenshot is blank")

        crops = {}
        for name, b in layout["charts"].items():
            self.assertGreater(b["w"], 300, name)
            self.assertGreater(b["h"], 150, name)
            self.assertGreaterEqual(b["x"], 0, name)
            self.assertLessEqual(b["x"] + b["w"], WIDTH, "%s is wider than the window" % name)
            self.assertLessEqual(b["y"] + b["h"], HEIGHT, "%s is below the screenshot" % name)
            crops[name] = image.crop((int(b["x"]), int(b["y"]), int(b["x"] + b["w"]), int(b["y"] + b["h"])))
            # Drawn: a good part of the chart is not white.
            pixels = crops[name].width * crops[name].height
            self.assertGreater(pixels - count_color(crops[name], "#ffffff", 8), pixels * 0.05, name)

        # The per-group charts sit side by side, the time charts below them, full width.
        cost, eff = layout["charts"]["chart-cost"], layout["charts"]["chart-efficiency"]
        timeline, idle = layout["charts"]["chart-timeline"], layout["charts"]["chart-idle"]
        self.assertLess(cost["x"] + cost["w"], eff["x"])
        self.assertLess(max(cost["y"] + cost["h"], eff["y"] + eff["h"]), timeline["y"])
        self.assertLess(timeline["y"] + timeline["h"], idle["y"])
        self.assertGreater(timeline["w"], WIDTH * 0.7)

        def seen(crop, colour, minimum):
            n = count_color(crops[crop], colour)
            self.assertGreater(n, minimum, "%s: %d pixels of %s" % (crop, n, colour))

        # The top seven owners take the palette in order, in both charts of cost.
        for colour in PALETTE[:7]:
            seen("chart-cost", colour, 100)
            seen("chart-timeline", colour, 1000)
        seen("chart-cost", IDLE, 100)
        seen("chart-cost", OTHER, 100)
        seen("chart-timeline", IDLE, 1000)
        seen("chart-timeline", OTHER, 1000)
        for colour in EFFICIENCY_BANDS:
            seen("chart-efficiency", colour, 100)
        seen("chart-idle", IDLE_LINE, 1000)
        seen("chart-idle", DONUT_REST, 1000)
        # Each chart keeps to its own colours: no timeline palette in the efficiency bands' chart.
        self.assertLess(count_color(crops["chart-efficiency"], PALETTE[0]), 20)


if __name__ == "__main__":
    unittest.main()
