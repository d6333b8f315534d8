"""What the UI's JSON endpoints answer, aggregated server-side through the history store.

Every function takes the DAGs the user may read (``None``: all of them) and never shows an
attempt of another DAG. Byte-seconds are reported as GB·h (10^9 bytes x 3600 s).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import asdict, replace
from datetime import date
from typing import Any

from airflow_adaptive.advice.placement_advice import runtime_estimates
from airflow_adaptive.advisor import Advisor
from airflow_adaptive.config import AdaptiveSettings
from airflow_adaptive.core.decide import SizingSettings
from airflow_adaptive.core.model import MemoryRequest, Observation, PeakKind
from airflow_adaptive.core.node_groups import StoredNode, summarize_groups
from airflow_adaptive.core.rollup import DayTotals
from airflow_adaptive.core.runtimes import StoredRun, recorded_runs
from airflow_adaptive.core.sizing import predictor_names, quick_predictor_names
from airflow_adaptive.evaluation.replay import GB_H, ReplayConfig, replay
from airflow_adaptive.kubernetes.quantity import as_pod_gets_it
from airflow_adaptive.plugin.readable import hidden_note, history_hidden, next_decision
from airflow_adaptive.plugin.sources import SAVING_KEYS, source_name, without_saving
from airflow_adaptive.store.api import HistoryStore, Source, TotalsQuery
from airflow_adaptive.traces.runs import TaskRun

Dags = frozenset[str] | None
WHATIF_TASKS = 300  # the newest completed attempts a what-if replays
PLACEMENT_HIDDEN = (
    "not shown: task labels rank a family against every DAG's families, some of which you may not read"
)
REASON_HIDDEN = "not shown: a pod's reasons may draw on DAGs you may not read"


def _gb_h(byte_seconds: float) -> float:
    return round(byte_seconds / GB_H, 6)


def totals_json(t: DayTotals) -> dict[str, Any]:
    wasted = t.requested_byte_seconds - t.used_byte_seconds + t.killed_byte_seconds
    saving = t.user_requested_byte_seconds - t.requested_byte_seconds
    per_100 = 100.0 / t.attempts if t.attempts else 0.0
    return {
        "attempts": t.attempts,
        "completed": t.completed,
        "oom_killed": t.oom_killed,
        "retries": t.retries,
        "oom_per_100": round(t.oom_killed * per_100, 2),
        "retries_per_100": round(t.retries * per_100, 2),
        "requested_gb_h": _gb_h(t.requested_byte_seconds),
        "used_gb_h": _gb_h(t.used_byte_seconds),
        "wasted_gb_h": _gb_h(wasted),
        "user_requested_gb_h": _gb_h(t.user_requested_byte_seconds),
        "saving_gb_h": _gb_h(saving),
        "saving_fraction": round(saving / t.user_requested_byte_seconds, 4)
        if t.user_requested_byte_seconds
        else None,
    }


def _summed(totals: list[DayTotals]) -> DayTotals:
    total = DayTotals()
    for t in totals:
        total = total.plus(t)
    return total


def overview(
    store: HistoryStore, dags: Dags, start: date | None, end: date | None, source: Source | None
) -> dict[str, Any]:
    """Totals of one source (None: of both, with each source's saving apart, never one over both)."""
    by_source = {
        s: store.day_totals(TotalsQuery(dags, start, end, source=s))
        for s in ([source] if source is not None else list(Source))
    }
    by_day: dict[date, list[DayTotals]] = {}
    for found in by_source.values():
        for day, t in found:
            by_day.setdefault(day, []).append(t)
    days = [{"day": day, **totals_json(_summed(ts))} for day, ts in sorted(by_day.items())]
    _, families = store.family_totals(TotalsQuery(dags, start, end, source=source), limit=0)
    body = {
        "start": start,
        "end": end,
        "source": source_name(source),
        "families": families,
        **totals_json(_summed([t for found in by_source.values() for _, t in found])),
        "days": days,
    }
    if source is not None:
        return body
    saving = {s.value: totals_json(_summed([t for _, t in found])) for s, found in by_source.items()}
    return {
        **without_saving(body),
        "days": [without_saving(d) for d in days],
        "saving_by_source": {
            name: {k: t[k] for k in ("attempts", "user_requested_gb_h", *SAVING_KEYS)}
            for name, t in saving.items()
        },
    }


def families_page(
    store: HistoryStore, settings: AdaptiveSettings, dags: Dags, query: TotalsQuery, **page: Any
) -> dict[str, Any]:
    found, count = store.family_totals(query, **page)
    mixed = query.source is None  # a family's saving over both sources would mislead
    advisor = Advisor(settings, lambda: store, refit_stale=False)  # a page never refits 50 models
    # each row decides for its newest attempt's request, as the family's own page does
    names = [row.task_family for row in found]
    requests = store.newest_requests(names, dag_ids=dags)
    advisor.session.read_families(names)  # one read for the page, not one per row
    rows = []
    for row in found:
        state = advisor.memory.family_state(row.task_family)
        peaks = state.rollup.peaks if state is not None and dags is None else None
        request = MemoryRequest(requests.get(row.task_family))
        decision = next_decision(store, settings, advisor, dags, row.task_family, request)
        totals = totals_json(row.totals)
        rows.append(
            {
                "task_family": row.task_family,
                "last_day": row.last_day,
                **(without_saving(totals) if mixed else totals),
                "p50_peak_bytes": peaks.quantile(0.5) if peaks else None,
                "p95_peak_bytes": peaks.quantile(0.95) if peaks else None,
                "decision": _decision_json(decision) if decision.adaptive else None,
                **hidden_note(history_hidden(store, dags, row.task_family)),
            }
        )
    return {
        "total": count,
        "offset": page.get("offset", 0),
        "limit": page.get("limit", 50),
        "source": source_name(query.source),
        "families": rows,
    }


def _decision_json(decision: Any) -> dict[str, Any]:
    return {
        "memory_request_bytes": as_pod_gets_it(decision.memory_request_bytes),
        "memory_limit_bytes": as_pod_gets_it(decision.memory_limit_bytes),
        "strategy": decision.strategy,
        "explanation": decision.explanation,
        "rule": decision.details.get(
            "rule"
        ),  # the default strategy's rule, its replayed kill rate and budget
        "rule_oom_rate": decision.details.get("rule_oom_rate"),
        "max_oom_rate": decision.details.get("max_oom_rate"),
        "oom_target": decision.details.get("oom_target"),
        "small_sample_bound_bytes": decision.details.get("small_sample_bound_bytes"),
        "small_sample_bound_kind": decision.details.get("small_sample_bound_kind"),
        "small_sample_bound_level": decision.details.get("small_sample_bound_level"),
        "small_sample_bound_own_spread": decision.details.get("small_sample_bound_own_spread"),
    }


def _attempt_json(obs: Observation, group_of: dict[str, int], *, restricted: bool = False) -> dict[str, Any]:
    return {
        "dag_id": obs.key.dag_id,
        "task_id": obs.key.task_id,
        "run_id": obs.key.run_id,
        "map_index": obs.key.map_index,
        "try_number": obs.key.try_number,
        "finished_at": obs.finished_at,
        "exit_reason": obs.exit_reason.value,
        "oom_killed": obs.oom_killed,
        "user_request_bytes": obs.user_request_bytes,
        "memory_request_bytes": obs.memory_request_bytes,
        "memory_limit_bytes": obs.memory_limit_bytes,
        "peak_memory_bytes": obs.usage.peak_memory_bytes,
        "peak_is_lower_bound": obs.usage.peak_kind in (PeakKind.SAMPLED, PeakKind.CENSORED),
        "wall_seconds": obs.usage.wall_seconds,
        "node": obs.node_name,  # an imported trace's host is another cluster's: in none of the groups here
        "group": None if obs.imported else group_of.get(obs.node_name or ""),
        "strategy": obs.strategy,
        "explanation": REASON_HIDDEN if restricted and obs.explanation else obs.explanation,
    }


def family_detail(
    store: HistoryStore, settings: AdaptiveSettings, dags: Dags, task_family: str, limit: int
) -> dict[str, Any] | None:
    history = store.history(task_family, limit=limit, dag_ids=dags)
    if not history:
        return None
    nodes = store.nodes()
    group_of = {n.name: n.group_id for n in nodes if n.group_id is not None}
    advisor = Advisor(settings, lambda: store)
    request = MemoryRequest(history[-1].user_request_bytes)
    decision = next_decision(store, settings, advisor, dags, task_family, request)
    hidden = history_hidden(store, dags, task_family)
    # Labels rank the family's demands against every DAG's families: only for who may read them all.
    placement = (
        advisor.placement.place(task_family, frozenset(), decision.memory_request_bytes)
        if dags is None
        else None
    )
    image, program = next(
        ((o.image, o.program) for o in reversed(history) if o.image or o.program), (None, None)
    )
    return {
        "task_family": task_family,
        "dags": [d for d in store.family_dags(task_family) if dags is None or d in dags],
        "image": image,  # what its newest attempts run (warm starts match other families by it)
        "program": program,
        "attempts": [_attempt_json(o, group_of, restricted=dags is not None) for o in history],
        "attempts_limit": limit,  # the newest this many are shown: as many as that means maybe more
        "decision": _decision_json(decision),
        "labels": dict(placement.labels or {}) if placement else None,  # None: hidden, not none
        "preferred_groups": list(placement.preferred_groups) if placement else [],
        "runtime_by_group": _runtimes_json(recorded_runs(history), nodes),
        "placement": placement.explain(with_labels=False) if placement else PLACEMENT_HIDDEN,  # labels: above
        **hidden_note(hidden),
    }


def _runtimes_json(runs: Sequence[StoredRun], nodes: Sequence[StoredNode]) -> list[dict[str, Any]]:
    """Expected runtime per node group from the attempts shown (a restricted user's own DAGs only)."""
    return [
        {"group": g, "seconds": e.seconds, "log_spread": e.log_spread, "runs": e.runs}
        for g, e in sorted(runtime_estimates(runs, nodes).items())
    ]


RUNTIME_FAMILIES = 20  # the busiest families whose runtime per group the Nodes page shows
_whatif_lock = threading.Lock()
_whatif_cache: dict[tuple[tuple[TaskRun, ...], str], tuple[dict[str, Any], ...]] = {}
WHATIF_CACHED = 64  # replays kept, the oldest dropped first


def _replayed(runs: tuple[TaskRun, ...], sizing: SizingSettings) -> tuple[dict[str, Any], ...]:
    """Every strategy on ``runs`` through the decision pods get, with the deployment's own sizing
    settings (its cap, budget, warm-up, retry policy, floor); cached per history and settings."""
    key = (runs, repr(replace(sizing, strategy="", params={})))  # what the replays differ by
    if key in _whatif_cache:
        _whatif_cache[key] = _whatif_cache.pop(key)  # the most recently used last
    else:
        config = ReplayConfig(history="sequential")
        found = [
            {"strategy": name, **replay(runs, name, config, deployed=sizing).metrics()}
            for name in quick_predictor_names()
        ]
        if len(_whatif_cache) >= WHATIF_CACHED:
            del _whatif_cache[next(iter(_whatif_cache))]  # the least recently used
        _whatif_cache[key] = tuple(sorted(found, key=lambda r: (r["failed"], r["waste_gb_h"])))
    return _whatif_cache[key]


def whatif(
    store: HistoryStore, settings: AdaptiveSettings, dags: Dags, task_family: str
) -> dict[str, Any] | None:
    """Every registered strategy replayed on this family's own completed attempts (cached per history)."""
    history = store.history(task_family, limit=WHATIF_TASKS * 2, dag_ids=dags)
    if not history:
        return None
    runs = tuple(
        TaskRun(
            task_family,
            o.usage.peak_memory_bytes,
            o.usage.wall_seconds or 1.0,
            o.input_size_bytes,
            o.asked_bytes,
        )
        for o in history
        if o.usage.peak_memory_bytes and o.usage.peak_kind is PeakKind.MEASURED
    )[-WHATIF_TASKS:]
    sizing = settings.sizing
    with _whatif_lock:  # one replay at a time: it is CPU-bound and cached
        results = _replayed(runs, sizing) if runs else ()
    return {
        "task_family": task_family,
        "configured": sizing.strategy,  # the strategy enforcing would apply
        "tasks": len(runs),
        "max_oom_rate": sizing.max_oom_rate,
        "min_observations": sizing.min_observations,  # above 1: the request for the first tasks
        "strategies": list(results),
        # seconds per decision: replayed by `airflow-adaptive replay --strategy NAME`, not on a page view
        "left_out": sorted(set(predictor_names()) - set(quick_predictor_names())),
    }


def nodes(
    store: HistoryStore, settings: AdaptiveSettings, dags: Dags, top_families: int = 100
) -> dict[str, Any]:
    stored = store.nodes()
    cached: dict[str, list[dict[str, Any]]] = {}
    for copy in store.cached_inputs(dags):  # only copies of inputs a readable DAG read
        entry = {"uri": copy.uri, "size_bytes": copy.size_bytes, "last_used_at": copy.last_used_at}
        cached.setdefault(copy.node, []).append(entry)
    groups = summarize_groups(stored)
    labelled: dict[int, list[str]] = {g.id: [] for g in groups}
    runtimes: list[dict[str, Any]] = []
    if groups and dags is None:  # labels rank against every DAG's families: only for who may read them all
        advisor = Advisor(settings, lambda: store, refit_stale=False)
        busiest, _ = store.family_totals(TotalsQuery(), limit=top_families)
        for row in busiest:
            placement = advisor.placement.place(row.task_family, frozenset(), None, with_runtimes=True)
            if placement.preferred_groups:
                labelled[placement.preferred_groups[0]].append(row.task_family)
            if placement.runtime_by_group_s and len(runtimes) < RUNTIME_FAMILIES:
                by_group = {str(g): s for g, s in sorted(placement.runtime_by_group_s.items())}
                runtimes.append({"task_family": row.task_family, "seconds_by_group": by_group})
    return {
        "groups": [{**_group_json(g), "families": labelled[g.id]} for g in groups],
        "placement_policy": settings.placement_policy,
        "runtimes": runtimes,  # the busiest families' expected runtime per group
        "nodes": [
            {
                "node": n.name,
                "group": n.group_id,
                "benchmarks": dict(n.profile.benchmarks),
                "ranks": dict(n.group_ranks),
                "cores": n.profile.cores,
                "memory_bytes": n.profile.memory_bytes,
                "capabilities": sorted(n.profile.capabilities),
                "profiled_at": n.profiled_at,
            }
            for n in stored
        ],
        # Staged inputs by node (also on nodes not profiled yet): what the staging reports said.
        "cached_inputs": [{"node": name, "inputs": cached[name]} for name in sorted(cached)],
    }


def _group_json(group: Any) -> dict[str, Any]:
    data = asdict(group)
    data["capabilities"] = sorted(group.capabilities)
    return data
