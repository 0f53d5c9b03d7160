"""The dashboard in a real browser (Debian's chromium driven by Playwright) against a real PostgreSQL
filled by the real ingest, served by ``demuxlab dashboard`` (waitress) through the read-only role.

One database, one server and one browser for the module; the tests run in order: the empty database
first, then runs are ingested and every page is looked at. The data (helpers.dashboard_sample): the
``dashdemo`` experiment in two spec versions, the first run days ago on one server build (the sanitizer
build of this checkout), the second on another (the release build) and still running; and the quickstart's
``smoke`` stopped an hour ago with runs to go. Screenshots go to ``build/test-artifacts/dashboard/`` (or
``$DEMUXLAB_TEST_ARTIFACTS``); the tests that check what a figure shows read Plotly's own figure state in
the page (``gd._fullData``, ``gd._fullLayout``), as drawn.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from helpers import dashboard_sample as sample
from helpers.netns import private_netns

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.browser]

CHROMIUM = os.environ.get("DEMUXLAB_CHROMIUM", "/usr/bin/chromium")
REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("DEMUXLAB_TEST_ARTIFACTS", REPO / "build" / "test-artifacts")) / "dashboard"
TIMEOUT_MS = 30_000

if not Path(CHROMIUM).is_file():
    pytest.skip(f"no chromium at {CHROMIUM} (scripts/setup.sh installs it)", allow_module_level=True)
playwright_api = pytest.importorskip("playwright.sync_api")


@dataclass
class Site:
    base: str
    url: str  # the owner's URL of the test database (for ingesting)
    runs: list[Any]  # dashdemo's planned (point, repeat), in run order
    spec: Any  # dashdemo, second version (the one running)
    old: list[Path]  # dashdemo's first version: every run, days ago, on the older build
    smoke: list[Path]  # smoke: stopped an hour ago with runs to go
    tmp: Path
    builds: tuple[dict[str, Any], dict[str, Any]]
    page: Any
    console: list[str] = field(default_factory=list)
    responses: list[tuple[int, str]] = field(default_factory=list)
    ingested: int = 0
    drop: Any = None  # () -> None: drop the database (the server loses it)
    create: Any = None  # () -> None: create it again, empty, at schema head

    @property
    def planned(self) -> int:
        return len(self.runs)

    def goto(self, path: str, wait_for: str | None = None) -> Any:
        self.page.goto(self.base + path)
        if wait_for:
            self.page.wait_for_selector(wait_for, timeout=TIMEOUT_MS)
        return self.page

    def ingest_files(self, paths: list[Path]) -> None:
        from sqlalchemy import create_engine

        from demuxlab.ingest import ingest_files

        engine = create_engine(self.url)
        try:
            ingest_files(paths, engine=engine)
        finally:
            engine.dispose()

    def ingest(self, upto: int) -> None:
        """dashdemo's next runs, as the running sweep makes them: they finish now, one after another."""
        batch = self.runs[self.ingested : upto]
        start = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=14 * len(batch))
        failed = {f"{p.point_key}|{r}" for p, r in self.runs[3:5]}
        paths = sample.write_records(
            self.spec,
            batch,
            self.tmp / "dashdemo",
            fail_keys=failed,
            artifacts=self.builds[1],
            start=start,
            factor=changed_by_the_new_build,
        )
        self.ingest_files(paths)
        self.ingested = upto

    def shot(self, name: str) -> None:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        self.page.wait_for_timeout(400)  # let Plotly finish its transitions
        self.page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)

    def graph(self, graph_id: str) -> dict[str, Any]:
        """The rendered figure of a dcc.Graph: trace names and subplot titles, as Plotly holds them."""
        self.page.wait_for_selector(f"#{graph_id} .js-plotly-plot .main-svg", timeout=TIMEOUT_MS)
        result: dict[str, Any] = self.page.evaluate(
            """(id) => { const gd = document.querySelector('#' + id + ' .js-plotly-plot');
                return {names: gd.data.map(t => t.name || ''),
                        titles: (gd.layout.annotations || []).map(a => a.text),
                        title: gd.layout.title && gd.layout.title.text}; }""",
            graph_id,
        )
        return result

    def choose(self, dropdown_id: str, option: str) -> None:
        self.page.click(f"#{dropdown_id}")
        self.page.get_by_role("option", name=option, exact=True).click()
        self.page.keyboard.press("Escape")

    def no_console_errors(self) -> None:
        errors, self.console[:] = list(self.console), []
        assert not errors, f"browser console errors: {errors}"
        bad, self.responses[:] = [r for r in self.responses if r[0] >= 500], []
        assert not bad, f"server errors: {bad}"
        assert self.page.locator("#frame-page-error").count() == 0, self.page.inner_text("#frame-page-error")

    def drawn(self, graph_id: str) -> dict[str, Any]:
        """What Plotly drew: each trace's name, mode, fill, line and marker colour, its y values and axis,
        its marker count in the SVG; and every y axis's range."""
        self.page.wait_for_selector(f"#{graph_id} .js-plotly-plot .main-svg", timeout=TIMEOUT_MS)
        self.page.wait_for_timeout(300)
        result: dict[str, Any] = self.page.evaluate(
            r"""(id) => {
                const gd = document.querySelector('#' + id + ' .js-plotly-plot');
                const traces = gd._fullData.map((t, i) => ({
                    name: t.name || '', mode: t.mode || '', fill: t.fill || 'none', type: t.type,
                    colour: (t.line && t.line.color) || '', marker: (t.marker && typeof t.marker.color ===
                        'string') ? t.marker.color : '', yaxis: t.yaxis || 'y', visible: t.visible,
                    y: Array.from(t.y || []), points: 0, index: i,
                    customdata: Array.from(t.customdata || []).slice(0, 3)}));
                document.querySelectorAll('#' + id + ' .scatterlayer .trace').forEach((el) => {
                    const t = el.__data__ && el.__data__[0] && el.__data__[0].trace;
                    if (t) { traces[t.index].points = el.querySelectorAll('.points path').length; }
                });
                const axes = {};
                for (const [k, v] of Object.entries(gd._fullLayout)) {
                    if (/^[xy]axis\d*$/.test(k) && v && v.range) {
                        axes[k] = {range: v.range.slice(), visible: v.visible,
                                   ticks: (v._vals || []).map(t => t.text), title: v.title && v.title.text};
                    }
                }
                return {traces: traces, axes: axes, height: gd._fullLayout.height,
                        legendHeight: (gd._fullLayout.legend && gd._fullLayout.legend._height) || 0,
                        legendScroll: Array.from(document.querySelectorAll('#' + id + ' .legend .scrollbar'))
                            .some(el => Number(el.getAttribute('height') || 0) > 0)};
            }""",
            graph_id,
        )
        return result


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


_HEALTHZ = (
    "import sys, urllib.request; sys.exit(urllib.request.urlopen(sys.argv[1], timeout=2).status != 200)"
)


def _healthy(url: str, netns: list[str] | None) -> bool:
    if netns is None:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                return bool(r.status == 200)
        except OSError:
            return False
    # The server's loopback is the namespace's: ask from inside it.
    probe = [*netns, sys.executable, "-c", _HEALTHZ, url]
    return subprocess.run(probe, capture_output=True, timeout=30, check=False).returncode == 0


def _wait_healthy(base: str, proc: subprocess.Popen[bytes], log: Path, netns: list[str] | None) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"dashboard exited {proc.returncode}: {log.read_text()[-2000:]}")
        if _healthy(base + "/healthz", netns):
            return
        time.sleep(0.3)
    raise AssertionError(f"dashboard did not answer /healthz: {log.read_text()[-2000:]}")


