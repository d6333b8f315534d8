"""The UI as a user meets it: a real ``airflow api-server``, headless Chromium, Airflow's own login
and navigation. Screenshots go to ``$ADAPTIVE_SCREENSHOTS`` (default: the test's temporary folder);
``ADAPTIVE_SCREENSHOTS=docs/screenshots`` refreshes the README's."""

from __future__ import annotations

import itertools
import os
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import pytest

from airflow_adaptive.core.model import ExitReason
from airflow_adaptive.core.sizing import quick_predictor_names
from airflow_adaptive.core.units import GIB, format_bytes
from airflow_adaptive.store.api import TotalsQuery
from tests.conftest import sql_store
from tests.edges.browser_kit import BROWSER_MARKS, Walk, log_in_and_open_the_page, wait_for
from tests.edges.ui_controls import check_controls_that_cannot_be_met, check_source_filter
from tests.scheduling import load_dag, mark_scheduled, new_run, seed_history, serialise_dag_folder

pytestmark = BROWSER_MARKS


def check_the_address_names_the_view(walk: Walk, view: str) -> None:
    """Airflow's address reads /plugin/adaptive#/<view>, not /plugin/adaptive/adaptive/ui#/overview."""
    walk.browser.switch_to.default_content()
    wait_for(lambda: walk.browser.current_url.endswith(f"/plugin/adaptive#/{view}"), f"the address of {view}")


def check_formats_match_the_cli(walk: Walk) -> None:
    """The page prints bytes as format_bytes does (the CLI's and demo's tables), ties and all."""
    values = [3334471680, 3333479288, 3.125 * GIB, 13648405498, 8 * GIB, 999.7 * 1024**2, 250 * 1024**2, 512]
    shown = walk.browser.execute_script("return arguments[0].map(bytes)", values)
    assert shown == [format_bytes(v) for v in values] and shown[0] == "3.11 GiB"


def check_chart_gaps_and_legend(walk: Walk, chart_id: str) -> None:
    """Days without data are null (a gap, not a line across), and the legend shows values, not '--'."""
    browser = walk.browser
    rows = browser.execute_script(
        "return dailySeries([{day: '2024-01-01'}, {day: '2024-01-02'}, {day: '2024-01-05'},"
        " {day: '2094-01-05'}]).rows.map((r) => r === null)"
    )
    assert rows == [False, False, True, False, True, False]  # one null per gap, however long
    gaps = browser.execute_script(
        f"return document.getElementById('{chart_id}').uplot.series.slice(1).map((s) => s.spanGaps)"
    )
    assert gaps and not any(gaps)
    from selenium.webdriver.common.by import By

    legend = [v.text for v in browser.find_elements(By.CSS_SELECTOR, f"#{chart_id} .u-legend .u-value")]
    assert legend and "--" not in legend, legend


def check_overview_and_families(walk: Walk, store: Any) -> None:
    from selenium.webdriver.common.by import By

    browser = walk.browser
    walk.tab("overview")
    check_chart_gaps_and_legend(walk, "trend")
    check_formats_match_the_cli(walk)
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
    assert "OOM-killed in replay" in cell.text  # a replayed rate, beside the OOM kills that happened
    walk.shot("families")
    check_the_address_names_the_view(walk, "families")


