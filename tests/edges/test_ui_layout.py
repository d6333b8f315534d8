"""The families page with hundreds of long nf-core names, and a task's own tab, in a real browser."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from airflow_adaptive.core.model import PeakKind, TaskKey, Usage
from airflow_adaptive.core.units import GIB
from airflow_adaptive.demo import generated_history
from tests.conftest import sql_store
from tests.edges.browser_kit import BROWSER_MARKS, Walk, log_in_and_open_the_page, wait_for
from tests.scheduling import serialise_dag_folder

pytestmark = BROWSER_MARKS


NFCORE_PARTS = {  # nf-core's naming: PIPELINE:WORKFLOW:SUBWORKFLOW:...:MODULE, in capitals
    "pipelines": ["CHIPSEQ", "RNASEQ", "SAREK", "ATACSEQ", "METHYLSEQ", "VIRALRECON"],
    "subworkflows": ["ALIGN_BWA_MEM", "BAM_SORT_STATS_SAMTOOLS", "FASTQ_FASTQC_UMITOOLS_TRIMGALORE",
                     "BAM_MARKDUPLICATES_PICARD", "PREPARE_GENOME", "BAM_STATS_SAMTOOLS",
                     "FASTQ_ALIGN_BWAALN", "BAM_DEDUP_STATS_SAMTOOLS_UMITOOLS", "QUANTIFY_RSEM"],
    "modules": ["SAMTOOLS_SORT", "SAMTOOLS_INDEX", "PICARD_MARKDUPLICATES", "SAMTOOLS_FLAGSTAT",
                "PHANTOMPEAKQUALTOOLS", "MACS2_CALLPEAK", "DEEPTOOLS_PLOTFINGERPRINT", "TRIMGALORE"],
}  # fmt: skip


def nfcore_families(count: int) -> list[str]:
    """Distinct nf-core-style family names of 80 to 100 characters."""
    parts = NFCORE_PARTS
    names: list[str] = []
    for i in range(count * 4):
        pipeline = parts["pipelines"][i % 6]
        subs = [parts["subworkflows"][(i // 6 + k * (1 + i // 54)) % 9] for k in range(3)]
        module = parts["modules"][(i // 7) % 8]
        while len(name := f"NFCORE_{pipeline}:{pipeline}:{':'.join(subs)}:{module}") > 100:
            subs.pop()  # fewer subworkflows: whole words, as nf-core names are
        if len(name) >= 80 and name not in names:
            names.append(name)
        if len(names) == count:
            return names
    raise AssertionError(f"only {len(names)} names")


def record_nfcore_history(store: Any, families: list[str]) -> None:
    template = generated_history()[0]
    store.record(
        [
            replace(
                template,
                key=TaskKey("nfcore_chipseq", f"task{f}", f"run{n}", -1, 1),
                task_family=name,
                usage=Usage((1 + f % 7) * GIB // 2 + n * 2**24, 300.0 + n, peak_kind=PeakKind.MEASURED),
                finished_at=template.finished_at,
            )
            for f, name in enumerate(families)
            for n in range(4 + f % 3)
        ]
    )


LAYOUT = """
const problems = [], rows = document.querySelectorAll('#families-table tr');
const ctx = document.createElement('canvas').getContext('2d');
for (const row of rows) {
  if (row.getBoundingClientRect().height > arguments[0]) problems.push('tall row ' + row.dataset.family);
  for (const cell of row.children) {
    const style = getComputedStyle(cell);
    ctx.font = style.font;
    const word = (cell.innerText.trim().split(/\\s+/)[0] || '').split(/(?<=[:.])/)[0];
    const room = cell.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
    if (ctx.measureText(word).width > room + 1) problems.push(`${cell.tagName} narrower than ${word}`);
  }
}
if (document.documentElement.scrollWidth > window.innerWidth + 1) problems.push('the page is wider than the frame');
return problems;
"""


def test_a_tasks_tab_and_hundreds_of_long_nfcore_families(
    api_server: str, browser: Any, engine: Any, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    shots = Path(os.environ.get("ADAPTIVE_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    walk = Walk(browser, shots)
    dag_file = Path(os.environ["AIRFLOW_HOME"]) / "dags" / "adaptive_genomics.py"
    dag_file.write_text("from airflow_adaptive.example_dags.adaptive_genomics import dag  # noqa: F401\n")
    serialise_dag_folder()
    families = nfcore_families(300)
    record_nfcore_history(sql_store(engine), families)
    log_in_and_open_the_page(browser, api_server)
    walk.tab("overview")

    # an operator task with task_family=: its tab opens that family, not adaptive_genomics.align_NA12878
    browser.get(f"{api_server}/dags/adaptive_genomics/tasks/align_NA12878/plugin/adaptive-task")
    walk.tab("family")
    assert browser.find_element(By.TAG_NAME, "h2").text == "genomics.align"
    walk.shot("task-tab")

    browser.get(f"{api_server}/plugin/adaptive#/families")
    walk.tab("families")
    rows = browser.find_elements(By.CSS_SELECTOR, "#families-table tbody tr")
    assert len(rows) == 50 and sum(80 <= len(r.get_attribute("data-family")) <= 100 for r in rows) >= 45
    line = float(browser.execute_script("return parseFloat(getComputedStyle(document.body).lineHeight)"))
    problems = browser.execute_script(LAYOUT, 5 * line)
    walk.shot("families-nfcore")
    assert not problems, problems[:10]
    # a family far down the list opens at the top of its page
    walk.tab("families")
    browser.execute_script("window.scrollTo(0, document.body.scrollHeight)")
    assert browser.execute_script("return window.scrollY") > 0
    rows[-1].find_element(By.TAG_NAME, "a").click()
    walk.tab("family")
    assert browser.execute_script("return window.scrollY") == 0
    # the family's chart follows its box as the page narrows (a narrower window, a side panel
    # opened), and widens back; the page's own box is narrowed here, as Airflow's layout may
    # reload its frame when the window itself narrows
    width = "const el = document.getElementById('family-chart'); return [el.uplot.width, el.clientWidth]"
    narrow = "document.querySelector('main').style.width = arguments[0]"
    drawn, box = wait_for(lambda: browser.execute_script(width), "the family's chart")
    assert drawn == min(box, 1200) > 700
    # its attempts all ended in one second: the time axis spans a day about it, not 1,000 days
    span = "const u = document.getElementById('family-chart').uplot; return [u.scales.x.min, u.scales.x.max, u.data[0]]"
    low, high, times = browser.execute_script(span)
    assert len(set(times)) == 1 and (low, high) == (times[0] - 43200, times[0] + 43200)
    browser.execute_script(narrow, "500px")
    wait_for(lambda: browser.execute_script(width)[0] < drawn, "the chart to narrow")
    drawn_narrow, box_narrow = browser.execute_script(width)
    assert drawn_narrow == max(320, box_narrow) and box_narrow <= 500
    walk.shot("family-narrow")
    walk.tab("family")  # back into the page's frame, which the screenshot left
    browser.execute_script(narrow, "")
    wait_for(lambda: browser.execute_script(width)[0] == drawn, "the chart to widen back")