def changed_by_the_new_build(point: Any) -> float:
    """What the newer server build did to dashdemo's points: lf over select at 8 threads got 20 % slower,
    hsha over epoll-lt at 4 threads 15 % faster; nothing else changed (beyond ±3 % noise per run)."""
    if (point.pattern, point.notifier, point.threads) == ("lf", "select", 8):
        return 0.8
    if (point.pattern, point.notifier, point.threads) == ("hsha", "epoll-lt", 4):
        return 1.15
    return 1.0


def _warm_kernels() -> None:
    """Compile (or load from the kernel cache, ``demuxlab.ctmc.engine.cache_dir``, which the dashboard's
    process shares) the SSA and fluid kernels of every modelled pattern before the pages are timed: a chain
    whose code changed compiles on its first what-if, 7-33 s a pattern here when quiet (95 s for all), far
    beyond a page's wait on a busy host. The pages are tested, not numba's compile time."""
    from demuxlab.ctmc.rates import min_threads, paper_rates
    from demuxlab.dashboard import whatif
    from demuxlab.vocab import METHOD_SSA

    for pattern in whatif.model_patterns():
        lowest = int(min_threads(pattern))
        whatif.predict_curve(pattern, paper_rates(pattern), [lowest], 5.0, 32, METHOD_SSA)
        whatif.quick_curve(pattern, paper_rates(pattern), [lowest], 5.0, 32)


