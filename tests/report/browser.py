"""A real headless Chromium (Debian's chromium and chromium-driver) driven by Selenium.

Run as root with no sandbox and with background networking off: this machine's
network is closed, and Chromium's own connections would otherwise fail noisily.
`.ci/run` installs the two packages; elsewhere the tests that need them skip,
but under CI a missing browser fails them.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
FLAGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=1200,900"]


def require_browser() -> None:
    if Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists():
        return
    message = "Debian's chromium and chromium-driver are not installed (.ci/run installs them)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@contextmanager
def chromium() -> Iterator[Any]:
    """A Selenium driver for a fresh headless Chromium with its own profile folder."""
    require_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="fitspeed-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in [*FLAGS, f"--user-data-dir={profile}"]:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def images(driver: Any) -> list[dict[str, Any]]:
    """Every <img> on the page: its src, whether it finished loading, and its decoded width."""
    return list(driver.execute_script(
        "return Array.from(document.images).map(function (i) {"
        " return {src: i.getAttribute('src'), complete: i.complete, width: i.naturalWidth}; });"))


def console_errors(driver: Any) -> list[dict[str, Any]]:
    """Console messages at SEVERE level (script errors, failed loads)."""
    return [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def full_screenshot(driver: Any, path: Path) -> Path:
    height = int(driver.execute_script("return document.body.scrollHeight"))
    driver.set_window_size(1200, height + 100)
    driver.save_screenshot(str(path))
    return path
