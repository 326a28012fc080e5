"""The dashboard's browser tests: Debian's headless Chromium driven by Playwright (browser downloads
are not possible), a module skipped when either is missing, and one browser per module."""

from __future__ import annotations

import os

import pytest

CHROMIUM = "/usr/bin/chromium"
if not os.path.exists(CHROMIUM):
    pytest.skip(f"{CHROMIUM} is missing (scripts/test installs Debian's chromium)", allow_module_level=True)

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright comes with the test extra")


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield chromium
        chromium.close()


def watched_page(browser, width, height=1000):
    """A new page at ``width`` px that collects its script errors and console errors in ``errors``."""
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.errors = []
    page.on("pageerror", lambda error: page.errors.append(str(error)))
    page.on("console", lambda message: page.errors.append(message.text) if message.type == "error" else None)
    return page