def check_family(walk: Walk, store: Any) -> None:
    from selenium.webdriver.common.by import By

    browser = walk.browser
    walk.tab("families")
    walk.open("family", link="tr[data-family='genomics.align'] a")
    chart = browser.find_element(By.ID, "family-chart")
    history = store.history("genomics.align")
    assert int(chart.get_attribute("data-points")) == len(history) == 13
    assert int(chart.get_attribute("data-oom")) == sum(o.oom_killed for o in history) == 1
    killed = browser.find_element(
        By.CSS_SELECTOR, "#attempts-table tr[data-exit='OOMKilled'].bad [data-col=peak]"
    )
    assert killed.text == "≥ 8 GiB (OOM-killed at limit)"
    check_chart_gaps_and_legend(walk, "family-chart")
    ticks = browser.execute_script(
        "const u = document.getElementById('family-chart').uplot;"
        "return u.axes[1].splits(u, 1, u.scales.y.min, u.scales.y.max)"
    )
    step = min(b - a for a, b in itertools.pairwise(ticks))
    assert len(ticks) >= 2 and step & (step - 1) == 0 and all(t % step == 0 for t in ticks), ticks
    assert chart.find_elements(By.TAG_NAME, "canvas")  # uPlot drew it
    strategies = wait_for(
        lambda: browser.find_elements(By.CSS_SELECTOR, "#whatif-table tbody tr"), "what-if", 120
    )
    assert sorted(r.get_attribute("data-strategy") for r in strategies) == quick_predictor_names()
    assert (
        "Not replayed here, as each of its decisions takes seconds: sizey"
        in browser.find_element(By.ID, "whatif").text
    )
    assert "adaptive" in browser.find_element(By.ID, "decision").text
    budget = browser.find_element(By.ID, "budget").text  # the rule, its replayed kill rate, the budget
    assert "max_oom_rate 2 %, so rules aim at 1 %" in budget
    assert (
        "replayed on this family's past peaks" in budget and "it would have OOM-killed 0 % of them" in budget
    )
    assert "Recorded: 1 of the 13 attempts shown were really OOM-killed" in budget
    placement = browser.find_element(By.ID, "placement").text
    assert "{" not in placement and placement.startswith("Task labels: ")  # "none" or key=value
    assert ". Placement: " in placement
    assert placement.lower().count("task labels") == 1, placement  # not again in the order's text
    # The demo's attempts ran on all six profiled nodes: every group is judged by its own runs.
    runtimes = browser.find_elements(By.CSS_SELECTOR, "#runtime-table tbody tr")
    assert [r.get_attribute("data-group") for r in runtimes] == ["1", "2", "3"]
    assert all("of its runs there" in r.text for r in runtimes)
    assert len(browser.find_elements(By.CSS_SELECTOR, "#runtime-table tr.best")) == 1
    assert "at least 11.5 GiB, their log-normal prediction bound (on their own spread of log" in budget
    assert "program bwa mem" in browser.find_element(By.ID, "tool").text  # what warm starts match by
    check_family_whatif(walk)
    browser.execute_script("document.getElementById('whatif-plane').scrollIntoView()")
    walk.shot("family-whatif")
    walk.tab("family")
    browser.execute_script("document.getElementById('runtime-table').scrollIntoView()")
    walk.shot("family-runtime")
    walk.tab("family")
    browser.execute_script("window.scrollTo(0, 0)")
    walk.shot("family")


def check_family_whatif(walk: Walk) -> None:
    """The what-if table's metrics and its waste-for-kills plane, as the table says."""
    from selenium.webdriver.common.by import By

    browser = walk.browser
    explained = {
        a.text: a.get_attribute("title") for a in browser.find_elements(By.CSS_SELECTOR, "#whatif-table abbr")
    }
    assert sorted(explained) == ["ATE", "MAQ", "WRR"] and all(explained.values())
    assert all(f"{short}:" in browser.find_element(By.ID, "metrics").text for short in explained)
    wastes = [td.text for td in browser.find_elements(By.CSS_SELECTOR, "#whatif-table td[data-col=waste]")]
    assert all(len(w.replace(",", "").replace(".", "").lstrip("0")) <= 3 for w in wastes), wastes
    assert "that replay's kills" in browser.find_element(By.ID, "whatif").text
    # the plane: one point per strategy that never failed, at (its kills, its waste) as the table says
    points = browser.execute_script(
        "const u = document.getElementById('whatif-plane').uplot;"
        "return u.series.slice(1).map((s, i) => [s.label,"
        " num(u.data[0][u.data[i + 1].findIndex((v) => v !== null)], 1), gbh(u.data[i + 1].find((v) => v !== null))]);"
    )
    table = {
        r.get_attribute("data-strategy"): r.find_elements(By.TAG_NAME, "td")
        for r in browser.find_elements(By.CSS_SELECTOR, "#whatif-table tbody tr")
    }
    drawn = {name for name, _, _ in points}
    assert drawn == {n for n, cells in table.items() if cells[3].text == "0" and n != "whole-node"}
    for name, kills, waste in points:
        assert (kills, waste) == (table[name][2].text, table[name][1].text), name
    assert "beats on both" in browser.find_element(By.ID, "whatif-plane-caption").text


