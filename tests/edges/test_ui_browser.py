"""The UI as a user meets it: a real ``airflow api-server``, headless Chromium, Airflow's own login
and navigation. Screenshots go to ``$ADAPTIVE_SCREENSHOTS`` (default: the test's temporary folder);
``ADAPTIVE_SCREENSHOTS=docs/screenshots`` refreshes the README's."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from airflow_adaptive.core.grouping import NodeProfile, group_nodes
from airflow_adaptive.core.locality import InputUse, content_key
from airflow_adaptive.core.model import GIB
from airflow_adaptive.core.sizing import predictor_names
from airflow_adaptive.demo import generated_history
from airflow_adaptive.store.api import TotalsQuery
from tests.conftest import sql_store
from tests.scheduling import load_dag, mark_scheduled, new_run, seed_history, serialise_dag_folder

CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
try:
    import selenium  # noqa: F401

    HAVE_SELENIUM = True
except ImportError:
    HAVE_SELENIUM = False
MISSING = not (CHROMIUM and DRIVER and HAVE_SELENIUM)
pytestmark = [
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


@pytest.fixture
def api_server(tmp_path: Path, engine: Any) -> Iterator[str]:
    """The real api-server on the test database, with demo history, nodes, and one user."""
    store = sql_store(engine)
    store.record(generated_history())
    profiles = [
        NodeProfile(
            f"node-{g}{i}", {"cpu_events_per_s": cpu + i, "memory_mib_per_s": mem + 9 * i}, 8, 32 * GIB
        )
        for g, (cpu, mem) in enumerate([(370, 13800), (460, 17500), (524, 19850)])
        for i in range(2)
    ]
    store.save_nodes(profiles, group_nodes(profiles))
    genome = InputUse(
        "s3://refs/GRCh38/genome.fa",
        3_100_000_000,
        content_key("s3://refs/GRCh38/genome.fa", 3_100_000_000),
        True,
    )
    index = InputUse(
        "s3://refs/GRCh38/bwa.idx",
        5_400_000_000,
        content_key("s3://refs/GRCh38/bwa.idx", 5_400_000_000),
        True,
    )
    store.record_inputs("node-00", [genome, index], [])
    store.record_inputs("node-11", [genome], [])
    port = free_port()
    passwords = tmp_path / "passwords.json"
    passwords.write_text(json.dumps({"admin": "s3cret-admin"}))
    env = dict(os.environ, AIRFLOW__API__HOST="127.0.0.1", AIRFLOW__API__PORT=str(port),
               AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS="admin:admin",
               AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE=str(passwords))  # fmt: skip
    log = (tmp_path / "api-server.log").open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "airflow", "api-server", "--port", str(port)],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(120):
            try:
                urllib.request.urlopen(f"{base}/api/v2/version", timeout=1)
                break
            except OSError:
                assert server.poll() is None, (tmp_path / "api-server.log").read_text()[-3000:]
                time.sleep(0.5)
        yield base
    finally:
        os.killpg(server.pid, 15)
        server.wait(30)


@pytest.fixture
def browser() -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1366,900"):
        options.add_argument(arg)
    options.binary_location = CHROMIUM or "chromium"
    driver = webdriver.Chrome(service=Service(DRIVER or "chromedriver"), options=options)
    driver.implicitly_wait(0)
    yield driver
    driver.quit()


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


def check_overview_and_families(walk: Walk, store: Any) -> None:
    from selenium.webdriver.common.by import By

    browser = walk.browser
    walk.tab("overview")
    cards = {c.get_attribute("data-key"): c.find_element(By.CLASS_NAME, "value").text
             for c in browser.find_elements(By.CSS_SELECTOR, ".card")}  # fmt: skip
    days = store.day_totals(TotalsQuery())
    assert cards["attempts"] == str(sum(t.attempts for _, t in days)) == "61"
    assert cards["families"] == "5"
    walk.shot("overview")

    walk.tab("overview")
    walk.open("families")
    rows = wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "#families-table tbody tr"), "family rows")
    expected, _ = store.family_totals(TotalsQuery())
    shown = {
        r.get_attribute("data-family"): r.find_element(By.CSS_SELECTOR, "[data-col=attempts]").text
        for r in rows
    }
    assert shown == {f.task_family: str(f.totals.attempts) for f in expected}
    # the rule in a line, the whole explanation on hover (the family's page shows it in full)
    cell = browser.find_element(By.CSS_SELECTOR, "tr[data-family='genomics.align'] [data-col=decision]")
    full = cell.get_attribute("title")
    assert full.startswith("P") and "prediction bound" in full and "prediction bound" not in cell.text
    assert cell.text.splitlines()[1].startswith(full.split(" (")[0] + " · ")
    walk.shot("families")


def check_family(walk: Walk, store: Any) -> None:
    from selenium.webdriver.common.by import By

    browser = walk.browser
    walk.tab("families")
    walk.open("family", link="tr[data-family='genomics.align'] a")
    chart = browser.find_element(By.ID, "family-chart")
    history = store.history("genomics.align")
    assert int(chart.get_attribute("data-points")) == len(history) == 13
    assert int(chart.get_attribute("data-oom")) == sum(o.oom_killed for o in history) == 1
    assert browser.find_elements(By.CSS_SELECTOR, "#attempts-table tr[data-exit='OOMKilled'].bad")
    assert chart.find_elements(By.TAG_NAME, "canvas")  # uPlot drew it
    strategies = wait_for(
        lambda: browser.find_elements(By.CSS_SELECTOR, "#whatif-table tbody tr"), "what-if", 120
    )
    assert sorted(r.get_attribute("data-strategy") for r in strategies) == predictor_names()
    assert "adaptive" in browser.find_element(By.ID, "decision").text
    budget = browser.find_element(By.ID, "budget").text  # the rule, its replayed kill rate, the budget
    assert "OOM-killed" in budget and "max_oom_rate 2 %, so rules aim at 1 %" in budget
    assert "Too few peaks to judge it yet (fewer than 100): at least 12.7 GiB" in budget  # 13 of them
    assert "program bwa mem" in browser.find_element(By.ID, "tool").text  # what warm starts match by
    walk.shot("family")


def check_nodes_and_locality(walk: Walk, store: Any) -> None:
    from selenium.webdriver.common.by import By

    browser = walk.browser
    walk.tab("family")
    walk.open("nodes")
    groups = browser.find_elements(By.CSS_SELECTOR, "#groups-table tbody tr")
    assert len(groups) == len({n.group_id for n in store.nodes()}) == 3
    held = browser.find_elements(By.CSS_SELECTOR, "#nodes-table td[data-cached]")
    assert [int(td.get_attribute("data-cached")) for td in held] == [2, 0, 0, 1, 0, 0]
    walk.shot("nodes")
    walk.tab("nodes")
    walk.open("locality")
    rows = browser.find_elements(By.CSS_SELECTOR, "#cached-table tbody tr")
    assert [r.get_attribute("data-node") for r in rows] == ["node-00", "node-00", "node-11"]
    assert "genome.fa" in rows[0].text + rows[1].text and "GiB" in rows[0].text
    walk.shot("locality")


def check_queue(walk: Walk, engine: Any, tmp_path: Path) -> None:
    from types import SimpleNamespace

    from selenium.webdriver.common.by import By

    seed_history(engine)
    load_dag(
        Path(os.environ["AIRFLOW_HOME"]),
        cast(Any, SimpleNamespace(kubeconfig=tmp_path / "kubeconfig")),
        "lff_ui_shot",
    )
    serialise_dag_folder()
    mark_scheduled(new_run("lff_ui_shot", "nightly"))
    walk.tab("locality")
    walk.open("queue")
    rows = walk.browser.find_elements(By.CSS_SELECTOR, "#queue-table tbody tr[data-task^='lff_ui_shot.']")
    ranked = [(r.get_attribute("data-task"), int(r.find_element(By.TAG_NAME, "td").text)) for r in rows]
    assert [task for task, _ in ranked] == ["lff_ui_shot.new", "lff_ui_shot.old"]
    assert ranked[0][1] < ranked[1][1]  # other tests' tasks may be queued in between
    walk.shot("queue")


def check_dark_theme(walk: Walk) -> None:
    browser = walk.browser
    browser.switch_to.default_content()
    browser.execute_script("localStorage.setItem('theme', 'dark')")  # Airflow's own theme switch
    browser.refresh()
    walk.tab("overview")  # the frame opens on the overview again
    assert browser.execute_script("return document.documentElement.dataset.theme") == "dark"
    background = browser.execute_script("return getComputedStyle(document.body).backgroundColor")
    assert background == "rgb(17, 20, 24)"
    walk.shot("overview-dark")


def test_pages_through_airflows_login_and_navigation(
    api_server: str, browser: Any, engine: Any, tmp_path: Path
) -> None:
    shots = Path(os.environ.get("ADAPTIVE_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    store = sql_store(engine)
    walk = Walk(browser, shots)
    log_in_and_open_the_page(browser, api_server)
    check_overview_and_families(walk, store)
    check_family(walk, store)
    check_nodes_and_locality(walk, store)
    check_queue(walk, engine, tmp_path)
    check_dark_theme(walk)
