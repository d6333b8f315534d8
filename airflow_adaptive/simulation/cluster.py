"""Simulated nodes: allocatable cores and memory, benchmark scores, capabilities, arrival time.

A node's speed for a task feature is its score on that feature's benchmarks
relative to the reference node (an N1 of the Tarema paper's Table IV), so a
trace runtime is read as "seconds on an N1". The presets are the paper's two
15-node clusters (Tables II-IV); node scores spread evenly over each published
range. User clusters come from a YAML or JSON file of node profiles.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache, cached_property
from typing import Any

import yaml

from airflow_adaptive.core.grouping import TASK_FEATURE_BENCHMARKS, Grouping, NodeProfile, group_nodes
from airflow_adaptive.core.units import GIB
from airflow_adaptive.exceptions import InvalidQuantityError, SimulationInputError
from airflow_adaptive.failopen import first_line
from airflow_adaptive.kubernetes.quantity import parse_memory_bytes

# The N1 group of Table IV (5;5;5): the node whose speed is 1 on every feature.
REFERENCE_BENCHMARKS = {
    "cpu_events_per_s": 375.5,
    "memory_mib_per_s": 14050.0,
    "io_rand_write_iops": 107.5,
    "io_rand_read_iops": 102.0,
    "io_seq_write_iops": 483.0,
    "io_seq_read_iops": 481.0,
    "io_score": 483.0,  # fio score of the Lotaru n1 machine (an N1 node)
}
# Published scores of the Lotaru machines (shared/data/README.md): CPU events/s, memory MiB/s (not
# measured on asok), fio I/O score. "local" has none. A node without an explicit machine takes the
# runtimes of the machine with the nearest CPU score.
LOTARU_SCORES: dict[str, tuple[float, float | None, float]] = {
    "asok01": (223, None, 303),
    "asok02": (223, None, 339),
    "n1": (369, 13400, 483),
    "n2": (467, 17000, 483),
    "c2": (523, 18900, 483),
    "wallyRedCpu": (437, 18600, 415),
}
LOTARU_CPU_EVENTS_PER_S = {m: cpu for m, (cpu, _, _) in LOTARU_SCORES.items()}


@dataclass(frozen=True)
class SimNode:
    name: str
    cores: float
    memory_bytes: int
    benchmarks: Mapping[str, float]
    capabilities: frozenset[str] = frozenset()
    available_at_s: float = 0.0  # when the node joins (an autoscaler adding it later)
    machine: str | None = None  # whose Lotaru runtimes it has
    speed: Mapping[str, float] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        speeds = {}
        for feature, names in TASK_FEATURE_BENCHMARKS.items():
            known = [
                self.benchmarks[b] / REFERENCE_BENCHMARKS[b]
                for b in names
                if b in self.benchmarks and b in REFERENCE_BENCHMARKS
            ]
            speeds[feature] = sum(known) / len(known) if known else 1.0
        object.__setattr__(self, "speed", speeds)

    def profile(self) -> NodeProfile:
        return NodeProfile(
            self.name, dict(self.benchmarks), int(self.cores), self.memory_bytes, self.capabilities
        )

    def lotaru_machine(self) -> str:
        if self.machine:
            return self.machine
        cpu = self.benchmarks.get("cpu_events_per_s", REFERENCE_BENCHMARKS["cpu_events_per_s"])
        return min(LOTARU_CPU_EVENTS_PER_S, key=lambda m: (abs(LOTARU_CPU_EVENTS_PER_S[m] - cpu), m))


@dataclass(frozen=True)
class Cluster:
    name: str
    nodes: tuple[SimNode, ...]

    def __post_init__(self) -> None:
        if not self.nodes:
            raise SimulationInputError(f"cluster {self.name!r} has no nodes")
        names = [n.name for n in self.nodes]
        if len(set(names)) != len(names):
            raise SimulationInputError(f"cluster {self.name!r}: node names must be unique")

    @property
    def largest_memory_bytes(self) -> int:
        return max(n.memory_bytes for n in self.nodes)

    @cached_property
    def grouping(self) -> Grouping:
        """Node groups from the benchmark scores (k-means++ is costly: once per cluster)."""
        return group_nodes([n.profile() for n in self.nodes])


def _spread(lo: float, hi: float, count: int) -> list[float]:
    return [lo + (hi - lo) * i / (count - 1) if count > 1 else (lo + hi) / 2 for i in range(count)]


# (machine type, nodes, cores, memory GiB); then Table IV's ranges of the group they fall in:
# (nodes, cpu events/s, memory MiB/s). I/O is the same on every node (same disk type).
_IO = {
    "io_rand_write_iops": 107.5,
    "io_rand_read_iops": 102.0,
    "io_seq_write_iops": 483.0,
    "io_seq_read_iops": 481.0,
}
_PRESETS: dict[
    str, tuple[list[tuple[str, int, int, int]], list[tuple[int, tuple[float, float], tuple[float, float]]]]
] = {
    "5,5,5": (
        [("n1", 5, 8, 32), ("n2", 5, 8, 32), ("c2", 5, 8, 32)],
        [(5, (367, 384), (13800, 14300)), (5, (458, 468), (17500, 17700)), (5, (523, 525), (19800, 19900))],
    ),
    "5,4,4,2": (
        [("e2", 5, 6, 16), ("n1", 4, 6, 16), ("n2", 4, 8, 32), ("c2", 2, 16, 64)],
        [(9, (368, 384), (13100, 14200)), (4, (469, 470), (17700, 17800)), (2, (522, 524), (19800, 19800))],
    ),
}
PRESETS = (*_PRESETS, "lotaru")
LOTARU_NODES_PER_MACHINE = 2
LOTARU_NODE = (8, 32)  # cores, GiB: the data does not give machine sizes; equal sizes isolate speed


@cache
def preset(name: str) -> Cluster:
    """The Tarema paper's 5;5;5 or 5;4;4;2 cluster (``5,5,5`` / ``5;5;5``), or ``lotaru``: two nodes
    of each Lotaru machine with published scores, which run Lotaru tasks in their measured time."""
    key = name.replace(";", ",")
    if key == "lotaru":
        cores, memory_gib = LOTARU_NODE
        nodes = []
        for machine, (cpu_score, memory_score, io_score) in LOTARU_SCORES.items():
            bench = {"cpu_events_per_s": cpu_score, "io_score": io_score} | (
                {"memory_mib_per_s": memory_score} if memory_score else {}
            )
            for i in range(1, LOTARU_NODES_PER_MACHINE + 1):
                nodes.append(SimNode(f"{machine}-{i}", cores, memory_gib * GIB, bench, machine=machine))
        return Cluster(key, tuple(nodes))
    if key not in _PRESETS:
        raise SimulationInputError(f"unknown cluster preset {name!r}; known: {', '.join(PRESETS)}")
    types, groups = _PRESETS[key]
    scores: list[tuple[float, float]] = []
    for count, cpu, memory in groups:
        scores += list(zip(_spread(*cpu, count), _spread(*memory, count), strict=True))
    nodes = []
    for kind, count, cores, memory_gib in types:
        for i in range(1, count + 1):
            cpu_score, memory_score = scores.pop(0)
            bench = {"cpu_events_per_s": cpu_score, "memory_mib_per_s": memory_score, **_IO}
            nodes.append(SimNode(f"{kind}-{i}", cores, memory_gib * GIB, bench))
    return Cluster(key.replace(",", ";"), tuple(nodes))


def _reason(err: BaseException) -> str:
    """One line: YAML's own message spans several, with the offending line drawn under it."""
    mark = getattr(err, "problem_mark", None)
    if isinstance(err, yaml.MarkedYAMLError) and err.problem and mark is not None:
        return f"{err.problem}, line {mark.line + 1}"
    return first_line(err)


