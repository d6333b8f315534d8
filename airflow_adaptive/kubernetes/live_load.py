"""How loaded each node group is (idle nodes, requested CPU share, each node's cores requested and
expected busy), read from the cluster at most once per ``ttl_seconds`` on a machine: the task
processes of a worker share one view through a small JSON file, so a burst of pods costs two list
calls, not two per pod, and a view is at most ``ttl_seconds`` old."""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import astuple
from typing import Any

from airflow_adaptive.core.placement import GroupLoad, NodeLoad
from airflow_adaptive.kubernetes.nodes import group_loads


def live_load_path(state_dir: str) -> str:
    """Where the shared view lives: a folder of its own (the spool reads every ``*.json`` of its own)."""
    return os.path.join(state_dir, "cache", "live-load.json")


def shared_group_loads(
    core_v1: Callable[[], Any], path: str, ttl_seconds: float, now: Callable[[], float] = time.time
) -> dict[int, GroupLoad]:
    """Load per group: the shared view when it is fresh, else listed now and shared."""
    seen = _fresh(path, ttl_seconds, now())
    if seen is not None:
        return seen
    loads = group_loads(core_v1())
    if ttl_seconds > 0:
        _share(path, loads, now())
    return loads


def _fresh(path: str, ttl_seconds: float, at: float) -> dict[int, GroupLoad] | None:
    try:
        with open(path, encoding="utf-8") as handle:
            view = json.load(handle)
        age = at - float(view["listed_at"])
        if not 0 <= age < ttl_seconds:  # stale, or written by a clock ahead of ours
            return None
        return {
            int(group): GroupLoad(
                int(idle), float(reserved), tuple(NodeLoad(*map(float, node)) for node in nodes)
            )
            for group, (idle, reserved, nodes) in view["groups"].items()
        }
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None  # none yet, unreadable or an older format: list the cluster


def _share(path: str, loads: dict[int, GroupLoad], at: float) -> None:
    """Write the view whole (a temporary file renamed over the old one: readers never see half)."""
    folder = os.path.dirname(path)
    try:
        os.makedirs(folder, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=folder, suffix=".tmp")
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            groups = {
                str(g): [load.idle_nodes, load.reserved_fraction, [astuple(n) for n in load.nodes]]
                for g, load in loads.items()
            }
            json.dump({"listed_at": at, "groups": groups}, out)
        os.replace(temporary, path)
    except OSError:
        pass  # a read-only or full disk: every pod lists the cluster itself, as without sharing