@pytest.fixture(scope="module")
def site(pg_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    import uuid

    from sqlalchemy import make_url

    tmp = tmp_path_factory.mktemp("dash")
    name = f"test_dash_{uuid.uuid4().hex[:10]}"
    url = pg_server.create_database(name, pg_server.template)
    ro_url = (
        make_url(url)._replace(username="demuxlab_ro", password=None).render_as_string(hide_password=False)
    )
    builds = sample.server_builds()
    spec = sample.load(tmp)
    now = dt.datetime.now(dt.UTC)
    v1 = sample.load(tmp, sample.SPEC_V1)
    old = sample.write_records(
        v1, sample.planned(v1), tmp / "v1", artifacts=builds[0], start=now - dt.timedelta(days=3)
    )
    smoke = sample.load_smoke(tmp)
    smoke_runs = sample.planned(smoke)[:20]  # of 33 (9 calibration runs: one per design): 13 to go
    # as the quickstart on a 2-core machine: the server pinned to 1 CPU, its 2-thread points oversubscribed
    smoke_records = sample.write_records(
        smoke,
        smoke_runs,
        tmp / "smoke",
        artifacts=builds[1],
        start=now - dt.timedelta(hours=2),
        wall_s=3,
        server_cpus=1,
    )
    # Server and browser in a network namespace of their own (helpers.netns: immune to the address
    # changes other tests make); it reaches the database only through its Unix socket.
    unix_socket = make_url(ro_url).host is None
    stack = contextlib.ExitStack()
    netns = stack.enter_context(private_netns("dlxdash")) if unix_socket else None
    chromium = CHROMIUM
    if netns is not None:
        wrapper = tmp / "chromium-in-netns"
        wrapper.write_text(f'#!/bin/sh\nexec {shlex.join(netns)} {shlex.quote(CHROMIUM)} "$@"\n')
        wrapper.chmod(0o755)
        chromium = str(wrapper)
    _warm_kernels()
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp / "dashboard.log"
    env = {**os.environ, "DEMUXLAB_DASHBOARD_DATABASE_URL": ro_url}
    with log.open("wb") as out, contextlib.ExitStack() as on_error:
        on_error.callback(stack.close)  # the namespace goes if the server cannot even start
        proc = subprocess.Popen(
            [
                *(netns or []),
                str(Path(sys.executable).parent / "demuxlab"),
                "dashboard",
                "--port",
                str(port),
                "--refresh-ms",
                "1000",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        on_error.pop_all()
    try:
        _wait_healthy(base, proc, log, netns)
        with playwright_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            context = browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
            context.set_default_timeout(TIMEOUT_MS)
            page = context.new_page()
            s = Site(
                base=base,
                url=url,
                runs=sample.planned(spec),
                spec=spec,
                old=old,
                smoke=smoke_records,
                tmp=tmp,
                builds=builds,
                page=page,
                drop=lambda: pg_server.drop_database(name),
                create=lambda: pg_server.create_database(name, pg_server.template),
            )
            page.on("console", lambda m: s.console.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: s.console.append(str(e)))
            page.on("response", lambda r: s.responses.append((r.status, r.url)))
            try:
                yield s
            finally:
                browser.close()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        shutil.copy(log, ARTIFACTS / "dashboard.log") if ARTIFACTS.is_dir() else None
        pg_server.drop_database(name)
        stack.close()


def test_empty_database_says_so(site: Site) -> None:
    site.goto("/", "#frame-empty-db")
    assert "No experiments in the database yet" in site.page.inner_text("#frame-empty-db")
    site.goto("/sweep", "#frame-empty-db")
    site.shot("empty")
    site.no_console_errors()


def test_lost_database_shows_a_page_and_the_page_recovers(site: Site) -> None:
    site.drop()
    try:
        site.goto("/", "[role=alert]")
        site.page.wait_for_selector("#frame-db-down", state="attached")
        assert "Database unavailable" in site.page.inner_text("[role=alert]")
        site.shot("unavailable")
    finally:
        site.console.clear()  # the health checks' 503s are logged by the browser: expected here
        site.create()
    # The page polls /healthz and reloads itself once the database answers.
    site.page.wait_for_selector("#frame-empty-db", timeout=TIMEOUT_MS)
    site.console.clear()


def test_every_page_renders(site: Site) -> None:
    site.ingest_files(site.old)  # dashdemo's first version, on the older build, days ago
    site.ingest(site.planned - 12)  # the second, running now; the rest is ingested by the live test
    site.ingest_files(site.smoke)
    sample.store_model(site.spec, site.url)
    site.goto("/?experiment=dashdemo", "#experiments-title")
    assert "dashdemo" in site.page.inner_text("#experiments-title")
    assert int(site.page.inner_text("#experiments-failed")) == 2
    assert site.page.inner_text("#experiments-state") == "running"
    site.shot("experiments")

    site.goto("/sweep?experiment=dashdemo", "#sweep-graph .js-plotly-plot")
    fig = site.graph("sweep-graph")
    assert "hsha" in fig["names"] and "lf" in fig["names"]
    assert any("paper rates" in n for n in fig["names"]) and any("calibrated" in n for n in fig["names"])
    assert {"notifier: epoll-lt", "notifier: select"} <= set(fig["titles"])
    site.shot("sweep")

    site.goto("/operations?experiment=dashdemo", "#operations-graph .js-plotly-plot")
    ops = site.graph("operations-graph")
    assert "obtain events (notifier call)" in ops["titles"] and "lock wait" in ops["titles"]
    site.shot("operations")

    site.goto("/model?experiment=dashdemo", "#model-whatif-graph .js-plotly-plot")
    assert site.graph("model-whatif-graph")["names"][0] == "fluid"
    site.page.wait_for_selector("#model-validation .dash-spreadsheet")
    # Every rate at once (the calibrations measured them all): each name stays clear of its neighbours,
    # and the legend is whole.
    rates = site.drawn("model-rates-graph")
    assert not rates["legendScroll"] and len(rates["axes"]["xaxis"]["ticks"]) == 16
    assert [t["name"] for t in rates["traces"][:2]] == [
        "paper: hsha, proactor, uring-shared",
        "paper: lf, uring",
    ]
    assert site.page.evaluate(
        """() => { const boxes = Array.from(document.querySelectorAll('#model-rates-graph .xtick text'))
                     .map(t => t.getBoundingClientRect()).sort((a, b) => a.left - b.left);
                   return boxes.every((b, i) => i === 0 || boxes[i - 1].right + 2 <= b.left); }"""
    ), "rate names under the bars run into each other"
    site.shot("model")

    site.goto("/compare?a=dashdemo&b=dashdemo&b_pair=local", "#compare-graph .js-plotly-plot")
    assert any(n.endswith("· A: dashdemo") for n in site.graph("compare-graph")["names"])
    site.shot("compare")

    site.goto("/hosts", "#hosts-topology-graph .js-plotly-plot")
    assert "node-a" in site.page.inner_text("#hosts-table")
    site.shot("hosts")

    site.goto("/claims?experiment=dashdemo", "#claims-body")
    site.page.wait_for_selector("#claims-table")
    claims_text = site.page.inner_text("#claims-table")
    # One verdict row per claim of demuxlab.claims, decided from this experiment's ingested points.
    from demuxlab.claims import CLAIMS, VERDICTS

    assert all(c.id in claims_text for c in CLAIMS)
    assert any(v in claims_text for v in VERDICTS)
    site.no_console_errors()


def test_the_sweep_figure_is_true(site: Site) -> None:
    """No marker inside a band; no throughput axis below zero; every facet with its ticks; a whole legend."""
    site.goto("/sweep?experiment=smoke&facet=notifier", "#sweep-graph .js-plotly-plot")
    drawn = site.drawn("sweep-graph")
    bands = [t for t in drawn["traces"] if t["fill"] == "toself"]
    for t in bands:
        assert t["mode"] == "lines" and t["points"] == 0, t  # an outline: no marker drawn on it
    markers = [t for t in drawn["traces"] if "markers" in t["mode"] and t["points"]]
    assert markers and all(t["fill"] == "none" for t in markers)
    repeats = [t for t in drawn["traces"] if t["name"].endswith("repeats")]
    assert repeats and all(
        len(str(c)) == 36 for t in repeats for c in t["customdata"]
    )  # a click opens its run
    throughput = [
        a for k, a in drawn["axes"].items() if k.startswith("yaxis") and a["title"] == "throughput (msg/s)"
    ]
    assert throughput and all(a["range"][0] >= 0 for a in throughput)
    assert all(min(t["y"] or [0]) >= 0 for t in drawn["traces"] if t["yaxis"] == "y")
    # smoke has 2 repeats per point: their intervals are drawn (one rule, demuxlab.marks), no "too wide";
    # its 2-thread points ran on 1 server CPU: ringed, and the figure says so.
    titles = " ".join(site.graph("sweep-graph")["titles"])
    assert "too wide" not in titles and "ringed:" in titles and "oversubscribed" in titles
    rings = [t for t in drawn["traces"] if t["name"].startswith("oversubscribed")]
    assert rings and all(t["points"] for t in rings)
    # Every facet (every notifier column) shows its thread ticks, whole numbers only.
    visible_x = [a for k, a in drawn["axes"].items() if k.startswith("xaxis") and a["visible"] and a["ticks"]]
    facets = [t for t in site.graph("sweep-graph")["titles"] if t.startswith("notifier: ")]
    assert len(visible_x) >= len(facets) >= 5
    assert all(tick.isdigit() for a in visible_x for tick in a["ticks"])
    assert drawn["legendHeight"] <= drawn["height"] and not drawn["legendScroll"]
    site.shot("sweep-smoke")

    # dashdemo's first version: 3 runs per point, bands drawn; still outlines only, nothing below zero.
    v1 = sample.load(site.tmp, sample.SPEC_V1).sha256[:8]
    site.goto(f"/sweep?experiment=dashdemo@{v1}", "#sweep-graph .js-plotly-plot")
    drawn = site.drawn("sweep-graph")
    bands = [t for t in drawn["traces"] if t["fill"] == "toself"]
    assert len(bands) == 4 and all(t["mode"] == "lines" and t["points"] == 0 for t in bands)
    axes = drawn["axes"]
    assert axes["yaxis"]["range"][0] == 0 and min(min(t["y"]) for t in bands) >= 0
    residual = axes["yaxis3"]["range"]  # the residual panel fits its residuals (about +12 %)
    assert residual[0] < 0 < 12 < residual[1] < 100
    site.shot("sweep-bands")
    site.no_console_errors()


def pattern_colours(drawn: dict[str, Any]) -> dict[str, set[str]]:
    """pattern → the line colours of the traces named after it (``hsha · …``)."""
    from demuxlab.vocab import PATTERNS

    out: dict[str, set[str]] = {}
    for t in drawn["traces"]:
        head = t["name"].split(" · ")[0]
        if head in PATTERNS and t["colour"] and t["fill"] == "none" and not t["colour"].startswith("rgba"):
            out.setdefault(head, set()).add(t["colour"].lower())
    return out


def test_each_pattern_has_one_colour_on_every_page(site: Site) -> None:
    from demuxlab.dashboard import style

    v1 = sample.load(site.tmp, sample.SPEC_V1).sha256[:8]
    pages = {
        "sweep": ("/sweep?experiment=smoke&facet=none", "sweep-graph"),
        "compare": (f"/compare?a=dashdemo@{v1}&b=dashdemo&c=dashdemo&c_pair=local", "compare-graph"),
        "operations": ("/operations?experiment=smoke", "operations-graph"),
    }
    seen: dict[str, dict[str, set[str]]] = {}
    for page, (path, graph) in pages.items():
        site.goto(path, f"#{graph} .js-plotly-plot")
        seen[page] = pattern_colours(site.drawn(graph))
        assert seen[page], page
        site.shot(f"colours-{page}")
        if page == "compare":  # the ratios to A are numbered (B's ratio axis, under the second column: y5)
            ticks = site.page.locator(f"#{graph} .yaxislayer-above .y5tick text").all_text_contents()
            assert len(ticks) >= 2 and all(float(t) > 0 for t in ticks), ticks
    patterns = set().union(*seen.values())
    assert {"hsha", "lf", "reactor", "tpc"} <= patterns
    for pattern in patterns:
        colours = {c for page in seen.values() for c in page.get(pattern, set())}
        assert colours == {style.PATTERN_COLOUR[pattern].lower()}, (pattern, seen)
    site.no_console_errors()


PAGES: dict[str, tuple[str, ...]] = {
    "/": ("experiment",),
    "/sweep": ("experiment", "x", "facet", "patterns"),
    "/ranking": ("experiment", "workload"),
    "/history": ("experiment",),
    "/operations": ("experiment", "x"),
    "/run": ("run",),
    "/model": ("experiment", "pattern", "threads", "r_l"),
    "/compare": ("a", "b_build"),
    "/hosts": ("host",),
    "/claims": ("experiment",),
}


def test_every_address_is_answered(site: Site) -> None:
    """A NUL, a 20,000-character value and a repeated key, on every page: a short message, no 500, no page
    blown wide by the echo."""
    long = "x" * 20_000
    for path, keys in PAGES.items():
        for key in keys:
            for query, says in (
                (f"{key}=%00", "NUL"),
                (f"{key}={long}", "20,000 characters"),
                (f"{key}=1&{key}=2", "given 2 times"),
            ):
                site.responses.clear()
                site.goto(f"{path}?{query}", "#frame-address")
                text = site.page.inner_text("#frame-address")
                assert says in text and key in text, (path, query[:40], text)
                assert len(text) < 600
                width = site.page.evaluate("() => document.documentElement.scrollWidth")
                assert width <= 1400 + 20, (path, key, width)
                assert not [r for r in site.responses if r[0] >= 500], (path, query[:40])
    site.goto("/sweep?experiment=%00", "#frame-address")
    site.shot("address-nul")
    # Forms the platform accepts name an experiment: a version pinned by name@sha, or the numeric id.
    sha = site.spec.sha256[:8]
    site.goto(f"/?experiment=dashdemo@{sha}", "#experiments-title")
    assert sha in site.page.inner_text("#experiments-title")
    site.goto("/?experiment=1", "#experiments-title")
    assert "dashdemo" in site.page.inner_text("#experiments-title")
    site.goto(f"/sweep?experiment=dashdemo@{sha}", "#sweep-graph .js-plotly-plot")
    assert sha in site.graph("sweep-graph")["title"]
    site.no_console_errors()


def test_run_page_shows_seconds_pinning_and_failure(site: Site) -> None:
    from demuxlab.spec import run_id

    point, repeat = site.runs[0]
    rid = run_id(site.spec, point, repeat)
    site.goto(f"/run?run={rid}", "#run-timeline-graph .js-plotly-plot")
    timeline = site.graph("run-timeline-graph")
    assert "stationary" in timeline["title"]
    assert "measure" in timeline["titles"]
    topo = site.graph("run-topology-graph")
    assert "server" in topo["names"]
    assert any(t.startswith("server: node-a") for t in topo["titles"])
    site.shot("run")
    point, repeat = site.runs[3]
    site.goto(f"/run?run={run_id(site.spec, point, repeat)}", "#run-failure")
    assert "connection reset by peer" in site.page.inner_text("#run-failure")
    assert "stationarity: none (the run failed" in site.graph("run-timeline-graph")["title"]
    site.no_console_errors()


def test_filters_change_the_plot_and_the_url(site: Site) -> None:
    site.goto("/sweep?experiment=dashdemo", "#sweep-graph .js-plotly-plot")
    before = site.graph("sweep-graph")
    site.choose("sweep-facet", "none")
    site.page.wait_for_function(
        "() => !(document.querySelector('#sweep-graph .js-plotly-plot').layout.annotations || [])"
        ".some(a => a.text.startsWith('notifier:'))"
    )
    assert "facet=none" in site.page.url
    site.page.get_by_role("option", name="model: paper rates").click()
    site.page.wait_for_function(
        "() => !document.querySelector('#sweep-graph .js-plotly-plot').data"
        ".some(t => (t.name || '').includes('paper rates'))"
    )
    after = site.graph("sweep-graph")
    assert after["names"] != before["names"]
    assert "show=calibration%2Cresiduals" in site.page.url or "show=calibration,residuals" in site.page.url
    # the cost axis's side is part of the view: the address keeps it
    site.page.get_by_label("client", exact=True).check()
    site.page.wait_for_function("() => window.location.search.includes('side=client')")
    assert "cost=syscalls" in site.page.url
    site.no_console_errors()


def test_shared_url_restores_the_view(site: Site) -> None:
    site.goto(
        "/sweep?experiment=dashdemo&x=threads&colour=notifier&facet=pattern&patterns=lf&show=paper",
        "#sweep-graph .js-plotly-plot",
    )
    fig = site.graph("sweep-graph")
    assert set(fig["titles"]) >= {"pattern: lf"} and "pattern: hsha" not in fig["titles"]
    assert "epoll-lt" in fig["names"] and "select" in fig["names"]
    assert not any("calibrated" in n for n in fig["names"])
    assert site.page.inner_text("#sweep-colour") == "pattern" or "notifier" in site.page.inner_text(
        "#sweep-colour"
    )
    # the cost axis too: its cost and its side from the address
    site.goto("/sweep?experiment=dashdemo&cost=ctx_voluntary&side=client", "#sweep-cost-graph .main-svg")
    # its title names both (or, where no run has that cost, its message does)
    site.page.wait_for_function(
        """() => { const l = document.querySelector('#sweep-cost-graph .js-plotly-plot').layout;
                   const t = [(l.title || {}).text || '', ...(l.annotations || []).map(a => a.text)];
                   return t.some(s => s.includes('client, voluntary context switches')
                                      || s.includes('client ctx_voluntary')); }"""
    )
    assert "voluntary context switches" in site.page.inner_text("#sweep-cost-metric")
    assert site.page.get_by_label("client", exact=True).is_checked()
    site.no_console_errors()


def test_downloads_produce_files(site: Site, tmp_path: Path) -> None:
    site.goto("/sweep?experiment=dashdemo", "#sweep-graph .js-plotly-plot .main-svg")
    sizes = {}
    for button, suffix in (
        ("#sweep-graph-pdf", ".pdf"),
        ('[id*=\'"fmt":"svg"\'][id*=\'"graph":"sweep-graph"\']', ".svg"),
        ('[id*=\'"fmt":"png"\'][id*=\'"graph":"sweep-graph"\']', ".png"),
    ):
        with site.page.expect_download() as info:
            site.page.click(button)
        path = tmp_path / info.value.suggested_filename
        info.value.save_as(path)
        assert path.suffix == suffix
        sizes[suffix] = path.stat().st_size
        head = path.read_bytes()[:8]
        assert {".pdf": b"%PDF", ".png": b"\x89PNG", ".svg": b"<svg"}[suffix] in head or suffix == ".svg"
    svg = next(tmp_path.glob("*.svg")).read_text()
    assert "<svg" in svg[:400]
    # The export keeps the whole legend: every series the page names is in the file.
    for name in ("hsha", "lf", "hsha · model, paper rates", "lf · model, calibrated rates"):
        assert f">{name}<" in svg, name
    with site.page.expect_download() as info:
        site.page.click("#sweep-table button.export")
    csv = tmp_path / "table.csv"
    info.value.save_as(csv)
    assert csv.read_text(encoding="utf-8-sig").splitlines()[0].startswith("pattern,notifier,threads")
    assert all(size > 500 for size in sizes.values()), sizes
    site.no_console_errors()


def test_live_view_advances_while_runs_are_ingested(site: Site) -> None:
    site.ingest(site.planned - 9)  # the sweep goes on (minutes may have passed since the last batch)
    site.goto("/?experiment=dashdemo", "#experiments-done")
    before = site.page.inner_text("#experiments-done")
    planned = site.planned
    assert before == f"{site.ingested} / {planned}"
    assert site.page.inner_text("#experiments-state") == "running"
    assert site.page.inner_text("#experiments-eta")[0].isdigit()  # a running sweep has an estimate
    site.ingest(site.planned - 6)
    site.page.wait_for_function(
        f"() => document.querySelector('#experiments-done').innerText === '{site.ingested} / {planned}'"
    )
    site.ingest(site.planned)
    site.page.wait_for_function(
        f"() => document.querySelector('#experiments-done').innerText === '{planned} / {planned}'"
    )
    assert site.page.inner_text("#experiments-remaining") == "0"
    assert site.page.inner_text("#experiments-eta") == "done"
    site.no_console_errors()


def dash_requests(site: Site, seconds: float) -> int:
    site.responses.clear()
    site.page.wait_for_timeout(seconds * 1000)
    return sum(1 for _, u in site.responses if "_dash-update-component" in u)


def test_a_stopped_sweep_shows_no_estimate_and_stops_polling(site: Site) -> None:
    site.goto("/?experiment=smoke", "#experiments-title")
    assert site.page.inner_text("#experiments-state") == "stopped"
    eta = site.page.inner_text("#experiments-eta")
    assert "stopped" in eta and not any(ch.isdigit() for ch in eta)
    assert site.page.inner_text("#experiments-done") == "20 / 33"  # every design calibrated (issue 19)
    assert site.page.inner_text("#experiments-remaining") == "13"
    # The points the server's thread ranges cut are listed apart, with the reason: not "remaining".
    assert site.page.inner_text("#experiments-cut") == "4 points (8 runs)"  # counted both ways
    cut = site.page.inner_text("#experiments-cut-table")
    assert "hsha/epoll-lt/t1/" in cut and "reactor/poll/t2/" in cut and "demux-server --list" in cut
    assert "no run finished for" in site.page.inner_text("#experiments-why")
    # Nothing is running now (dashdemo is complete): the page stops asking (the test server polls every s).
    site.page.wait_for_function(
        "() => document.querySelector('#experiments-live').innerText.startsWith('not')"
    )
    assert dash_requests(site, 3.5) == 0
    site.shot("experiments-stopped")
    site.no_console_errors()


def ranked(site: Site) -> list[str]:
    """The Ranking figure's designs, best first (``lf · select`` …; oversubscribed ones, unranked, last)."""
    labels: list[str] = site.page.evaluate(
        "() => document.querySelector('#ranking-graph .js-plotly-plot').data[0].y"
    )
    return [" · ".join(label.split(" ", 1)[1].split(" · ")[:2]) for label in labels]


def test_ranking_on_two_server_builds(site: Site) -> None:
    older, newer = (b["server"]["sha256"][:8] for b in site.builds)
    site.goto("/ranking?experiment=dashdemo", "#ranking-graph .js-plotly-plot")
    site.page.wait_for_selector("#ranking-table .dash-spreadsheet")
    fig = site.graph("ranking-graph")
    assert f"build {newer}" in fig["title"]
    # the model's rank beside the measured one, from the calibrated rates where the experiment has them
    # (as recommendations.csv)
    assert "model, calibrated rates (its rank in the label)" in fig["names"]
    new = ranked(site)
    assert new[:2] == ["lf · epoll-lt", "hsha · epoll-lt"] and new[-1] == "lf · select"
    table = site.page.inner_text("#ranking-table")
    assert "best" in table and "yes" in table  # Welch's test against the best, per design
    drawn = site.drawn("ranking-graph")
    assert drawn["traces"][0]["type"] == "bar" and drawn["axes"]["xaxis"]["range"][0] == 0
    site.shot("ranking")
    # The first version ran on the older build, before lf/select at 8 threads lost 20 %: there it ranks
    # third, ahead of hsha/select; on the newer build it is last.
    v1 = sample.load(site.tmp, sample.SPEC_V1).sha256[:8]
    site.goto(f"/ranking?experiment=dashdemo@{v1}", "#ranking-graph .js-plotly-plot")
    assert f"build {older}" in site.graph("ranking-graph")["title"]
    old = ranked(site)
    assert old.index("lf · select") == 2 and old.index("hsha · select") == 3
    site.no_console_errors()


def test_history_across_two_server_builds(site: Site) -> None:
    older, newer = (b["server"]["sha256"][:8] for b in site.builds)
    site.goto("/history?experiment=dashdemo", "#history-graph .js-plotly-plot")
    site.page.wait_for_selector("#history-changes .dash-spreadsheet")
    revisions = site.page.inner_text("#history-revisions")
    assert revisions.index(f"build {older}") < revisions.index(f"build {newer}")  # oldest first
    changes = site.page.inner_text("#history-changes")
    rows = [line for line in changes.splitlines() if "regression" in line or "improvement" in line]
    assert len(rows) == 2, changes
    reg = next(r for r in rows if "regression" in r)
    assert "lf/select/t8/" in reg and f"build {older}" in reg and f"build {newer}" in reg
    assert "hsha/epoll-lt/t4/" in next(r for r in rows if "improvement" in r)
    drawn = site.drawn("history-graph")
    assert all(a["range"][0] >= 0 for k, a in drawn["axes"].items() if k.startswith("yaxis"))
    site.shot("history")
    # The change's links: its pair of runs, and the comparison of the two builds.
    site.page.click("#history-changes a[href^='/compare']")
    site.page.wait_for_selector("#compare-graph .js-plotly-plot")
    assert f"b_build={site.builds[1]['server']['sha256'][:19]}" in site.page.url
    site.goto("/history?experiment=dashdemo", "#history-changes .dash-spreadsheet")
    site.page.click("#history-changes a[href^='/run']")
    site.page.wait_for_selector("#run-timeline-graph .js-plotly-plot")
    assert "lf/select/t8/" in site.page.inner_text("main") or "hsha/epoll-lt/t4/" in site.page.inner_text(
        "main"
    )
    site.no_console_errors()


def test_unknown_names_in_the_url_say_so(site: Site) -> None:
    site.goto("/sweep?experiment=no-such-thing", "[role=alert]")
    text = site.page.inner_text("[role=alert]")
    assert "Unknown experiment" in text and "no-such-thing" in text
    site.goto("/run?run=00000000-0000-0000-0000-000000000001", "[role=alert]")
    assert "no run 00000000-0000-0000-0000-000000000001" in site.page.inner_text("[role=alert]")
    site.goto("/nowhere", "text=No such page")
    site.no_console_errors()


def test_what_if_starts_from_the_experiment_with_the_ssa_beside_the_fluid(site: Site) -> None:
    site.goto("/model?experiment=dashdemo", "#model-whatif-graph .js-plotly-plot")
    # dashdemo's workload: hsha first (the first modelled pattern it measured), 10 µs, 64 connections.
    assert (
        site.page.input_value("#model-work") == "10" and site.page.input_value("#model-connections") == "64"
    )
    # a curve over hsha's thread range (2 to 16), the chosen notifier's measured points and the workflow's
    # own predictions of them
    assert site.page.input_value("#model-threads") == "2-16"
    names = site.graph("model-whatif-graph")["names"]
    assert names[0] == "fluid" and "measured · epoll-lt" in names and "measured · select" not in names
    assert "stored prediction, paper rates" in names
    (curve,) = [t for t in site.drawn("model-whatif-graph")["traces"] if t["name"] == "fluid"]
    assert len(curve["y"]) == 15
    site.goto(
        "/model?experiment=dashdemo&pattern=lf&notifier=select&threads=1-4&work=10&connections=64",
        "#model-whatif-graph .js-plotly-plot",
    )
    # 64 connections: the fluid, and the SSA beside each of its points without asking
    names = site.graph("model-whatif-graph")["names"]
    assert names == ["fluid", "SSA (95 % CI)", "measured · select", "stored prediction, paper rates"]
    # Bad inputs are refused in the page's own words; a cleared rate leaves the address clean.
    site.page.fill("#model-work", "-3")
    site.page.press("#model-work", "Enter")
    site.page.wait_for_selector("#model-input-error")
    assert "work per message must be 0 or more" in site.page.inner_text("#model-input-error")  # 0: an echo
    assert "None" not in site.page.inner_text("#model-input-error")
    site.page.fill("#model-work", "10")
    site.page.press("#model-work", "Enter")
    site.page.fill("#model-r_l", "0.5")
    site.page.press("#model-r_l", "Enter")
    site.page.wait_for_function("() => window.location.search.includes('r_l=0.5')")
    site.page.fill("#model-r_l", "")
    site.page.press("#model-r_l", "Enter")
    site.page.wait_for_function("() => !window.location.search.includes('r_l')")
    assert "NaN" not in site.page.url
    assert "lock acquire/release (r_l)" in site.page.inner_text("label[for=model-r_l]")
    site.no_console_errors()


def test_every_pattern_has_its_model_lines_and_a_what_if_on_a_core_count(site: Site) -> None:
    """Issue 19: every pattern's sweep gets its model lines (the smoke spec: six designs), and the what-if
    covers every pattern on a core count (one core: the CPU slots of thread-per-connection add nothing)."""
    smoke = sample.load_smoke(site.tmp)
    sample.store_model(smoke, site.url)  # paper-rate predictions for every measured point of every pattern
    ingested = [json.loads(p.read_text())["point"] for p in site.smoke]
    patterns = {pt["pattern"] for pt in ingested if not pt.get("instrument")}
    assert len(patterns) >= 5  # the stopped sweep still measured most designs
    site.goto("/sweep?experiment=smoke&facet=none", "#sweep-graph .js-plotly-plot")
    names = site.graph("sweep-graph")["names"]
    lines = {n.split(" · ")[0] for n in names if n.endswith("model, paper rates")}
    assert lines == patterns, names
    assert not site.drawn("sweep-graph")["legendScroll"]  # every series and model line named, none hidden
    site.shot("sweep-every-pattern")

    what_if = "/model?experiment=smoke&pattern=tpc&threads=1-4&work=5&connections=32&cores={}"
    site.goto(what_if.format(1), "#model-whatif-graph .js-plotly-plot")
    assert site.page.input_value("#model-cores") == "1"
    assert "1 server core(s)" in (site.graph("model-whatif-graph")["title"] or "")
    (one,) = [t["y"] for t in site.drawn("model-whatif-graph")["traces"] if t["name"] == "fluid"]
    assert len(one) == 4 and max(one) == pytest.approx(min(one), rel=0.01)
    site.goto(what_if.format(4), "#model-whatif-graph .js-plotly-plot")
    site.page.wait_for_function(
        "() => (document.querySelector('#model-whatif-graph .js-plotly-plot').layout.title.text || '')"
        ".includes('4 server core(s)')"
    )
    (four,) = [t["y"] for t in site.drawn("model-whatif-graph")["traces"] if t["name"] == "fluid"]
    assert four[3] > 3 * four[0] and four[0] == pytest.approx(one[0], rel=0.01)
    for pattern in ("reactor", "multireactor", "proactor", "uring", "uring-shared"):
        site.goto(
            f"/model?pattern={pattern}&threads=1-3&work=0&connections=16&cores=2",
            "#model-whatif-graph .js-plotly-plot",
        )
        site.page.wait_for_function(
            f"() => (document.querySelector('#model-whatif-graph .js-plotly-plot').layout.title.text || '')"
            f".includes('What if: {pattern},')"
        )
        # 16 connections: the fluid where the chain holds them all, exact where a tagged design's thread
        # follows 8 or fewer; every thread count drawn by exactly one of them
        drawn = [t for t in site.drawn("model-whatif-graph")["traces"] if t["name"] in ("exact", "fluid")]
        runs = len(drawn[0]["y"]) if drawn else 0  # the thread counts of 1–3 it runs (the reactor: 1)
        assert runs and sum(y is not None for t in drawn for y in t["y"]) == runs, (pattern, drawn)
    site.page.fill("#model-cores", "0")
    site.page.press("#model-cores", "Enter")
    site.page.wait_for_selector("#model-input-error")
    assert "server cores must be more than 0" in site.page.inner_text("#model-input-error")
    site.no_console_errors()


def test_the_what_if_offers_each_rate_of_the_chosen_pattern_and_says_what_it_cannot_answer(
    site: Site,
) -> None:
    """The boxes are the steps the chosen pattern's chain takes (uring's has no lock and no recv of its own:
    the kernel receives inside its call), each showing the rate it would replace; a typed rate moves the
    curve; one the chain does not read, typed into the address, is named as changing nothing; and where the
    fluid approximation stalled (one connection per multireactor thread) the exact solution answers."""
    fluid = "() => document.querySelector('#model-whatif-graph .js-plotly-plot').data[0].y"
    site.goto("/model?pattern=uring&threads=1-4&work=5&connections=64", "#model-whatif-graph .js-plotly-plot")
    site.page.wait_for_function(
        "() => document.querySelector('#model-rates-origin').innerText.includes(\"uring's chain\")"
    )
    shown = [
        k
        for k in ("r_l", "r_i", "r_o", "r_t", "r_e", "r_n", "r_x", "r_z")
        if site.page.is_visible(f"#model-{k}")
    ]
    assert shown == ["r_t", "r_e", "r_n", "r_x", "r_z"]
    assert site.page.get_attribute("#model-r_e", "placeholder") == "0.635"  # seed 001's LF-like notifier
    assert site.page.get_attribute("#model-r_x", "placeholder") == "instant"
    before = site.page.evaluate(fluid)
    site.page.fill("#model-r_x", "20")
    site.page.press("#model-r_x", "Enter")
    site.page.wait_for_function(f"() => ({fluid})()[0] < 0.8 * {before[0]}")
    after = site.page.evaluate(fluid)
    assert len(after) == 4 and all(a < 0.8 * b for a, b in zip(after, before, strict=True))
    site.shot("model-uring-rates")
    # A calibration predicts its own pattern only: uring's rates offer uring's calibrations; an address
    # with a calibration of another pattern opens on the calibration's pattern; another pattern chosen
    # starts from the paper's rates.
    site.page.click("#model-rates-choice")
    labels = site.page.get_by_role("option").all_inner_texts()
    site.page.keyboard.press("Escape")
    assert labels[0] == "paper's rates (seed 001)" and len(labels) >= 2
    assert all(": uring/uring (" in label for label in labels[1:]), labels
    uring = labels[1].split("#")[1].split(":")[0]
    site.goto(f"/model?pattern=hsha&rates={uring}&threads=1-4&work=5&connections=64", "#model-whatif-graph")
    site.page.wait_for_function(
        "() => (document.querySelector('#model-whatif-graph .js-plotly-plot')?.layout?.title?.text || '')"
        f".includes('What if: uring, calibration #{uring},')"
    )
    assert site.page.inner_text("#model-pattern").strip() == "uring"
    site.choose("model-pattern", "lf")
    site.page.wait_for_function(
        "() => document.querySelector('#model-rates-choice').innerText.includes(\"paper's rates\")"
    )
    site.goto("/model?pattern=uring&threads=1-4&work=5&connections=64&r_l=3", "#model-rates-flag")
    assert "lock acquire/release (r_l): uring's chain does not take this step" in site.page.inner_text(
        "#model-rates-flag"
    )
    # One connection per multireactor thread: the fluid stalled there (a few hundred msg/s); the curve is the
    # exact solution (which the SSA confirms: tests/dashboard/test_whatif.py), and no SSA is run beside it.
    site.goto("/model?pattern=multireactor&threads=1-4&work=5&connections=4", "#model-whatif-note")
    site.page.wait_for_function(
        "() => document.querySelector('#model-whatif-note').innerText.includes('Exact solution shown')"
    )
    assert not site.page.is_visible("#model-fluid-stalled")
    (exact,) = [t for t in site.drawn("model-whatif-graph")["traces"] if t["name"] == "exact"]
    assert len(exact["y"]) == 4 and all(v > 50_000 for v in exact["y"]) and exact["points"] == 4
    assert [t["name"] for t in site.drawn("model-whatif-graph")["traces"]] == ["exact"]
    assert not site.page.is_visible("#model-fluid-flag")
    site.shot("model-exact-small")
    # HSHA at 8 connections: exact while its states stay few, the fluid (dashed) beyond; both named
    site.goto("/model?pattern=hsha&threads=2-8&work=5&connections=8&cores=2", "#model-whatif-note")
    site.page.wait_for_function(
        "() => document.querySelector('#model-whatif-note').innerText.includes('at the others the SSA')"
    )
    both = {t["name"]: t for t in site.drawn("model-whatif-graph")["traces"]}
    assert {"exact", "fluid", "SSA (95 % CI)"} <= set(both)
    assert both["exact"]["y"][0] is not None and both["fluid"]["y"][-1]
    fluid_points = sum(y is not None for y in both["fluid"]["y"])
    assert both["SSA (95 % CI)"]["points"] == fluid_points  # the SSA beside the fluid only
    legend = site.page.evaluate("() => document.querySelector('#model-whatif-graph .legend').textContent")
    assert "exact" in legend and "fluid" in legend
    site.shot("model-exact-and-fluid")
    # Where the monitor is the bottleneck the fluid is far off (HSHA at 16 threads, 10 µs, 512 connections,
    # a core each: 655k against the SSA's 284k): the page shows the SSA beside it and says so at once.
    site.goto("/model?pattern=hsha&threads=2-16&work=10&connections=512&cores=16", "#model-fluid-flag")
    assert "Fluid and SSA disagree" in site.page.inner_text("#model-fluid-flag")
    ssa = next(t for t in site.drawn("model-whatif-graph")["traces"] if t["name"] == "SSA (95 % CI)")
    assert ssa["points"] == 15 and max(v for v in ssa["y"] if v) < 350_000
    site.shot("model-fluid-flagged")
    site.no_console_errors()


def wide_tables(site: Site) -> list[tuple[str, int, int]]:
    """Every table wider than its place on the page (id, its width, the width it has)."""
    found: list[list[Any]] = site.page.evaluate(
        """() => Array.from(document.querySelectorAll('.dash-spreadsheet-container'))
               .map(el => [el.closest('[id]') ? el.closest('[id]').id : '?', el.scrollWidth, el.clientWidth])
               .filter(([, w, c]) => w > c + 2)"""
    )
    return [(str(i), int(w), int(c)) for i, w, c in found]


def test_every_page_as_a_researcher_reads_it(site: Site) -> None:
    """Issue 45, page by page, each saved as a screenshot (build/test-artifacts/dashboard/page-*.png): the
    tables fit 1,400 px; oversubscribed points ringed and ranked apart; every absent model line says why
    (a refused calibration with its self-check); the what-if a curve; Run a picker; Compare two different
    sides; the latest runs by design and the cut in points and runs."""
    from demuxlab.validation.store import save_refusal

    if site.ingested < site.planned:  # run alone: dashdemo complete, as after the live test (no live
        site.ingest(site.planned)  # refresh replacing the Experiments page's graph while it is awaited)
    smoke = sample.load_smoke(site.tmp)
    check = {"threads": 1, "connections": 32, "runs": 1, "measured_msgs_per_s": 80_000.0}
    save_refusal(
        "lf",
        "select",
        ["00000000-0000-0000-0000-000000000001"],
        experiment=smoke.name,
        spec_sha256=smoke.sha256,
        error="the fitted model misses its own runs by 32 % (more than 10 %)",
        self_check=[{**check, "predicted_msgs_per_s": 54_400.0, "rel_error": -0.32}],
        url=site.url,
    )
    from demuxlab.spec import run_id

    rid = run_id(site.spec, *site.runs[0])
    tour = [
        ("page-experiments", "/?experiment=smoke", "#experiments-latest-graph .js-plotly-plot"),
        ("page-sweep", "/sweep?experiment=smoke", "#sweep-graph .js-plotly-plot .main-svg"),
        ("page-sweep-by-connections", "/sweep?experiment=smoke&x=connections", "#sweep-graph .main-svg"),
        ("page-ranking", "/ranking?experiment=smoke", "#ranking-graph .js-plotly-plot .main-svg"),
        ("page-history", "/history?experiment=dashdemo", "#history-graph .js-plotly-plot .main-svg"),
        ("page-operations", "/operations?experiment=smoke", "#operations-graph .js-plotly-plot .main-svg"),
        ("page-run-picker", "/run", "#run-choice"),
        ("page-run", f"/run?run={rid}", "#run-timeline-graph .js-plotly-plot .main-svg"),
        ("page-model", "/model?experiment=smoke", "#model-whatif-graph .js-plotly-plot .main-svg"),
        ("page-compare", "/compare", "#compare-graph .js-plotly-plot .main-svg"),
        ("page-hosts", "/hosts", "#hosts-topology-graph .js-plotly-plot .main-svg"),
        ("page-claims", "/claims?experiment=smoke", "#claims-table .dash-spreadsheet"),
    ]
    for name, path, ready in tour:
        site.goto(path, ready)
        site.page.wait_for_timeout(800)  # the callbacks after the first graph (tables, notes)
        assert not wide_tables(site), (name, wide_tables(site))
        width = site.page.evaluate("() => document.documentElement.scrollWidth")
        assert width <= 1400 + 20, (name, width)
        site.shot(name)
    site.no_console_errors()

    site.goto("/sweep?experiment=smoke", "#sweep-no-model")
    assert "calibrated rates, calibration refused: lf/select" in site.page.inner_text(
        "#sweep-no-model summary"
    )
    site.page.click("#sweep-no-model summary")  # the whole list, folded under its summary where it is long
    missing = site.page.inner_text("#sweep-no-model")
    assert "lf/select, calibrated rates: calibration refused: the fitted model misses its own runs" in missing
    assert (
        "self-check: the fitted model gives 54.4k msg/s where its 1 calibration run(s) measured 80k"
        in missing
    )
    site.goto("/ranking?experiment=smoke", "#ranking-graph .js-plotly-plot")
    labels = site.page.evaluate("() => document.querySelector('#ranking-graph .js-plotly-plot').data[0].y")
    text = site.page.evaluate("() => document.querySelector('#ranking-graph .js-plotly-plot').data[0].text")
    assert all(
        "2 thr" not in lab for lab, t in zip(labels, text, strict=True) if not t.startswith("not ranked")
    )
    site.goto("/model?experiment=smoke", "#model-refused")
    assert "lf/select, calibrated rates: refused: the fitted model misses" in site.page.inner_text(
        "#model-refused"
    )
    assert site.graph("model-selfcheck-graph")["names"] == [
        "measured (calibration runs)",
        "model with the fitted rates",
    ]
    site.goto("/compare", "#compare-graph .js-plotly-plot")
    # two different sides, whatever this module's earlier tests left newest (the sides then share points,
    # and the figure names both, or they share none, and the page says so)
    sides = [site.page.inner_text(f"#compare-{s}-experiment").strip() for s in ("a", "b")]
    assert all(sides) and sides[0] != sides[1], sides
    titles = [t for t in site.graph("compare-graph")["titles"] if t.startswith(("A:", "B:"))]
    assert len(titles) == 2 or "share no point" in site.page.inner_text("#compare-status"), titles
    site.goto("/run", "#run-choice")
    site.page.click("#run-choice")
    assert site.page.get_by_role("option").count() >= 10
    site.page.keyboard.press("Escape")
    site.goto("/?experiment=smoke", "#experiments-per-design")
    assert "hsha/epoll-lt" in site.page.inner_text("#experiments-per-design")
    latest = site.graph("experiments-latest-graph")["names"]
    assert any(n.endswith("(calibration)") for n in latest) and not any(n == "ok" for n in latest)
    site.no_console_errors()


# Per table on the page: the header words the browser broke inside (a word whose letters sit on two lines),
# the short words of its cells broken so (a cell may break after a hyphen or a slash, and an id longer than
# 24 characters where it meets 300 px), its width against its place, and whether it scrolls sideways.
TABLE_LAYOUT_JS = r"""() => {
    const broken = (root, pattern, longest) => {
        const found = [];
        const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
        for (let n = walker.nextNode(); n; n = walker.nextNode()) {
            for (const m of n.data.matchAll(pattern)) {
                if (m[0].length > longest) { continue; }
                const r = document.createRange();
                r.setStart(n, m.index);
                r.setEnd(n, m.index + m[0].length);
                const lines = new Set(Array.from(r.getClientRects()).filter((b) => b.width > 0)
                    .map((b) => Math.round(b.top)));
                if (lines.size > 1) { found.push(m[0]); }
            }
        }
        return found;
    };
    const main = document.querySelector('.dlx-main').getBoundingClientRect();
    return Array.from(document.querySelectorAll('.dash-spreadsheet-container')).map((c) => {
        const table = c.querySelector('table').getBoundingClientRect();
        const box = c.getBoundingClientRect();
        const heads = [], cells = [];
        c.querySelectorAll('th.dash-header').forEach((th) => heads.push(...broken(th, /\S+/g, 1000)));
        c.querySelectorAll('td.dash-cell').forEach((td) => cells.push(...broken(td, /[^\s\-\/]+/g, 24)));
        return {id: c.closest('[id]').id, heads: heads, cells: [...new Set(cells)].slice(0, 6),
                width: Math.round(table.width), right: Math.round(table.right), place: c.clientWidth,
                boxRight: Math.round(box.right), mainRight: Math.round(main.right),
                scrolls: ['auto', 'scroll'].includes(getComputedStyle(c).overflowX),
                columns: c.querySelectorAll('th.dash-header').length};
    });
}"""


def table_layout(site: Site) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = site.page.evaluate(TABLE_LAYOUT_JS)
    return found


def test_every_table_fits_with_its_words_whole(site: Site, tmp_path: Path) -> None:
    """Issue 45 (tables cut off at 1,400 px): on every page with a table, no header breaks inside a word
    ("experime/nt", "oversubs/cribed"), nor a number or a design's name in a cell ("10170/0",
    "multireacto/r"), and every table fits its place on the page; a wide one (Sweep's 24 columns, with the
    model's predictions) shows its key columns and says what it leaves out (the workload, the same on every
    row, with its value); "all columns" shows every one in a table that scrolls sideways inside the page, and
    the CSV keeps them all. Saved as build/test-artifacts/dashboard/tables-*.png."""
    from demuxlab.spec import run_id

    if not site.ingested:  # run alone: the data test_every_page_renders ingests
        site.ingest_files(site.old)
        site.ingest_files(site.smoke)
        sample.store_model(site.spec, site.url)
    if site.ingested < site.planned:
        site.ingest(site.planned)
    rid = run_id(site.spec, *site.runs[0])
    tour = [
        ("experiments-list", "/", "#experiments-table td.dash-cell"),
        ("experiments", "/?experiment=smoke", "#experiments-runs td.dash-cell"),
        ("sweep", "/sweep?experiment=dashdemo", "#sweep-table td.dash-cell"),
        ("sweep-smoke", "/sweep?experiment=smoke", "#sweep-table td.dash-cell"),
        ("ranking", "/ranking?experiment=smoke", "#ranking-table td.dash-cell"),
        ("claims", "/claims?experiment=smoke", "#claims-recommendations td.dash-cell"),
        ("hosts", "/hosts", "#hosts-usage td.dash-cell"),
        ("model", "/model?experiment=dashdemo", "#model-validation td.dash-cell"),
        ("run", f"/run?run={rid}", "#run-samples td.dash-cell"),
        ("compare", "/compare?a=dashdemo&b=dashdemo&b_pair=local", "#compare-table td.dash-cell"),
        ("history", "/history?experiment=dashdemo", "#history-changes td.dash-cell"),
        ("operations", "/operations?experiment=dashdemo", "#operations-table td.dash-cell"),
    ]
    problems = []
    for name, path, ready in tour:
        site.goto(path, ready)
        site.page.wait_for_timeout(800)  # the page's other tables
        tables = table_layout(site)
        assert tables, name
        for t in tables:
            if t["heads"] or t["cells"]:
                problems.append(f"{name} {t['id']}: words broken: headers {t['heads']}, cells {t['cells']}")
            if t["width"] > t["place"] + 1 or t["right"] > t["mainRight"] + 1:
                problems.append(f"{name} {t['id']}: {t['width']} px wide in {t['place']} px")
        width = site.page.evaluate("() => document.documentElement.scrollWidth")
        if width > 1400:
            problems.append(f"{name}: the page is {width} px wide")
        site.shot(f"tables-{name}")
    assert not problems, "\n".join(problems)

    # Sweep, dashdemo: 24 columns (each point's workload, runs, interval, the server's CPUs, two sources'
    # predictions with their CI, method and error); at first the key ones, the rest named above the table.
    site.goto("/sweep?experiment=dashdemo", "#sweep-table td.dash-cell")
    site.page.wait_for_function("() => document.querySelector('#sweep-table-fold-note').innerText")
    note = site.page.inner_text("#sweep-table-fold-note")
    assert note.startswith("12 of 24 columns shown"), note
    assert "the same on every row: work (µs) = 10, connections = 64" in note
    assert "not shown: ci95 (msg/s), server cpus" in note
    assert "empty on every row: rate (msg/s), hardware class" in note
    fold_note = "() => document.querySelector('#sweep-table-fold-note').innerText.startsWith('{}')"
    assert site.page.inner_text("#sweep-table-all") == "all 24 columns"
    site.page.click("#sweep-table-all")
    site.page.wait_for_function(fold_note.format("all"))
    assert site.page.inner_text("#sweep-table-all") == "key columns only"
    (table,) = [t for t in table_layout(site) if t["id"] == "sweep-table"]
    assert table["columns"] == 24 and not table["heads"] and not table["cells"], table
    assert table["width"] > table["place"] and table["scrolls"], table  # scrolls inside its place
    assert table["boxRight"] <= table["mainRight"] + 1, table
    assert site.page.evaluate("() => document.documentElement.scrollWidth") <= 1400
    assert "dlx-fold-wide" in (site.page.get_attribute("#sweep-table-fold-box", "class") or "")  # its shadow
    site.shot("tables-sweep-all-columns")
    site.page.click("#sweep-table-all")
    site.page.wait_for_function(fold_note.format("12 of 24"))
    with site.page.expect_download() as info:
        site.page.click("#sweep-table button.export")
    csv = tmp_path / "points.csv"
    info.value.save_as(csv)
    head = csv.read_text(encoding="utf-8-sig").splitlines()[0].split(",")
    assert len(head) == 24 and {"server_cpus", "paper_method", "calibration_ci_rel"} <= set(head), head
    site.no_console_errors()
