"""Warm starts across families: task names, donors, replay, the simulator and the advisor."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone

import pytest

from airflow_adaptive.advisor import Advisor
from airflow_adaptive.config import get_settings
from airflow_adaptive.core.model import ExitReason, MemoryRequest
from airflow_adaptive.core.sizing import Sample, make_predictor
from airflow_adaptive.core.sizing.prior import HistogramPeakPrior
from airflow_adaptive.core.sizing.similar import (
    Identity,
    borrowed_allocation,
    image_name,
    names_a_tool,
    pick_donor,
    program_of,
    similarity,
    task_name,
)
from airflow_adaptive.core.sketch import LogHistogram
from airflow_adaptive.core.units import GIB
from airflow_adaptive.evaluation.replay import ReplayConfig, replay
from airflow_adaptive.store.api import HistoryStore
from airflow_adaptive.traces.runs import TaskRun
from tests.factories import attempt


@pytest.mark.parametrize(
    ("family", "name"),
    [
        ("rnaseq.fastqc", "fastqc"),
        ("NFCORE_RNASEQ:RNASEQ:FASTQC", "fastqc"),
        ("NFCORE_MAG.MAG.BINNING.MAG_DEPTHS", "mag_depths"),
        ("s3/prefix/Align", "align"),
        ("plain", "plain"),
    ],
)
def test_the_task_name_is_the_last_part_without_case(family: str, name: str) -> None:
    assert task_name(family) == name


def test_similarity_levels() -> None:
    assert similarity("a.fastqc", "NFCORE:B:FASTQC") == 1.0
    assert similarity("a.fastqc", "b.fastqc_raw") == 0.5
    assert similarity("a.fastqc_raw", "b.fastqc") == 0.5
    assert similarity("a.fastqcx", "b.fastqc") == 0.0  # a prefix without "_" is another tool
    assert similarity("a.", "b.") == 0.0


def test_the_donor_is_the_most_similar_family_with_enough_samples() -> None:
    candidates = [("x.fastqc", 2), ("y.fastqc_raw", 50), ("z.fastqc", 9), ("w.fastqc", 9), ("v.multiqc", 99)]
    donor = pick_donor("new.fastqc", candidates)
    assert donor is not None and (donor.family, donor.samples) == ("w.fastqc", 9)  # ties: the name
    assert "same task name" in donor.explain()
    qualified = pick_donor("new.fastqc", [("y.fastqc_raw", 50)], min_similarity=0.5)
    assert qualified is not None and qualified.similarity == 0.5
    assert pick_donor("new.fastqc", [("y.fastqc_raw", 50)]) is None  # qualified names: off by default
    assert pick_donor("a.fastqc", [("a.fastqc", 50), ("b.fastqc", 2)]) is None  # never itself


def test_a_borrowed_allocation_never_exceeds_the_users_request() -> None:
    model = make_predictor("adaptive").fit([Sample(4 * GIB, wall_seconds=1.0)] * 5)
    assert borrowed_allocation(model, None, None)[0] == model.predict()
    assert borrowed_allocation(model, None, 2 * GIB)[0] == 2 * GIB
    assert borrowed_allocation(model, None, 64 * GIB)[0] == model.predict() < 64 * GIB


def runs(family: str, peak_gib: float, n: int, request_gib: float | None = None) -> list[TaskRun]:
    request = int(request_gib * GIB) if request_gib else None
    return [TaskRun(family, int(peak_gib * GIB), 60.0, user_request_bytes=request) for _ in range(n)]


def test_replay_sizes_a_cold_family_by_its_donor_and_only_for_strategies_that_borrow() -> None:
    trace = runs("a:SORT", 3.0, 10) + runs("b:SORT", 3.0, 3)
    config = ReplayConfig(history="sequential", cap_bytes=64 * GIB)
    with_donor = replay(trace, "adaptive", config).first_allocations
    without = replay(trace, "adaptive", replace(config, warm_starts=False)).first_allocations
    # cold with no request and too few peaks of other families for their P99: the pod stays unbounded,
    # which the replay charges as the whole node (the cap)
    assert without[10] == ("b:SORT", 64 * GIB, 3 * GIB)
    # the store as the replay left it: a's third to tenth peaks scored 0.5 each (at its centre) against
    # their own spread (identical peaks are far steadier than the prior); its bound stays under P95 +
    # 15 % at any level, so the rule sizes it
    steady = LogHistogram()
    steady.add(0.5, 8)
    prior = HistogramPeakPrior(LogHistogram(), None, LogHistogram(), steady)
    donor = make_predictor("adaptive", cap_bytes=64 * GIB).fit(
        [Sample(3 * GIB, wall_seconds=60.0)] * 10, prior
    )
    assert with_donor[10][1] == donor.predict() < 64 * GIB  # a's model, as a sizes its own next task
    assert (
        replay(trace, "adaptive", config).waste_byte_s
        < replay(trace, "adaptive", replace(config, warm_starts=False)).waste_byte_s
    )
    assert replay(trace, "pc95", config).first_allocations[10][1] == 64 * GIB  # anchors do not borrow


def test_imported_history_only_serves_cold_starts() -> None:
    trace = runs("mine:SORT", 2.0, 5)
    config = ReplayConfig(history="sequential", cap_bytes=64 * GIB)
    # 100 imported tasks: past the small-sample bound of the default 1 % target
    result = replay(trace, "adaptive", config, imported=runs("other:SORT", 2.0, 100))
    donor = make_predictor("adaptive", cap_bytes=64 * GIB).fit([Sample(2 * GIB, wall_seconds=60.0)] * 100)
    assert result.first_allocations[0][1] == donor.predict() == 2 * GIB  # constant peaks: P50 + 0 %
    assert result.retries == 0 and result.instances == 5


def test_a_cold_family_borrows_the_model_of_a_family_with_the_same_task_name(store: HistoryStore) -> None:
    store.record([attempt(n, family="rnaseq.fastqc", peak=2 * GIB) for n in range(100)])
    store.record([attempt(n, family="rnaseq.multiqc", peak=6 * GIB, run=f"m{n}") for n in range(20)])
    user = MemoryRequest(8 * GIB, 8 * GIB)
    decision = Advisor(get_settings(), lambda: store).memory.decide("chipseq.fastqc", user)
    own = Advisor(get_settings(), lambda: store).memory.decide("rnaseq.fastqc", user)
    assert decision.memory_request_bytes == own.memory_request_bytes == 2 * GIB  # the donor's answer
    assert "no history yet: the model of similar family 'rnaseq.fastqc'" in decision.explanation
    assert decision.details["borrowed_from"] == "rnaseq.fastqc" and decision.observations == 0
    small = Advisor(get_settings(), lambda: store).memory.decide("chipseq.fastqc", MemoryRequest(GIB, GIB))
    assert small.memory_request_bytes == GIB and "capped at the request" in small.explanation
    settings = get_settings()
    off = replace(settings, sizing=replace(settings.sizing, warm_starts=False))
    cold = Advisor(off, lambda: store).memory.decide("chipseq.fastqc", user)
    assert "borrowed_from" not in cold.details and "similar family" not in cold.explanation


def test_a_borrowed_model_sizes_only_a_try_that_starts_alone(store: HistoryStore) -> None:
    """Tries that start beside a running one keep the request: a donor that ran on other data
    costs one kill, not a batch."""
    store.record([attempt(n, family="rnaseq.fastqc", peak=2 * GIB) for n in range(100)])
    user = MemoryRequest(8 * GIB, 8 * GIB)
    alone = Advisor(get_settings(), lambda: store).memory.decide("chipseq.fastqc", user)
    assert alone.details["borrowed_from"] == "rnaseq.fastqc" and alone.memory_request_bytes == 2 * GIB
    store.mark_unfinished(
        attempt(0, family="chipseq.fastqc").key, "chipseq.fastqc", datetime.now(timezone.utc)
    )
    beside = Advisor(get_settings(), lambda: store).memory.decide("chipseq.fastqc", user)
    assert beside.memory_request_bytes == 8 * GIB and "borrowed_from" not in beside.details
    assert "no history yet" in beside.explanation


def test_in_replay_a_cold_fan_out_borrows_for_its_first_task_only() -> None:
    donor = [TaskRun("a:SORT", 2 * GIB, 60.0, start_s=60.0 * i, finish_s=60.0 * (i + 1)) for i in range(100)]
    fan_out = [
        TaskRun(
            "b:SORT", 2 * GIB, 60.0, user_request_bytes=8 * GIB, start_s=10_000.0 + i, finish_s=10_060.0 + i
        )
        for i in range(3)
    ]
    config = ReplayConfig(cap_bytes=64 * GIB)
    firsts = replay([*donor, *fan_out], "adaptive", config).first_allocations[-3:]
    allocs = [alloc for _, alloc, _ in firsts]
    assert allocs[0] < 3 * GIB and allocs[1:] == [8 * GIB, 8 * GIB]  # the donor's model, then the request
    unguarded = replay([*donor, *fan_out], "adaptive", replace(config, guard_unfinished=False))
    assert unguarded.first_allocations[-3:] == firsts  # not a part of the unfinished-task guard
    off = replay([*donor, *fan_out], "adaptive", replace(config, warm_starts=False)).first_allocations[-3:]
    assert [alloc for _, alloc, _ in off] == [8 * GIB] * 3


def test_a_killed_borrowed_try_retries_as_the_cold_family_would(store: HistoryStore) -> None:
    """The donor sized the first try only: after a kill, the retry is the cold family's own (the
    user's request, then doubling), as in replay, not the donor's choice among its own peaks."""
    peaks = [(2 if n % 2 else 10) * GIB for n in range(40)]
    store.record([attempt(n, family="rnaseq.sort", peak=p) for n, p in enumerate(peaks)])
    user = MemoryRequest(8 * GIB, 8 * GIB)
    first = Advisor(get_settings(), lambda: store).memory.decide("chipseq.sort", user)
    assert first.memory_request_bytes == 8 * GIB and first.details["borrowed_from"] == "rnaseq.sort"
    killed = replace(
        attempt(0, family="chipseq.sort", run="now"),
        exit_reason=ExitReason.OOM_KILLED,
        memory_request_bytes=8 * GIB,
        memory_limit_bytes=8 * GIB,
    )
    retry = Advisor(get_settings(), lambda: store).memory.decide(
        "chipseq.sort", user, previous_attempt=killed
    )
    assert retry.memory_request_bytes == 16 * GIB  # doubling; the donor would have said 10 GiB


def test_a_wrong_donor_costs_one_killed_try_then_the_users_request() -> None:
    """A borrowed model far too small: one kill, then the user's request, not a chain of doublings."""
    trace = runs("a:SORT", 0.1, 10) + runs("b:SORT", 6.0, 1, request_gib=8.0)
    config = ReplayConfig(history="sequential", cap_bytes=64 * GIB)
    result = replay(trace, "adaptive", config)
    assert result.first_allocations[10][1] < GIB  # a's model: about 115 MiB
    assert result.retries == 1 and result.failed == 0
    assert result.waste_byte_s == pytest.approx(
        sum(alloc * 60.0 for _, alloc, _ in result.first_allocations[10:])
        + (8 - 6) * GIB * 60.0
        + (sum((a - p) * 60.0 for _, a, p in result.first_allocations[:10])),
        rel=1e-6,
    )


