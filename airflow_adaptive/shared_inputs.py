"""Declared inputs of an operator's pod: sizes, the staging plan, node preferences and what the
pod reported back. Every step fails open: the pod runs without staging and the reason is logged once."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from kubernetes.client import models as k8s

from airflow_adaptive.advisor import Advisor
from airflow_adaptive.config import StagingSettings
from airflow_adaptive.core.locality import (
    DeclaredInput,
    local_bytes_by_node,
    plan_staging,
    preferred_nodes,
    uses_after,
)
from airflow_adaptive.core.telemetry import parse_stage_report
from airflow_adaptive.core.units import format_bytes
from airflow_adaptive.failopen import warn_once
from airflow_adaptive.kubernetes.apply import prefer
from airflow_adaptive.kubernetes.observe import terminated_state
from airflow_adaptive.kubernetes.staging import HOSTNAME_LABEL, STAGE_CONTAINER, apply_staging, declared_in

_stat_pool = concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="adaptive-stat")


def declared_inputs(inlets: Iterable[Any], shared_inputs: Iterable[Any]) -> list[DeclaredInput]:
    """Inputs from Airflow inlets (Assets: URI, ``extra`` size_bytes/etag) and ``shared_inputs``
    (URIs or Assets the user says other tasks read too), once per URI."""
    found: dict[str, DeclaredInput] = {}
    for items, shared in ((inlets, False), (shared_inputs, True)):
        for item in items or ():
            uri = item if isinstance(item, str) else getattr(item, "uri", None)
            if not isinstance(uri, str) or not uri:
                continue  # not an asset (e.g. an upstream task reference): nothing to stage
            extra = getattr(item, "extra", None) or {}
            size = extra.get("size_bytes")
            known = isinstance(size, int) and not isinstance(size, bool) and size >= 0
            item_in = DeclaredInput(uri, size if known else None, str(extra.get("etag", "")))
            before = found.get(uri)
            found[uri] = replace(before or item_in, shared=shared or bool(before and before.shared))
    return list(found.values())


def _stat_size(uri: str) -> int:
    from airflow.sdk import ObjectStoragePath

    return int(ObjectStoragePath(uri).stat()["size"])


def with_sizes(
    declared: Sequence[DeclaredInput], recorded: dict[str, int], timeout_s: float
) -> list[DeclaredInput]:
    """Fill unknown sizes: recorded by earlier attempts, else a stat through ObjectStoragePath
    (bounded by ``timeout_s``); an input whose size cannot be found is not staged."""
    out = []
    for item in declared:
        if item.size_bytes is None and item.uri in recorded:
            item = replace(item, size_bytes=recorded[item.uri])
        elif item.size_bytes is None:
            try:
                size = _stat_pool.submit(_stat_size, item.uri).result(timeout=timeout_s)
                item = replace(item, size_bytes=size)
            except Exception as err:  # unknown scheme, unreachable store, no such object, timeout
                warn_once(
                    f"size of input {item.uri!r} unknown ({type(err).__name__}: {str(err)[:120]}); not staged"
                )
        out.append(item)
    return out


def stage_inputs(pod: k8s.V1Pod, container_name: str | None, declared: Sequence[DeclaredInput],
                 advisor: Advisor, task_family: str) -> str:  # fmt: skip
    """Stage what the plan says, prefer the nodes that hold it; returns the explanation. Without the
    store nothing is known of earlier reads and holders: declared shared inputs are still staged."""
    settings: StagingSettings = advisor.settings.staging
    if not declared:
        return ""
    if not settings.cache_root:
        apply_staging(
            pod, container_name, declared, plan_staging([], {}), cache_root="", budget_bytes=0, image=""
        )
        return "inputs: staging is off ([adaptive] cache_root is empty)"
    state = advisor.inputs.input_state([i.uri for i in declared], [])
    sized = with_sizes(declared, dict(state.sizes), advisor.settings.store_timeout_seconds)
    plan = plan_staging(
        sized, state.reads, small_below=settings.small_below_bytes, big_from=settings.big_from_bytes
    )
    apply_staging(pod, container_name, sized, plan, cache_root=settings.cache_root,
                  budget_bytes=settings.budget_bytes, image=settings.image)  # fmt: skip
    if not plan.staged:
        return f"inputs: {plan.explain()}"
    holders = advisor.inputs.input_state([], [i.key for i in plan.staged]).holders
    local = local_bytes_by_node([(i.key, i.size_bytes or 0) for i in plan.staged], holders)
    weighted = preferred_nodes(
        local, settings.shared_read_bytes_per_s, advisor.placement.mean_runtime_s(task_family)
    )
    prefer(pod, HOSTNAME_LABEL, weighted)
    where = ", ".join(f"{node} holds {format_bytes(local[node])} (weight {w})" for node, w in weighted)
    return f"inputs: {plan.explain()}; " + (where or "no node holds them yet")


def record_inputs(
    advisor: Advisor, remote_pod: k8s.V1Pod, container_name: str | None, dag_id: str | None = None
) -> None:
    """What the pod's staging report says into the store: reads (by ``dag_id``), sizes, copies held
    and evicted."""
    listed = declared_in(remote_pod)
    if not listed:
        return
    main = terminated_state(remote_pod, container_name)
    stager = terminated_state(remote_pod, STAGE_CONTAINER, init=True)
    report = parse_stage_report(*(state.message for state in (main, stager) if state))
    staged = [item for item, was_staged in listed if was_staged]
    uses = uses_after(staged, [item for item, _ in listed], report)
    node = remote_pod.spec.node_name if remote_pod.spec else None
    advisor.inputs.record_inputs(node, uses, report.evicted if report else (), dag_id)