def check_nodes_and_locality(walk: Walk, store: Any) -> None:
    from selenium.webdriver.common.by import By

    browser = walk.browser
    walk.tab("family")
    walk.open("nodes")
    groups = browser.find_elements(By.CSS_SELECTOR, "#groups-table tbody tr")
    assert len(groups) == len({n.group_id for n in store.nodes()}) == 3
    held = browser.find_elements(By.CSS_SELECTOR, "#nodes-table td[data-cached]")
    assert [int(td.get_attribute("data-cached")) for td in held] == [2, 0, 0, 1, 0, 0]
    families = browser.find_elements(By.CSS_SELECTOR, "#runtimes-table tbody tr")
    assert {r.get_attribute("data-family") for r in families} == {f.task_family for f in store.families()}
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
    walk.browser.refresh()  # the address names the view: a reload reopens it
    walk.tab("queue")


def check_an_edited_address_is_followed(walk: Walk) -> None:
    """A view typed into Airflow's address while the page is open opens in the frame."""
    walk.tab("queue")
    walk.browser.switch_to.default_content()
    walk.browser.execute_script("location.hash = '#/nodes'")
    walk.tab("nodes")
    check_the_address_names_the_view(walk, "nodes")
    walk.browser.back()  # the browser's own history: back to the queue
    walk.tab("queue")


def check_dark_theme(walk: Walk) -> None:
    browser = walk.browser
    walk.tab("queue")
    walk.open("overview")
    browser.switch_to.default_content()
    browser.execute_script("localStorage.setItem('theme', 'dark')")  # Airflow's own theme switch
    browser.refresh()
    walk.tab("overview")  # the frame opens on the overview again
    assert browser.execute_script("return document.documentElement.dataset.theme") == "dark"
    background = browser.execute_script("return getComputedStyle(document.body).backgroundColor")
    assert background == "rgb(17, 20, 24)"
    walk.shot("overview-dark")


def check_family_addresses(walk: Walk, store: Any) -> None:
    """Any name opens its own family; an edited address says so in the page; links still lead there."""
    from selenium.webdriver.common.by import By

    from tests.factories import attempt

    browser = walk.browser

    def go(hash_: str, ready: str = "family") -> None:
        browser.execute_script("document.body.dataset.ready = ''; location.hash = arguments[0]", hash_)
        walk.tab(ready)

    def heading() -> str:
        return str(browser.execute_script("return document.querySelector('#view h2').textContent"))

    walk.tab("overview")
    go("#/family/%E0%A4%A")  # a truncated address: decodeURIComponent throws a URIError on it
    assert "That address names no valid family" in browser.find_element(By.ID, "bad-address").text
    go("#/task/adaptive_genomics/%zz", "task")
    assert "no valid task" in browser.find_element(By.ID, "bad-address").text
    go("#/bogus", "overview")  # an unknown view: the overview, and the address and tab say so
    assert browser.execute_script("return location.hash") == "#/overview"
    assert browser.find_element(By.CSS_SELECTOR, "#tabs a.active").get_attribute("data-tab") == "overview"
    odd = "genomics.align/whatif\nNFCORE:ALIGN (1)"  # the page's own link form: one encoded segment
    failed = replace(attempt(3, family=odd, peak=GIB, run="odd3"), exit_reason=ExitReason.ERROR, exit_code=1)
    store.record([*(attempt(i, family=odd, peak=GIB, run=f"odd{i}") for i in range(3)), failed])
    go(str(browser.execute_script("return '#/family/' + encodeURIComponent(arguments[0])", odd)))
    assert (
        heading() == odd and browser.find_element(By.ID, "family-chart").get_attribute("data-points") == "4"
    )
    caption = browser.find_element(By.ID, "chart-caption").text  # a failure that was no OOM kill is said
    assert "0 OOM-killed" in caption and "1 ended otherwise (Error: the table says which)" in caption
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "#whatif-table tbody tr"), "its what-if", 120)
    # a task's tab, and the queue's family links, open the family's page
    browser.execute_script("location.hash = '#/task/lff_ui_shot/old'")  # it moves on to #/family/lff.old
    wait_for(lambda: heading() == "lff.old" and browser.find_element(By.ID, "decision"), "the task's family")
    go("#/queue", "queue")
    walk.open("family", link="tr[data-task='lff_ui_shot.new'] a")
    assert "unknown task family 'lff.new'" in browser.find_element(By.ID, "view").text  # none recorded yet