@pytest.mark.parametrize(
    ("argv", "program"),
    [
        (["bwa", "mem", "ref.fa"], "bwa mem"),
        (["/usr/local/bin/samtools", "sort", "-o", "x.bam"], "samtools sort"),
        (["fastqc", "-t", "2", "a.fq"], "fastqc"),
        (["bash", "-c", "set -e; cd /data && STAR --runThreadN 4"], "STAR"),
        (["sh", "-c", "test -f /ref/x.bwt || bwa index /ref/x.fa"], "bwa index"),
        (["bash", "run.sh"], "run.sh"),
        (["bash", "-euo", "pipefail", "-c", "# align\nSTAR --runThreadN 4"], "STAR"),
        (["env", "OMP_NUM_THREADS=2", "python3", "-u", "/app/train.py"], "train.py"),
        (["python", "-c", "print('report')"], "python"),
        (["python3.11", "-u", "-c", "print(1)"], "python3"),  # inline code: the interpreter, whatever version
        (["python", "train.py", "-c", "cfg.yaml"], "train.py"),  # the script's own -c is no inline code
        (["/usr/bin/python3.12", "app.py"], "app.py"),
        (["java", "-Xmx4g", "-jar", "picard.jar", "MarkDuplicates"], "picard.jar MarkDuplicates"),
        (["sh", "-c", "unbalanced 'quote"], "unbalanced"),
        ([], None),
        (["python"], None),
    ],
)
def test_the_program_is_the_first_word_that_is_not_a_launcher(argv: list[str], program: str | None) -> None:
    assert program_of(argv) == program


