"""What the browser tests share: the browser's presence, waiting, and a user's walk through the
Adaptive page inside Airflow's own UI."""

from __future__ import annotations

import os
import shutil
import socket
import time
from pathlib import Path
from typing import Any

import pytest

CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
try:
    import selenium  # noqa: F401

    HAVE_SELENIUM = True
except ImportError:
    HAVE_SELENIUM = False
MISSING = not (CHROMIUM and DRIVER and HAVE_SELENIUM)
BROWSER_MARKS = [
    pytest.mark.slow,
    pytest.mark.skipif(
        MISSING and os.environ.get("ADAPTIVE_REQUIRE_BROWSER") != "1",
        reason="chromium, chromedriver or selenium missing",
    ),
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(predicate: Any, what: str, seconds: float = 30) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            found = predicate()
        except Exception:  # the element is not there yet, or the frame was reloaded
            found = None
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


class Walk:
    """The user's browser on the Adaptive page: its frame, its tabs, and where screenshots go."""

    def __init__(self, browser: Any, shots: Path) -> None:
        self.browser, self.shots = browser, shots

    def tab(self, name: str) -> Any:
        """Wait inside the plugin's frame until tab ``name`` is drawn."""
        from selenium.webdriver.common.by import By

        self.browser.switch_to.default_content()
        frame = wait_for(lambda: self.browser.find_element(By.TAG_NAME, "iframe"), "the plugin frame")
        self.browser.switch_to.frame(frame)
        return wait_for(
            lambda: self.browser.find_element(By.CSS_SELECTOR, f"body[data-ready='{name}']"), name
        )

    def open(self, name: str, *, link: str | None = None) -> None:
        """Click the tab's link (or ``link``, a CSS selector) and wait for the tab."""
        from selenium.webdriver.common.by import By

        self.browser.find_element(By.CSS_SELECTOR, link or f"a[data-tab='{name}']").click()
        self.tab(name)

    def shot(self, name: str) -> None:
        self.browser.switch_to.default_content()
        self.browser.save_screenshot(str(self.shots / f"{name}.png"))


def log_in_and_open_the_page(browser: Any, url: str) -> None:
    from selenium.webdriver.common.by import By

    browser.get(f"{url}/")
    wait_for(lambda: browser.find_element(By.NAME, "username"), "the login form").send_keys("admin")
    browser.find_element(By.NAME, "password").send_keys("s3cret-admin")
    browser.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    nav = wait_for(
        lambda: browser.find_element(By.CSS_SELECTOR, "a[href$='/plugin/adaptive']"), "the nav item"
    )
    nav.click()
