"""The dashboard in a real browser (Debian's chromium driven by Playwright) against a real PostgreSQL
filled by the real ingest, served by ``demuxlab dashboard`` (waitress) through the read-only role.

One database, one server and one browser for the module; the tests run in order: the empty database
first, then runs are ingested and every page is looked at. Screenshots go to
``build/test-artifacts/dashboard/`` (or ``$DEMUXLAB_TEST_ARTIFACTS``).
"""

from __future__ import annotations

import contextlib
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
    records: list[Path]
    spec: Any
    page: Any
    console: list[str] = field(default_factory=list)
    ingested: int = 0
    drop: Any = None  # () -> None: drop the database (the server loses it)
    create: Any = None  # () -> None: create it again, empty, at schema head

    def goto(self, path: str, wait_for: str | None = None) -> Any:
        self.page.goto(self.base + path)
        if wait_for:
            self.page.wait_for_selector(wait_for, timeout=TIMEOUT_MS)
        return self.page

    def ingest(self, upto: int) -> None:
        from sqlalchemy import create_engine

        from demuxlab.ingest import ingest_files

        engine = create_engine(self.url)
        try:
            ingest_files(self.records[self.ingested : upto], engine=engine)
        finally:
            engine.dispose()
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
    spec = sample.load(tmp)
    runs = sample.planned(spec)
    failed = {f"{p.point_key}|{r}" for p, r in runs[3:5]}
    records = sample.write_records(spec, runs, tmp, fail_keys=failed)
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
                records=records,
                spec=spec,
                page=page,
                drop=lambda: pg_server.drop_database(name),
                create=lambda: pg_server.create_database(name, pg_server.template),
            )
            page.on("console", lambda m: s.console.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: s.console.append(str(e)))
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
    site.ingest(len(site.records) - 12)  # the rest is ingested by the live test
    sample.store_model(site.spec, site.url)
    site.goto("/?experiment=dashdemo", "#experiments-title")
    assert "dashdemo" in site.page.inner_text("#experiments-title")
    assert int(site.page.inner_text("#experiments-failed")) == 2
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
    site.shot("model")

    site.goto("/compare?a=dashdemo&b=dashdemo&b_pair=local", "#compare-graph .js-plotly-plot")
    assert any("· A:" in n for n in site.graph("compare-graph")["names"])
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


def test_run_page_shows_seconds_pinning_and_failure(site: Site) -> None:
    from demuxlab.spec import run_id

    point, repeat = sample.planned(site.spec)[0]
    rid = run_id(site.spec, point, repeat)
    site.goto(f"/run?run={rid}", "#run-timeline-graph .js-plotly-plot")
    timeline = site.graph("run-timeline-graph")
    assert "stationary" in timeline["title"]
    assert "measure" in timeline["titles"]
    topo = site.graph("run-topology-graph")
    assert "server" in topo["names"]
    assert any(t.startswith("server: node-a") for t in topo["titles"])
    site.shot("run")
    point, repeat = sample.planned(site.spec)[3]
    site.goto(f"/run?run={run_id(site.spec, point, repeat)}", "#run-failure")
    assert "connection reset by peer" in site.page.inner_text("#run-failure")
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
    assert site.page.inner_text("#sweep-colour") == "notifier"
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
    assert "<svg" in next(tmp_path.glob("*.svg")).read_text()[:400]
    with site.page.expect_download() as info:
        site.page.click("#sweep-table button.export")
    csv = tmp_path / "table.csv"
    info.value.save_as(csv)
    assert csv.read_text(encoding="utf-8-sig").splitlines()[0].startswith("pattern,notifier,threads")
    assert all(size > 500 for size in sizes.values()), sizes
    site.no_console_errors()


def test_live_view_advances_while_runs_are_ingested(site: Site) -> None:
    site.goto("/?experiment=dashdemo", "#experiments-done")
    before = site.page.inner_text("#experiments-done")
    planned = len(site.records)
    assert before == f"{site.ingested} / {planned}"
    site.ingest(len(site.records) - 6)
    site.page.wait_for_function(
        f"() => document.querySelector('#experiments-done').innerText === '{site.ingested} / {planned}'"
    )
    site.ingest(len(site.records))
    site.page.wait_for_function(
        f"() => document.querySelector('#experiments-done').innerText === '{planned} / {planned}'"
    )
    assert site.page.inner_text("#experiments-remaining") == "0"
    assert site.page.inner_text("#experiments-eta") == "done"
    site.no_console_errors()


def test_unknown_names_in_the_url_say_so(site: Site) -> None:
    site.goto("/sweep?experiment=no-such-thing", "[role=alert]")
    text = site.page.inner_text("[role=alert]")
    assert "Unknown experiment" in text and "no-such-thing" in text
    site.goto("/run?run=00000000-0000-0000-0000-000000000001", "[role=alert]")
    assert "no run 00000000-0000-0000-0000-000000000001" in site.page.inner_text("[role=alert]")
    site.goto("/nowhere", "text=No such page")
    site.no_console_errors()


def test_what_if_runs_the_ssa_on_request(site: Site) -> None:
    site.goto("/model?pattern=lf&threads=1-4&work=10&connections=64", "#model-whatif-graph .js-plotly-plot")
    assert site.graph("model-whatif-graph")["names"] == ["fluid", "measured mean"]
    site.page.click("#model-ssa")
    site.page.wait_for_function(
        "() => document.querySelector('#model-whatif-graph .js-plotly-plot').data"
        ".some(t => t.name === 'SSA (95 % CI)')",
        timeout=60_000,
    )
    site.no_console_errors()