def load_cluster(spec: str) -> Cluster:
    """A preset name, or a YAML/JSON file: ``{nodes: [{name, count?, cores, memory, benchmarks, ...}]}``."""
    if spec.replace(";", ",") in PRESETS:
        return preset(spec)
    try:
        with open(spec, encoding="utf-8") as handle:
            text = handle.read()
        data = json.loads(text) if spec.endswith(".json") else yaml.safe_load(text)
    except (OSError, ValueError, yaml.YAMLError) as err:
        raise SimulationInputError(
            f"cluster {spec!r}: not a preset ({' | '.join(PRESETS)}) nor a readable YAML/JSON file "
            f"({_reason(err)})"
        ) from None
    profiles = isinstance(data, list) or (isinstance(data, dict) and ("node" in data or "profiles" in data))
    if profiles and spec.endswith(".json"):  # as profile-node --json writes them
        return _profiled(data, spec)
    entries = data.get("nodes") if isinstance(data, dict) else None
    if not isinstance(entries, list) or not entries:
        raise SimulationInputError(
            f"{spec}: expected a mapping with a non-empty list 'nodes', or node profiles (profile-node --json)"
        )
    nodes: list[SimNode] = []
    for pos, entry in enumerate(entries):
        nodes += _nodes(entry, f"{spec}: nodes[{pos}]")
    return Cluster(os.path.basename(spec), tuple(nodes))


