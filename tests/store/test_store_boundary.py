"""The HistoryStore boundary on both implementations: rollups, models, prune, rebuild, errors."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from sqlalchemy import create_engine, event, insert, inspect, update

from airflow_adaptive.advisor import Advisor
from airflow_adaptive.config import get_settings
from airflow_adaptive.core.decide import SizingSettings
from airflow_adaptive.core.model import ExitReason, MemoryRequest, Observation
from airflow_adaptive.core.units import GIB, MIB
from airflow_adaptive.plugin.views import families_page
from airflow_adaptive.store.api import HistoryStore, TotalsQuery
from airflow_adaptive.store.learning import Learning
from airflow_adaptive.store.rows import attempt_values
from airflow_adaptive.store.sql import SqlHistoryStore
from airflow_adaptive.store.tables import aggregate, task_attempt
from tests.conftest import DB_KIND, DB_URL, sql_store
from tests.factories import T0, alembic_config, attempt, split_scores
from tests.memory_store import InMemoryHistoryStore

USER = MemoryRequest(8 * GIB, 8 * GIB)


def churn(seed: int, n: int) -> list[Observation]:
    """Attempts over five families with re-recorded keys, OOM kills and one attempt changing family;
    f0's peaks within 0.3 % of each other (far steadier than the prior: its bound's scores are apart)."""
    rng = random.Random(seed)
    result = []
    for i in range(n):
        run = rng.randrange(n // 2)  # about half the keys come back, with new values
        peak = (2000 + rng.randint(0, 6)) * 10**6 if run % 5 == 0 else rng.randint(1, 40) * 10**8
        obs = attempt(i, family=f"f{run % 5}", peak=peak, run=f"r{run}")
        if rng.random() < 0.1:
            obs = replace(obs, exit_reason=ExitReason.OOM_KILLED)
        if rng.random() < 0.02:
            obs = replace(obs, task_family="moved")
        result.append(obs)
    return result


def test_rollups_and_distributions_equal_a_rebuild_from_the_attempts(store: HistoryStore) -> None:
    observations = churn(0, 300)
    counts = [store.record(observations[i : i + 7]) for i in range(0, len(observations), 7)]
    assert sum(c.new for c in counts) == len({o.key for o in observations})
    live = {r.task_family: r for r in store.families(limit=100)}
    distributions, _ = split_scores(store)
    models = {name: store.family(name).model for name in live}  # type: ignore[union-attr]
    assert store.distributions().steady_scores.total > 0  # f0's, summed apart and checked by split_scores
    assert store.rebuild() == len(live)
    rebuilt = {r.task_family: r for r in store.families(limit=100)}
    assert set(rebuilt) == set(live)
    for name, rollup in live.items():
        for field in ("attempts", "completed", "oom_killed", "usable_samples", "peak_memory_n"):
            assert getattr(rollup, field) == getattr(rebuilt[name], field), (name, field)
        assert rollup.peak_memory_sum == pytest.approx(rebuilt[name].peak_memory_sum)
        assert models[name] is not None
    assert split_scores(store)[0] == distributions
    assert sum(r.attempts for r in rebuilt.values()) == len({o.key for o in observations})


def test_a_warm_decision_reads_one_row_and_one_count_and_never_refits(engine: Any) -> None:
    """A family with the 100 peaks its OOM target needs; a younger one also reads the store-wide
    row, where its small-sample bound's level is calibrated."""
    store = sql_store(engine)
    store.record([attempt(n, peak=(n % 5 + 1) * GIB) for n in range(100)])
    store.record([attempt(1000 + n, family="young", peak=GIB) for n in range(30)])
    statements: list[str] = []

    def seen(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if "adaptive_" in statement:
            statements.append(statement)

    event.listen(engine, "before_cursor_execute", seen)
    try:
        decision = Advisor(get_settings(), lambda: store).memory.decide("f", USER)
        mature = list(statements)
        statements.clear()
        Advisor(get_settings(), lambda: store).memory.decide("young", USER)
    finally:
        event.remove(engine, "before_cursor_execute", seen)
    assert len(mature) == 2 and "FROM adaptive_family \nWHERE" in mature[0]
    assert "count(*)" in mature[1] and "FROM adaptive_unfinished_attempt" in mature[1]  # an index range
    assert (
        decision.adaptive
        and "refitted" not in decision.explanation
        and "the 100 past peaks" in decision.explanation
    )
    assert len(statements) == 3 and "FROM adaptive_aggregate" in statements[2]


def test_a_new_family_with_a_request_reads_no_store_wide_row(engine: Any) -> None:
    """It keeps its request, so what other families used is not read; without a request it is."""
    store = sql_store(engine)
    store.record([attempt(n, family=f"g{n}", peak=GIB) for n in range(30)])
    statements: list[str] = []

    def seen(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        statements.append(statement)

    event.listen(engine, "before_cursor_execute", seen)
    try:
        asked = Advisor(get_settings(), lambda: store).memory.decide("new", USER)
        read_with_request = [s for s in statements if "adaptive_aggregate" in s]
        statements.clear()
        Advisor(get_settings(), lambda: store).memory.decide("new", MemoryRequest())
    finally:
        event.remove(engine, "before_cursor_execute", seen)
    assert asked.memory_request_bytes == 8 * GIB and read_with_request == []
    assert any("adaptive_aggregate" in s for s in statements)


def test_a_page_of_families_reads_their_rows_and_requests_once_not_per_row(engine: Any) -> None:
    """The families list decides for each row; its reads do not grow with the rows on the page."""
    store = sql_store(engine)
    store.record([attempt(n, family=f"g{n % 20}", peak=(n % 5 + 1) * GIB) for n in range(200)])
    statements: list[str] = []

    def seen(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if "adaptive_" in statement:
            statements.append(statement)

    def page_reads(limit: int) -> int:
        statements.clear()
        event.listen(engine, "before_cursor_execute", seen)
        try:
            page = families_page(store, get_settings(), None, TotalsQuery(), limit=limit, offset=0)
        finally:
            event.remove(engine, "before_cursor_execute", seen)
        assert len(page["families"]) == limit and all(row["decision"] for row in page["families"])
        return len(statements)

    few = page_reads(2)
    assert page_reads(20) - few == 18  # per row, one statement: the count of its unfinished attempts
    assert sum("adaptive_family.model" in s for s in statements) == 1  # the rows, with their models
    assert sum("adaptive_task_attempt.user_request_bytes" in s for s in statements) == 1
    assert sum("FROM adaptive_unfinished_attempt" in s for s in statements) == 20


def test_families_named_are_each_familys_row_in_one_read(store: HistoryStore) -> None:
    store.record([attempt(n, family=f"g{n % 3}", peak=(n + 1) * GIB) for n in range(9)])
    found = store.families_named(["g0", "g2", "never-seen"])
    assert sorted(found) == ["g0", "g2"]
    for name, state in found.items():
        assert state == store.family(name)
    assert store.families_named([]) == {}
    long_name = "x" * 1000  # stored shortened (fit_key): an advisor reading it by its full name finds it
    store.record([attempt(20, family=long_name)])
    advisor = Advisor(get_settings(), lambda: store)
    advisor.session.read_families([long_name])
    assert advisor.memory.family_state(long_name) == store.family(long_name) is not None


def test_families_sort_by_name_as_a_reader_expects_case_aside(store: HistoryStore) -> None:
    names = ["beta", "ALPHA", "Gamma", "delta"]
    store.record([attempt(i, family=name, peak=GIB) for i, name in enumerate(names)])
    found, _ = store.family_totals(TotalsQuery(), sort="task_family", descending=False)
    assert [f.task_family for f in found] == ["ALPHA", "beta", "delta", "Gamma"]


def test_a_retry_reads_the_previous_try_by_key(store: HistoryStore) -> None:
    store.record([attempt(n, peak=GIB) for n in range(10)])
    killed = replace(attempt(99, peak=0, run="oom"), exit_reason=ExitReason.OOM_KILLED)
    store.record([replace(killed, memory_limit_bytes=3 * GIB)])
    retry = Advisor(get_settings(), lambda: store).memory.decide("f", USER, replace(killed.key, try_number=2))
    assert retry.memory_request_bytes == 6 * GIB and "OOM-killed at 3 GiB" in retry.explanation


def test_another_strategy_in_config_refits_and_says_why(store: HistoryStore) -> None:
    store.record([attempt(n, peak=(n % 5 + 1) * GIB) for n in range(30)])
    settings = replace(get_settings(), sizing=SizingSettings(strategy="pc95"))
    decision = Advisor(settings, lambda: store).memory.decide("f", USER)
    assert decision.strategy == "pc95"
    assert "refitted now: stored model was fitted by 'adaptive'" in decision.explanation


def test_a_cold_family_starts_at_its_request_whatever_other_families_used(store: HistoryStore) -> None:
    """Its first tasks all start from this one decision: a guess below the request would risk a
    batch of kills, so other families' thrift does not shrink it."""
    used = [replace(attempt(n, family=f"g{n}", peak=GIB), memory_request_bytes=4 * GIB) for n in range(30)]
    store.record(used)
    decision = Advisor(get_settings(), lambda: store).memory.decide("new", USER)
    assert (
        "no history yet (the family's first tasks all start from this one decision)" in decision.explanation
    )
    assert (decision.memory_request_bytes, decision.adaptive) == (8 * GIB, False)


def test_a_cold_family_without_a_request_starts_from_other_families_peaks(store: HistoryStore) -> None:
    """Not the 1 GiB default: P99 of what other families' tasks used (the 1 % target of the 2 %
    OOM budget) + 10 %, then doubling if killed; with no limit while the store holds fewer than
    the 100 peaks a P99 needs."""
    peaks = [attempt(n, family=f"g{n % 3}", peak=(n % 10 + 1) * 50 * MIB) for n in range(100)]
    store.record(peaks[:99])
    nothing = MemoryRequest()
    early = Advisor(get_settings(), lambda: store).memory.decide("new", nothing)
    assert (early.memory_request_bytes, early.memory_limit_bytes, early.adaptive) == (None, None, False)
    assert "needs 100 of them, the store holds 99: keeping the user's request unset" in early.explanation
    store.record(peaks[99:])
    decision = Advisor(get_settings(), lambda: store).memory.decide("new", nothing)
    assert (
        "no history and no request: P99 of the 100 peaks of other task families' tasks"
        in decision.explanation
    )
    assert decision.memory_request_bytes == pytest.approx(500 * MIB * 1.1, rel=0.02)  # P99 of 50..500 MiB
    killed = replace(attempt(99, family="new", peak=0, run="oom"), exit_reason=ExitReason.OOM_KILLED)
    store.record([replace(killed, memory_limit_bytes=decision.memory_limit_bytes)])
    retry = Advisor(get_settings(), lambda: store).memory.decide(
        "new", nothing, replace(killed.key, try_number=2)
    )
    assert retry.memory_request_bytes == 2 * decision.memory_limit_bytes  # type: ignore[operator]


def test_newest_requests_are_each_familys_newest_attempts_in_one_read(store: HistoryStore) -> None:
    """What a page of the families list decides for: per family, its newest attempt's request,
    within the DAGs asked for; None for no request or no such attempt."""
    asked = [replace(attempt(n, family=f"g{n % 3}"), user_request_bytes=(n + 1) * GIB) for n in range(9)]
    other_dag = replace(attempt(20, family="g0"), user_request_bytes=99 * GIB)
    store.record([*asked, replace(other_dag, key=replace(other_dag.key, dag_id="other"))])
    store.record([attempt(21, family="no-request")])
    names = ["g0", "g1", "g2", "no-request", "never-seen"]
    assert store.newest_requests(names) == {
        "g0": 99 * GIB, "g1": 8 * GIB, "g2": 9 * GIB, "no-request": None, "never-seen": None,
    }  # fmt: skip
    assert store.newest_requests(names, dag_ids=frozenset({"dag"}))["g0"] == 7 * GIB
    assert store.newest_requests(["g1"], dag_ids=frozenset({"other"})) == {"g1": None}
    for name in names[:4]:  # the same answer as each family's own newest attempt
        newest = store.history(name, limit=1)
        assert store.newest_requests([name]) == {name: newest[-1].user_request_bytes}
    assert store.newest_requests([]) == {}


def test_prune_keeps_the_newest_and_the_totals(store: HistoryStore) -> None:
    store.record(
        [attempt(n, peak=GIB) for n in range(20)] + [attempt(n, family="g", run=f"g{n}") for n in range(3)]
    )
    dry = store.prune(keep_attempts=5, keep_days=0, dry_run=True)
    assert (dry.attempts, dry.families, dry.dry_run) == (15, 1, True)
    assert len(store.history("f", limit=100)) == 20
    done = store.prune(keep_attempts=5, keep_days=0)
    assert (done.attempts, done.families) == (15, 1)
    assert [o.key.run_id for o in store.history("f", limit=100)] == [f"run{n}" for n in range(15, 20)]
    assert store.family("f").rollup.attempts == 20  # type: ignore[union-attr]
    by_age = store.prune(keep_attempts=0, keep_days=1, now=T0 + timedelta(days=1, minutes=1, seconds=30))
    assert by_age.attempts == 2  # g's attempts at minutes 0 and 1 are older than a day
    assert store.prune(keep_attempts=0, keep_days=0).attempts == 0


def test_migration_builds_rollups_from_existing_attempts(tmp_path: Path) -> None:
    url = DB_URL if DB_KIND == "postgres" else f"sqlite:///{tmp_path}/m.db"
    config = alembic_config(url)
    migrated = create_engine(url)
    try:
        command.downgrade(config, "base")
        command.upgrade(config, "b3e9d2a41c07")  # before rollups existed
        with migrated.begin() as conn:
            # only the columns the table had at that revision: later migrations add more
            present = {c["name"] for c in inspect(conn).get_columns(task_attempt.name)}
            old_columns = [
                {k: v for k, v in attempt_values(attempt(n, peak=GIB)).items() if k in present}
                for n in range(12)
            ]
            conn.execute(insert(task_attempt), old_columns)
        command.upgrade(config, "head")
        state = SqlHistoryStore(migrated).family("f")
        assert state is not None and state.rollup.attempts == 12 and state.model is None
        decision = Advisor(get_settings(), lambda: SqlHistoryStore(migrated)).memory.decide("f", USER)
        assert "refitted now: no stored model" in decision.explanation
        # 0007: the store-wide peaks, from the families' peak histograms, where a store has none yet
        without_peaks = {**SqlHistoryStore(migrated).distributions().to_json(), "peaks": {}}
        with migrated.begin() as conn:
            conn.execute(update(aggregate).values(distributions=without_peaks))
        command.downgrade(config, "f5c2a8e7d914")
        command.upgrade(config, "head")
        assert SqlHistoryStore(migrated).distributions().peaks.total == 12
        # 0013: every family's spread of log peaks, counted from the same histograms
        command.downgrade(config, "f7b2d5e8a146")
        assert SqlHistoryStore(migrated).distributions().spread is None  # not counted: unknown
        command.upgrade(config, "head")
        spread = SqlHistoryStore(migrated).distributions().spread
        assert spread is not None and spread.families == 1 and spread.df_sum == 11
    finally:
        command.downgrade(config, "base")
        command.upgrade(config, "head")
        migrated.dispose()


@pytest.fixture
def cli_env(tmp_path: Path) -> Iterator[dict[str, str]]:
    env = dict(os.environ, AIRFLOW_HOME=str(tmp_path))
    env.pop("AIRFLOW_CONN_ADAPTIVE_HISTORY_DEFAULT", None)
    yield env


@pytest.mark.parametrize(
    ("database", "expected"),
    [
        ("not-migrated", "no such table: adaptive_"),
        ("down", "history store unavailable: "),
    ],
)
@pytest.mark.parametrize("argv", [["history", "show", "--task-family", "f"], ["history", "import", "x.csv"]])
def test_cli_says_in_one_line_that_the_store_is_unavailable(
    cli_env: dict[str, str], tmp_path: Path, database: str, expected: str, argv: list[str]
) -> None:
    trace = tmp_path / "x.csv"
    trace.write_text(
        "task_id,hash,native_id,process,tag,name,status,exit,module,container,cpus,time,disk,memory,"
        "attempt,submit,start,complete,duration,realtime,queue,%cpu,%mem,rss,vmem,peak_rss,peak_vmem,"
        "rchar,wchar,syscr,syscw,read_bytes,write_bytes,vol_ctxt,inv_ctxt,env,workdir,script,scratch,"
        "error_action,hostname,cpu_model\n"
    )
    url = (
        f"sqlite:///{tmp_path}/empty.db"
        if database == "not-migrated"
        else "postgresql+psycopg2://nobody@127.0.0.1:9/x"
    )
    cli_env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = url
    done = subprocess.run(
        [sys.executable, "-m", "airflow_adaptive.cli", *argv], env=cli_env, capture_output=True, text=True,
        timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    errors = [line for line in done.stderr.splitlines() if "airflow-adaptive: error:" in line]
    assert len(errors) == 1 and expected in errors[0], done.stderr
    assert database == "down" or errors[0].endswith("(run airflow db migrate?)")
    assert "Traceback" not in done.stderr


def test_learning_settings_reach_the_stored_model(engine: Any) -> None:
    store = SqlHistoryStore(engine, Learning(SizingSettings(strategy="pc50"), history_window=4))
    store.record([attempt(n, peak=(n + 1) * GIB) for n in range(10)])
    model = store.family("f").model  # type: ignore[union-attr]
    assert model is not None and model.strategy == "pc50" and model.window_samples == 4


@pytest.mark.parametrize("kind", ["memory", "sql"])
def test_long_names_and_impossible_numbers_are_normalised_not_refused(kind: str, engine: Any) -> None:
    """A family longer than the column keeps a readable prefix and a hash (reads use the same rule);
    numbers that cannot be true are stored as unknown, and the rest of the attempt is kept."""
    from dataclasses import replace as with_

    from airflow_adaptive.core.model import Usage
    from airflow_adaptive.core.normalise import MAX_KEY_CHARS, fit_key
    from tests.conftest import sql_store

    store = InMemoryHistoryStore() if kind == "memory" else sql_store(engine)
    long_a, long_b = "f" * 300 + "a", "f" * 300 + "b"
    store.record([attempt(1, family=long_a, peak=10**9), attempt(2, family=long_b, peak=2 * 10**9)])
    assert len(fit_key(long_a)) == MAX_KEY_CHARS and fit_key(long_a) != fit_key(long_b)
    assert [o.usage.peak_memory_bytes for o in store.history(long_a)] == [10**9]
    assert store.family(long_b).rollup.attempts == 1  # type: ignore[union-attr]
    assert store.progress(long_a) is not None
    bad = attempt(3, family="odd", peak=10**30)
    bad = with_(bad, usage=Usage(peak_memory_bytes=10**30, wall_seconds=float("inf"), cpu_core_seconds=-1.0,
                                 read_bytes=2**70), memory_limit_bytes=2**50, exit_code=2**40)  # fmt: skip
    store.record([bad, attempt(4, family="odd", peak=10**9)])
    stored = {o.key.run_id: o for o in store.history("odd")}
    odd = stored["run3"]
    assert odd.usage.peak_memory_bytes is None and odd.usage.wall_seconds is None
    assert odd.usage.cpu_core_seconds is None and odd.usage.read_bytes is None
    assert odd.memory_limit_bytes is None and odd.exit_code is None
    assert stored["run4"].usage.peak_memory_bytes == 10**9


def test_a_nul_in_a_name_or_search_finds_nothing_and_raises_nothing(engine: Any) -> None:
    """Names are stored with NUL as U+FFFD (PostgreSQL cannot hold a NUL); reads and searches follow
    the same rule, so a NUL neither crashes the driver (PostgreSQL) nor ends the pattern (SQLite)."""
    store = sql_store(engine)
    store.record([attempt(1, family="f", peak=GIB), attempt(2, family="g\x00h", peak=GIB)])
    assert store.family_totals(TotalsQuery(search="\x00"))[1] == 1  # only g\x00h
    assert store.family_totals(TotalsQuery(search="f\x00"))[1] == 0
    assert store.family("f\x00") is None and store.history("f\x00") == []
    assert store.family("g\x00h") is not None
