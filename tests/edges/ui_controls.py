"""The overview's and families' controls in the browser: the source filter and the controls whose
choices cannot be met (called in order by ``test_ui_browser.py``'s one walk through the UI)."""

from __future__ import annotations

import itertools
from typing import Any

from airflow_adaptive.store.api import Source, TotalsQuery
from tests.conftest import EXAMPLES, SHARED_DATA
from tests.edges.browser_kit import Walk, wait_for


def check_source_filter(walk: Walk, store: Any) -> None:
    """An imported nf-core trace stays out of the live saving; the filter shows each source's numbers,
    and All shows each source's saving apart (never one over both)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    from airflow_adaptive.cli import main

    browser = walk.browser

    def cards() -> dict[str, str]:
        found = browser.find_elements(By.CSS_SELECTOR, ".card")
        return {c.get_attribute("data-key"): c.find_element(By.CLASS_NAME, "value").text for c in found}

    def choose(source: str, note: str) -> dict[str, str]:
        Select(browser.find_element(By.ID, "source")).select_by_value(source)
        wait_for(
            lambda: browser.find_element(By.ID, "source-note").text.startswith(note), f"the {source} overview"
        )
        return cards()

    walk.open("overview")
    before = cards()
    real = SHARED_DATA / "nextflow-traces" / "chipseq.csv"  # long nf-core names, 2023's dates
    trace_file = real if real.exists() else EXAMPLES / "nextflow" / "chipseq_trace.txt"
    assert main(["history", "import", str(trace_file)]) == 0
    browser.refresh()
    walk.tab("overview")
    live = cards()  # still the default while there is live history, and the import left it alone
    shown = Select(browser.find_element(By.ID, "source")).first_selected_option
    assert shown.get_attribute("value") == "live"
    assert live == before and live["saving_fraction"] != "0.0 %"
    imported = choose("imported", "Imported")
    trace = sum(t.attempts for _, t in store.day_totals(TotalsQuery(source=Source.IMPORTED)))
    assert imported["attempts"] == f"{trace:,}" != live["attempts"] and imported["saving_fraction"] == "0.0 %"
    walk.shot("overview-imported")
    walk.tab("overview")
    both = choose("all", "All")
    attempts = int(live["attempts"].replace(",", "")) + trace
    assert both["attempts"] == f"{attempts:,}" and "saving_fraction" not in both
    apart = (both["saving_fraction_live"], both["saving_fraction_imported"])
    assert apart == (live["saving_fraction"], "0.0 %")
    # years between the trace and the live attempts: a gap (a null), not a line across
    trend = browser.execute_script("return document.getElementById('trend').uplot.data[1]")
    assert None in trend and trend[-1] is not None
    walk.shot("overview-sources")
    walk.tab("overview")
    walk.open("families")  # the table totals the chosen source too, without a saving over both
    _, families = store.family_totals(TotalsQuery(), limit=0)
    assert browser.find_element(By.ID, "count").text == f"{families:,} families"
    savings = browser.find_elements(By.CSS_SELECTOR, "#families-table td[data-col=saving]")
    assert savings and {td.text for td in savings} == {"\u2013"}  # an en dash: none
    walk.shot("families-sources")
    walk.tab("families")
    walk.open("overview")
    assert choose("live", "Live") == live


CHANGE = "const el = document.getElementById(arguments[0]); el.value = arguments[1]; el.dispatchEvent(new Event('change'));"


def check_controls_that_cannot_be_met(walk: Walk) -> None:
    """Days that run backwards are refused beside the controls, which stay; a search that matches
    nothing says so."""
    from selenium.webdriver.common.by import By

    browser = walk.browser
    walk.open("overview")
    browser.execute_script("window.endBefore = document.getElementById('end');" + CHANGE, "end", "2024-06-23")
    wait_for(
        lambda: browser.execute_script("return document.getElementById('end') !== window.endBefore"),
        "a reload",
    )
    browser.execute_script(CHANGE, "start", "2024-07-01")
    said = wait_for(lambda: browser.find_element(By.ID, "inline-error").text, "the refusal")
    assert said == "From 2024-07-01 is after to 2024-06-23: choose days that run forward."
    kept = browser.find_element(By.ID, "start").get_attribute("value")
    assert kept == ""  # the range kept is the last good one
    walk.shot("overview-backwards")
    walk.tab("overview")
    browser.execute_script("window.endBefore = document.getElementById('end');" + CHANGE, "end", "")
    wait_for(
        lambda: browser.execute_script("return document.getElementById('end') !== window.endBefore"),
        "a reload",
    )
    # four days chosen: the per-day chart ticks whole days, not every six hours
    first = browser.execute_script("return document.getElementById('trend').uplot.data[0][0]")
    days = [
        str(
            browser.execute_script(
                "return new Date(arguments[0] * 1000).toISOString().slice(0, 10)", first + d * 86400
            )
        )
        for d in (0, 3)
    ]
    for control, day in (("end", days[1]), ("start", days[0])):
        browser.execute_script("window.endBefore = document.getElementById('end');" + CHANGE, control, day)
        wait_for(
            lambda: browser.execute_script("return document.getElementById('end') !== window.endBefore"), day
        )
    ticks = browser.execute_script("return document.getElementById('trend').uplot.axes[0]._splits")
    assert len(ticks) >= 2 and all((b - a) % 86400 == 0 for a, b in itertools.pairwise(ticks)), ticks
    for control in ("start", "end"):
        browser.execute_script("window.endBefore = document.getElementById('end');" + CHANGE, control, "")
        wait_for(
            lambda: browser.execute_script("return document.getElementById('end') !== window.endBefore"),
            "all",
        )
    walk.open("families")
    browser.execute_script(CHANGE, "search", "zzzz-nothing")
    shown = wait_for(lambda: browser.find_element(By.ID, "no-families").text, "the empty search")
    assert shown == "No task family matches “zzzz-nothing” in these days."
    browser.execute_script(CHANGE, "search", "")
    wait_for(lambda: not browser.find_elements(By.ID, "no-families"), "the families again")