def _profiled(data: Any, spec: str) -> Cluster:
    """The nodes ``profile-node --json`` measured (one profile, a list, or ``{profiles: [...]}``)."""
    from airflow_adaptive.nodebench.files import ProfileFormatError, profiles_in

    try:
        profiles = profiles_in(data, spec)
    except ProfileFormatError as err:
        raise SimulationInputError(str(err)) from None
    unsized = [p.node for p in profiles if not (p.cores and p.memory_bytes)]
    if unsized:
        raise SimulationInputError(f"{spec}: profiles without cores and memory_bytes: {', '.join(unsized)}")
    if any(v <= 0 for p in profiles for v in p.benchmarks.values()):
        raise SimulationInputError(f"{spec}: benchmarks must be positive")
    nodes = [
        SimNode(p.node, float(p.cores or 0), p.memory_bytes or 0, p.benchmarks, p.capabilities)
        for p in profiles
    ]
    return Cluster(os.path.basename(spec), tuple(nodes))


MAX_COUNT = 5000  # nodes of one entry: Kubernetes supports clusters of up to 5,000 nodes


def _nodes(entry: Any, where: str) -> Sequence[SimNode]:
    if not isinstance(entry, dict) or not entry.get("name"):
        raise SimulationInputError(f"{where}: a node needs a name")
    try:
        count = int(entry.get("count", 1))
        cores = float(entry["cores"])
        memory = parse_memory_bytes(entry["memory"], what=f"{where}.memory")
        bench = {str(k): float(v) for k, v in (entry.get("benchmarks") or {}).items()}
        caps = frozenset(str(c) for c in entry.get("capabilities") or ())
        at = float(entry.get("available_at_s", 0.0))
    except KeyError as err:
        raise SimulationInputError(f"{where}: missing {err.args[0]!r}") from None
    except (TypeError, ValueError, AttributeError, OverflowError, InvalidQuantityError) as err:
        raise SimulationInputError(f"{where}: {str(err)[:200]}") from None  # Overflow: int(.inf), 400 digits
    if (
        not all(math.isfinite(v) for v in (cores, at, *bench.values()))
        or cores <= 0
        or at < 0
        or any(v <= 0 for v in bench.values())
    ):
        raise SimulationInputError(
            f"{where}: cores and benchmarks must be positive numbers, available_at_s >= 0 (not inf or nan)"
        )
    if not 1 <= count <= MAX_COUNT:
        raise SimulationInputError(
            f"{where}: count must be 1 to {MAX_COUNT:,} (Kubernetes' largest clusters)"
        )
    name = str(entry["name"])
    names = [name] if count == 1 else [f"{name}-{i}" for i in range(1, count + 1)]
    machine = entry.get("machine")
    return [SimNode(n, cores, memory, bench, caps, at, str(machine) if machine else None) for n in names]
