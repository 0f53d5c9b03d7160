"""A Snakemake HTML report opened in Debian's chromium (Playwright) as a researcher opens it: the home page,
then every category (an experiment) and every section (subcategory), each entry's view button clicked (a
page or a figure shown in the report, a table downloaded) and its info; any script error fails. Each section
is saved as a screenshot with its first entry open (issue 45: "every entry of every section opening without
a script error (a browser test clicks every one)")."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM = os.environ.get("DEMUXLAB_CHROMIUM", "/usr/bin/chromium")


@dataclass
class Opened:
    """What the report showed: per section its entries (label, shown inline or downloaded), the shots."""

    sections: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    shots: list[Path] = field(default_factory=list)
    home: str = ""


def _name(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def open_every_entry(report: Path, shots: Path, chromium: str = CHROMIUM) -> Opened:
    """Click through ``report`` (see the module doc); screenshots go to ``shots``."""
    from playwright.sync_api import sync_playwright

    shots.mkdir(parents=True, exist_ok=True)
    out = Opened()
    errors: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True).new_page()
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.goto(report.resolve().as_uri())
        page.wait_for_selector("nav", timeout=30_000)
        page.wait_for_timeout(500)
        out.home = page.inner_text("body")
        out.shots.append(_shot(page, shots / "report-home.png"))
        categories: dict[str, list[str]] = page.evaluate(
            "() => Object.fromEntries(Object.entries(categories).map(([c, s]) => [c, Object.keys(s)]))"
        )
        for category, subcategories in sorted(categories.items()):
            for sub in sorted(subcategories):
                out.sections[f"{category}/{sub}"] = _section(page, category, sub, shots, out, errors)
        browser.close()
    assert not errors, f"script errors in the report: {errors}"
    return out


def _section(page: Any, category: str, sub: str, shots: Path, out: Opened, errors: list[str]) -> list[Any]:
    """One section: every row's view button and info clicked; the first entry shown in the screenshot."""
    page.evaluate("(c) => app.showCategory(c)", category)
    page.wait_for_timeout(200)
    if page.get_by_role("link", name=sub, exact=True).count():
        page.get_by_role("link", name=sub, exact=True).first.click()
    else:  # a category of one section opens on it
        page.evaluate(
            "([c, s]) => app.setView({navbarMode: 'subcategory', category: c, subcategory: s})",
            [category, sub],
        )
    page.wait_for_selector("nav table tr td", timeout=10_000)
    rows = page.locator("nav table tbody tr, nav table tr:has(td)")
    seen: list[tuple[str, str]] = []
    for i in range(rows.count()):
        row = rows.nth(i)
        label = row.locator("td").first.inner_text().strip()
        view = row.locator("td").last.locator("a").first
        if view.get_attribute("download") is not None:
            with page.expect_download() as dl:
                view.click()
            assert dl.value.suggested_filename, (category, sub, label)
            seen.append((label, "downloaded"))
        else:
            view.click()
            page.wait_for_selector("iframe, main img, .grow img", timeout=10_000)
            seen.append((label, "shown"))
        row.locator("td").last.locator("a").nth(1).click()  # its info: the caption
        page.wait_for_timeout(150)
        assert not errors, f"{category}/{sub}: {label}: {errors}"
        page.evaluate(
            "([c, s]) => app.setView({navbarMode: 'subcategory', category: c, subcategory: s})",
            [category, sub],
        )
        page.wait_for_timeout(150)
    first = rows.nth(0).locator("td").last.locator("a").first
    if first.get_attribute("download") is None:
        first.click()
        page.wait_for_timeout(1200)  # the page inside the iframe lays out
    out.shots.append(_shot(page, shots / f"report-{_name(category)}-{_name(sub)}.png"))
    return seen


def _shot(page: Any, path: Path) -> Path:
    page.screenshot(path=str(path), full_page=False)
    return path