def test_images_compare_without_tag_or_digest() -> None:
    assert image_name("quay.io/biocontainers/samtools:1.15.1--h1170115_0") == "quay.io/biocontainers/samtools"
    assert image_name("localhost:5000/bwa@sha256:abc") == "localhost:5000/bwa"
    assert image_name("ubuntu") == "ubuntu" and image_name(" ") is None


def test_a_cold_family_borrows_by_image_and_program_only_when_both_match() -> None:
    align = Identity("dag_a.align", "repo/bwa:0.7.17", "bwa mem")
    cold = Identity("dag_b.map_reads", "repo/bwa:0.7.18", "bwa mem")
    assert similarity(cold, align) == 1.0
    assert similarity(Identity("b.x", "repo/bwa:1"), align) == 0.5  # the image alone
    assert similarity(Identity("b.x", None, "bwa mem"), align) == 0.5  # the program alone
    assert similarity(Identity("b.index", "repo/bwa:1", "bwa index"), align) == 0.5  # another bwa tool
    donor = pick_donor(cold, [(align, 10), ("dag_a.sort", 50)])
    assert donor is not None and donor.family == "dag_a.align" and "same image and program" in donor.explain()
    assert pick_donor(Identity("b.x", "repo/bwa:1"), [(align, 10)]) is None  # one alone: not by default
    assert pick_donor(Identity("b.x", "repo/bwa:1"), [(align, 10)], min_similarity=0.5) is not None