def check_modes(walk: Walk) -> None:
    """genomics.align is observed (family_modes, set below): its page shows the recommendation and
    what enforcing it would have saved, replayed on its own attempts; the Modes page the rules."""
    from selenium.webdriver.common.by import By

    browser = walk.browser
    walk.open("families")
    walk.open("family", link="tr[data-family='genomics.align'] a")
    modes = browser.find_elements(By.CSS_SELECTOR, "#modes-table tbody tr")
    assert modes and all("observe ([adaptive] family_modes)" in row.text for row in modes)
    assert browser.find_element(By.CSS_SELECTOR, "main h2:nth-of-type(2)").text == "Recommendation"
    enforcing = wait_for(
        lambda: (e := browser.find_element(By.ID, "enforcing")).text.startswith("Enforcing") and e,
        "enforcing",
        120,
    )
    assert "Enforcing adaptive on these 12 attempts, replayed through the live decision" in enforcing.text
    saved = float(enforcing.find_element(By.CSS_SELECTOR, "[data-col=saved]").text.replace(",", ""))
    kills = float(enforcing.find_element(By.CSS_SELECTOR, "[data-col=kills]").text)
    assert saved > 0 and kills >= 0  # the demo's users asked for generous guesses
    browser.execute_script("document.getElementById('decision').scrollIntoView()")
    walk.shot("family-observed")
    walk.tab("family")  # back into the plugin's frame
    walk.open("modes")
    assert browser.find_element(By.ID, "default-mode").text == "off"
    assert "genomics.align=observe" in browser.find_element(By.TAG_NAME, "main").text
    walk.shot("modes")


def check_an_ended_sign_in(walk: Walk) -> None:
    """A sign-in that ends while the page is open (an expired or invalid token) says so and leads back
    through Airflow's login; last, as it ends the session."""
    from selenium.webdriver.common.by import By

    browser = walk.browser
    browser.switch_to.default_content()
    browser.add_cookie({"name": "_token", "value": "not-a-token", "path": "/"})  # what an expired one meets
    walk.tab("families")
    browser.execute_script("location.hash = '#/nodes'")
    walk.tab("nodes")
    ended = browser.find_element(By.ID, "session-ended")
    assert "Your Airflow sign-in has ended (Invalid JWT token)" in ended.text
    walk.shot("sign-in-ended")
    walk.tab("nodes")  # back into the frame
    browser.find_element(By.ID, "sign-in-again").click()
    browser.switch_to.default_content()
    wait_for(lambda: browser.find_element(By.NAME, "username"), "Airflow's login form")


@pytest.fixture
def observed_family(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before the api-server starts: it reads the setting once."""
    monkeypatch.setenv("AIRFLOW__ADAPTIVE__FAMILY_MODES", "genomics.align=observe")


def test_pages_through_airflows_login_and_navigation(
    observed_family: None, api_server: str, browser: Any, engine: Any, tmp_path: Path
) -> None:
    shots = Path(os.environ.get("ADAPTIVE_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    store = sql_store(engine)
    walk = Walk(browser, shots)
    log_in_and_open_the_page(browser, api_server)
    walk.tab("overview")
    check_the_address_names_the_view(walk, "overview")
    check_overview_and_families(walk, store)
    check_family(walk, store)
    check_nodes_and_locality(walk, store)
    check_queue(walk, engine, tmp_path)
    check_an_edited_address_is_followed(walk)
    check_dark_theme(walk)
    check_family_addresses(walk, store)
    check_source_filter(walk, store)
    check_modes(walk)
    walk.tab("modes")
    check_controls_that_cannot_be_met(walk)
    check_an_ended_sign_in(walk)
