"""`qsim report` pages as a reader sees them: rendered by a real headless Chromium."""

from __future__ import annotations

import math
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image
from shared_paths import TRACES

from cobaltlite.experiments.report import _binned_means

LUBLIN = TRACES / "lublin_256.swf.gz"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

SWEEP = f"""
name: report-test
traces:
  - file: {LUBLIN}
    end: 300000
    arrival_scale: [1.0, 0.8]
machines: [flat:256]
policies:
  - fcfs
  - name: balanced
    params: {{balance_factor: [0.0, 1.0]}}
repetitions: 2
"""
FIGURES = {"wait-cdf.png", "bsd-cdf.png", "queue-utilization.png", "categories.png", "gantt.png"}


def qsim(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cobaltlite.qsim.cli", *args],
                          capture_output=True, text=True, timeout=300)


class Images(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.sources: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "img":
            self.sources.append(dict(attrs)["src"] or "")


@pytest.fixture(scope="module")
def sweep_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("report")
    (root / "exp.yaml").write_text(SWEEP)
    ran = qsim("sweep", str(root / "exp.yaml"), "--out", str(root / "sweep"), "--workers", "2",
               "-q")
    assert ran.returncode == 0, ran.stderr
    made = qsim("report", str(root / "sweep"))
    assert made.returncode == 0, made.stderr
    page = Path(made.stdout.strip())
    assert page == root / "sweep" / "report" / "index.html"
    return page


def test_a_sweep_report_names_every_figure_and_every_figure_is_a_png(sweep_report: Path) -> None:
    parser = Images()
    parser.feed(sweep_report.read_text())
    expected = FIGURES | {"sweep-arrival_scale.png", "sweep-balance_factor.png"}
    assert set(parser.sources) == expected
    for name in expected:
        with Image.open(sweep_report.parent / name) as image:
            assert image.format == "PNG" and image.width > 300
    text = sweep_report.read_text()
    assert "<script" not in text
    assert "policy=fcfs" in text and "policy=balanced balance_factor=0.0" in text
    assert "Qsim runs compared" in text  # qsim's own comparison table


@pytest.mark.skipif(CHROMIUM is None, reason="needs a Chromium browser: install Debian's "
                    "'chromium' package (apt-get install chromium)")
def test_headless_chromium_renders_the_report_with_no_broken_image(
    sweep_report: Path, tmp_path: Path
) -> None:
    assert CHROMIUM is not None
    browser = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1400,6000"]
    shot = tmp_path / "page.png"
    subprocess.run([*browser, f"--screenshot={shot}", sweep_report.as_uri()],
                   capture_output=True, timeout=120, check=True)
    with Image.open(shot) as image:
        assert image.size == (1400, 6000)
        # A page whose images did not load is white but for text: the figures' colours show.
        assert len(image.convert("RGB").getcolors(maxcolors=1 << 20) or []) > 200
    # The report has no script; a probe copy beside it asks the browser, after load, which
    # images failed to decode (naturalWidth 0) and writes the answer into the DOM it dumps.
    probe = sweep_report.with_name("probe.html")
    probe.write_text(sweep_report.read_text().replace("</body>", """<script>
window.addEventListener("load", () => {
  const images = [...document.images];
  document.body.dataset.loaded = images.filter(i => i.complete && i.naturalWidth > 0)
    .map(i => i.getAttribute("src")).join(" ");
  document.body.dataset.broken = images.filter(i => !(i.complete && i.naturalWidth > 0))
    .map(i => i.getAttribute("src")).join(" ");
});
</script></body>"""))
    try:
        dom = subprocess.run([*browser, "--virtual-time-budget=10000", "--dump-dom",
                              probe.as_uri()], capture_output=True, text=True, timeout=120,
                             check=True).stdout
    finally:
        probe.unlink()
    loaded = re.search(r'data-loaded="([^"]*)"', dom)
    broken = re.search(r'data-broken="([^"]*)"', dom)
    assert loaded is not None and broken is not None, dom[:2000]
    assert broken.group(1) == ""
    assert set(loaded.group(1).split()) == FIGURES | {"sweep-arrival_scale.png",
                                                       "sweep-balance_factor.png"}


def test_a_report_of_qsim_out_with_several_policies_compares_them(tmp_path: Path) -> None:
    ran = qsim("--trace", str(LUBLIN), "--end", "300000", "--machine", "flat:256", "--policy",
               "fcfs,wfp3", "--out", str(tmp_path / "out"), "-q")
    assert ran.returncode == 0, ran.stderr
    made = qsim("report", str(tmp_path / "out"), "--out", str(tmp_path / "page"))
    assert made.returncode == 0, made.stderr
    parser = Images()
    parser.feed((tmp_path / "page" / "index.html").read_text())
    assert set(parser.sources) == FIGURES
    assert all((tmp_path / "page" / name).stat().st_size > 1000 for name in FIGURES)


def test_a_directory_without_replays_is_refused_by_name(tmp_path: Path) -> None:
    made = qsim("report", str(tmp_path))
    assert made.returncode == 1
    assert f"qsim report: error: {tmp_path}: no summary.json" in made.stderr
    assert not (tmp_path / "report").exists()


@settings(max_examples=200, deadline=None)
@given(steps=st.lists(st.tuples(st.floats(0.001, 1e6), st.integers(0, 40960)), min_size=2,
                      max_size=60),
       bins=st.integers(1, 300))
def test_utilization_bins_keep_the_node_seconds_of_the_series(
    steps: list[tuple[float, int]], bins: int
) -> None:
    """The binned curve is only a coarser view: every node-second of the step function is in
    exactly one bin, and no bin's mean exceeds the highest level."""
    times, levels, now = [], [], 0.0
    for gap, level in steps:
        now += gap
        times.append(now)
        levels.append(level)
    edges, means = _binned_means(times, levels, bins)
    assert len(edges) == bins + 1 and len(means) == bins
    exact = math.fsum(level * (b - a)
                      for level, a, b in zip(levels, times, times[1:], strict=False))
    binned = math.fsum(m * (b - a)
                       for m, a, b in zip(means, edges, edges[1:], strict=False))
    assert binned == pytest.approx(exact, rel=1e-9, abs=1e-6)
    assert max(means) <= max(levels[:-1]) * (1 + 1e-9) + 1e-9
