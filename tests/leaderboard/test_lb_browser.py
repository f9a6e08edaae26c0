"""The pages in headless Chromium: load the board, sort it, open a submission, step through a trajectory."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
        pytest.skip("chromium / chromium-driver not installed")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="sapo-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--no-first-run",
        "--window-size=1280,900",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.implicitly_wait(5)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def _wait_verified(url: str, count: int, timeout: float = 60) -> None:
    import time

    import requests

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = requests.get(url + "/api/v1/submissions", timeout=10).json()["submissions"]
        if sum(r["status"] == "verified" for r in rows) == count:
            return
        time.sleep(0.2)
    raise AssertionError(f"submissions not verified: {rows}")


def _agents(driver) -> list[str]:  # type: ignore[no-untyped-def]
    from selenium.webdriver.common.by import By

    return [a.text for a in driver.find_elements(By.CSS_SELECTOR, "#board td.agent > a")]


def test_board_sort_submission_and_trajectory(browser, tmp_path: Path, make_server) -> None:  # type: ignore[no-untyped-def]
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    server = make_server(f"sqlite:///{tmp_path / 'b.db'}", "--seed").start()
    driver = browser
    _wait_verified(server.url, 2)
    driver.get(server.url + "/")
    assert len(driver.find_elements(By.CSS_SELECTOR, "#board .badge.verified")) == 2
    assert _agents(driver) == ["expert (oracle)", "random (admissible)"]
    header = driver.find_element(By.CSS_SELECTOR, "th a.sort[data-sort='success']")
    assert "▼" in header.text
    header.click()  # ascending now
    WebDriverWait(driver, 10).until(lambda d: "order=asc" in d.current_url)
    assert _agents(driver) == ["random (admissible)", "expert (oracle)"]
    driver.save_screenshot(str(tmp_path / "board.png"))

    driver.find_element(By.LINK_TEXT, "expert (oracle)").click()
    WebDriverWait(driver, 10).until(ec.presence_of_element_located((By.ID, "agent-name")))
    assert driver.find_element(By.CSS_SELECTOR, "figure.chart svg").is_displayed()
    driver.find_elements(By.CSS_SELECTOR, "a.episode-link")[0].click()

    WebDriverWait(driver, 10).until(ec.presence_of_element_located((By.ID, "viewer")))
    steps = int(driver.find_element(By.ID, "viewer").get_attribute("data-steps"))

    def visible() -> list[str]:
        turns = driver.find_elements(By.CSS_SELECTOR, "section.turn")
        return [s.get_attribute("data-step") for s in turns if s.is_displayed()]

    assert steps >= 2 and visible() == ["0"]
    driver.find_element(By.ID, "next").click()
    assert visible() == ["1"] and driver.find_element(By.ID, "step-number").text == "1"
    turn = driver.find_element(By.CSS_SELECTOR, "section.turn[data-step='1']")
    assert turn.find_element(By.CSS_SELECTOR, "pre.think").text == "following the expert plan"
    assert turn.find_element(By.CSS_SELECTOR, "pre.action").text.startswith("press ")
    assert turn.find_element(By.CSS_SELECTOR, "pre.observation").text.startswith("Click.")
    driver.find_element(By.TAG_NAME, "body").send_keys(Keys.ARROW_RIGHT)
    assert visible() == ["2"] and "step=2" in driver.current_url
    driver.find_element(By.ID, "prev").click()
    assert visible() == ["1"]
    driver.save_screenshot(str(tmp_path / "viewer.png"))
