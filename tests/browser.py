"""Playwright on Debian's Chromium, for the status page's browser tests.

The browser is ``/usr/bin/chromium`` from ``tools/install-debian-deps.sh`` (never Playwright's
own download), headless, with everything that would reach the network on its own turned off.
A missing Chromium fails the test naming the script to run: it is never skipped.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@contextlib.contextmanager
def chromium_page() -> Iterator[Any]:
    """A fresh page of a headless Chromium, closed after the block."""
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"{CHROMIUM} is missing: run tools/install-debian-deps.sh", pytrace=False)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            context = browser.new_context(viewport={"width": 1400, "height": 900})
            page = context.new_page()
            # Script errors and what the browser refused (a Content-Security-Policy violation
            # is a console error); a response's status is the test's to check, not an error.
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.on("console", lambda m: errors.append(m.text) if m.type == "error"
                    and not m.text.startswith("Failed to load resource") else None)
            page.console_errors = errors
            yield page
        finally:
            browser.close()