def test_inline_code_and_airflows_task_runner_name_no_tool() -> None:
    """Every KubernetesExecutor worker starts Airflow's runner in Airflow's image, and ``python -c``
    is the interpreter whatever it runs: neither makes two families alike (no borrowed model, which
    would size a new task from an unrelated one's peaks)."""
    worker = ["python", "-m", "airflow.sdk.execution_time.execute_workload", "--json-string", "{}"]
    runner = program_of(worker)
    assert runner == "airflow.sdk.execution_time.execute_workload" and program_of(["airflow", "tasks", "run"])
    crunch, tiny = (Identity(f, "apache/airflow:3.3.2", runner) for f in ("py_exec.crunch", "small_dag.tiny"))
    assert similarity(crunch, tiny) == 0.0
    assert pick_donor(crunch, [(tiny, 6)], min_similarity=0.5) is None
    assert names_a_tool(program_of(["airflow", "db", "clean"]))  # maintenance, not the task runner
    legacy = Identity("a.b", "apache/airflow:2.10", program_of(["airflow", "tasks", "run", "a", "b"]))
    assert similarity(legacy, Identity("c.d", "apache/airflow:2.10", "airflow tasks")) == 0.0
    inline = [
        Identity(f, "python:3.12-slim", program_of(["python", "-c", "..."])) for f in ("etl.load", "x.y")
    ]
    assert similarity(*inline) == 0.5  # the image alone: below the default's 1
    assert (
        similarity(Identity("a.b", "python:3.12-slim", "train.py"), Identity("c.d", "python:3", "train.py"))
        == 1
    )


def test_the_advisor_finds_a_donor_by_what_families_run(store: HistoryStore) -> None:
    """The newest recorded image and program of each family are kept on its row; a cold family
    that runs the same is sized by its model."""
    bwa = [
        replace(attempt(n, family="dag_a.align", peak=3 * GIB), image="repo/bwa:1", program="bwa")
        for n in range(20)
    ]
    store.record(bwa)
    rollup = store.family("dag_a.align").rollup  # type: ignore[union-attr]
    assert (rollup.image, rollup.program) == ("repo/bwa:1", "bwa")
    assert store.history("dag_a.align", limit=1)[0].image == "repo/bwa:1"
    user = MemoryRequest(8 * GIB, 8 * GIB)
    advisor = Advisor(get_settings(), lambda: store)
    decision = advisor.memory.decide("dag_b.map_reads", user, image="repo/bwa:2", program="bwa")
    assert decision.details["borrowed_from"] == "dag_a.align"
    assert "the same image and program" in decision.explanation
    other = Advisor(get_settings(), lambda: store).memory.decide("dag_b.map_reads", user, image="repo/bwa:2")
    assert "borrowed_from" not in other.details  # the image alone is not enough by default


def test_a_borrowed_line_past_the_donors_inputs_says_it_was_capped(store: HistoryStore) -> None:
    """A donor's line on input size is capped past the largest input the donor finished, as the
    family's own would be, and the borrowed decision says so."""
    inputs = [int((0.1 + 0.05 * n) * GIB) for n in range(40)]  # 0.1 to 2.05 GiB
    store.record(
        [replace(attempt(n, family="wf.align", peak=2 * x), input_size_bytes=x) for n, x in enumerate(inputs)]
    )
    far = 6 * GIB  # the line says about 12 GiB here
    decision = Advisor(get_settings(), lambda: store).memory.decide(
        "other.align", MemoryRequest(None, None), input_size_bytes=far
    )
    assert decision.details["borrowed_from"] == "wf.align"
    assert "; input 6 GiB is beyond the largest the family has finished" in decision.explanation
    assert decision.memory_request_bytes is not None
    assert decision.memory_request_bytes <= 2 * max(inputs) * 1.15 + GIB // 100
