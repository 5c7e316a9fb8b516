"""The landing page, loaded by headless Chromium from a live agent on the simulated node."""
import html.parser
import os
import shutil
import subprocess
import tempfile

from harness import AgentTestCase, Agent, DEPLOY_SCENARIOS, parse_text, sample, wait_until

SCENARIO = os.path.join(DEPLOY_SCENARIOS, "h100-8x-three-teams.yaml")


class TableRows(html.parser.HTMLParser):
    """Collects the text of each cell of each <tr> in <tbody>."""

    def __init__(self):
        super().__init__()
        self.rows, self._row, self._cell, self._in_body = [], None, None, False
        self.links = []

    def handle_starttag(self, tag, attrs):
        if tag == "tbody":
            self._in_body = True
        elif tag == "tr" and self._in_body:
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = ""
        elif tag == "a":
            self.links.append(dict(attrs).get("href"))

    def handle_endtag(self, tag):
        if tag == "tbody":
            self._in_body = False
        elif tag in ("td", "th") and self._cell is not None:
            self._row.append(self._cell.strip())
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.rows.append(self._row)
            self._row = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data


def chromium_dom(url):
    profile = tempfile.mkdtemp(prefix="gpumeter-chromium-")
    try:
        r = subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                            "--no-first-run", "--disable-background-networking", "--disable-component-update",
                            "--disable-sync", "--user-data-dir=" + profile, "--dump-dom", url],
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise AssertionError("chromium failed (%d): %s" % (r.returncode, r.stderr[-2000:]))
        return r.stdout
    finally:
        shutil.rmtree(profile, ignore_errors=True)


class LandingPage(AgentTestCase):
    def test_chromium_shows_every_gpu_with_status_and_links(self):
        agent = self.track(Agent(scenario=SCENARIO))
        agent.wait_ready()
        wait_until(lambda: all(sample(parse_text(agent.metrics()[1]), "gpu_up", gpu=str(i)) == 1 for i in range(8)),
                   30, what="8 GPUs up")
        dom = chromium_dom(agent.base + "/")
        self.assertIn("<title>gpumeter", dom)
        parser = TableRows()
        parser.feed(dom)
        gpu_rows = [r for r in parser.rows if any("NVIDIA H100 80GB HBM3" in c for c in r)]
        self.assertEqual(len(gpu_rows), 8, parser.rows)
        for row in gpu_rows:
            self.assertTrue(any(c.lower().startswith("up") for c in row), row)
            self.assertTrue(any(c.startswith("GPU-") for c in row), row)
        for link in ("/metrics", "/-/healthy", "/-/ready"):
            self.assertIn(link, parser.links)
