"""Headless Chromium (Debian's ``chromium``) driven by Playwright with the system browser.

Playwright never downloads a browser here: it launches ``/usr/bin/chromium`` (or
``PERFLOW_CHROMIUM``). Without Playwright or Chromium the tests skip, except under CI
(``CI=true``), where ``.ci/run`` installs both and a missing one is a failure.
Screenshots go to ``test-artifacts/browser/`` at the repository root (listed in .gitignore).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts" / "browser"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _chromium() -> str | None:
    for c in (os.environ.get("PERFLOW_CHROMIUM"), "/usr/bin/chromium", shutil.which("chromium")):
        if c and Path(c).exists():
            return c
    return None


def _missing(what: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{what} is missing under CI: .ci/run should install it", pytrace=False)
    pytest.skip(f"{what} is not installed")


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("the playwright Python package")
    exe = _chromium()
    if exe is None:
        _missing("Chromium (Debian's chromium package)")
    profile = tempfile.mkdtemp(prefix="perflow-chromium-")
    with sync_playwright() as pw:
        ctx = pw.chromium.launch_persistent_context(
            profile, executable_path=exe, args=FLAGS, headless=True, viewport={"width": 1300, "height": 1000}
        )
        yield ctx
        ctx.close()
    shutil.rmtree(profile, ignore_errors=True)


class Page:
    """A loaded page and the console errors and page errors seen while it ran."""

    def __init__(self, ctx: Any, url: str):
        self.page = ctx.new_page()
        self.errors: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.goto(url)

    def screenshot(self, name: str) -> Path:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        print(f"screenshot: {path}")
        return path


@pytest.fixture
def open_page(browser: Any) -> Iterator[Any]:
    pages: list[Page] = []

    def _open(path: Path) -> Page:
        p = Page(browser, path.resolve().as_uri())
        pages.append(p)
        return p

    yield _open
    for p in pages:
        p.page.close()
