"""Clusters from files: the YAML/JSON node list, and the profiles profile-node --json wrote."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from airflow_adaptive.core.units import GIB
from airflow_adaptive.exceptions import SimulationInputError
from airflow_adaptive.simulation.cluster import load_cluster


def test_cluster_file_and_its_errors(tmp_path: Path) -> None:
    good = tmp_path / "c.yaml"
    good.write_text(
        "nodes:\n  - {name: big, count: 2, cores: 16, memory: 64Gi, capabilities: [gpu], available_at_s: 60}\n"
    )
    cluster = load_cluster(str(good))
    assert [n.name for n in cluster.nodes] == ["big-1", "big-2"]
    assert cluster.nodes[0].memory_bytes == 64 * GIB and cluster.nodes[0].capabilities == {"gpu"}
    for text, message in (
        ("nodes: []", "non-empty list 'nodes'"),
        ("nodes:\n  - {name: a, memory: 1Gi}", "missing 'cores'"),
        ("nodes:\n  - {name: a, cores: 2, memory: lots}", "not a Kubernetes quantity"),
        ("nodes:\n  - {name: a, cores: -1, memory: 1Gi}", "must be positive"),
        ("nodes:\n  - {name: a, cores: .nan, memory: 1Gi}", "not inf or nan"),  # YAML's own NaN
        ("nodes:\n  - {name: a, cores: .inf, memory: 1Gi}", "not inf or nan"),
        ("nodes:\n  - {name: a, cores: 2, memory: 1Gi, benchmarks: {cpu: .nan}}", "not inf or nan"),
        ("nodes:\n  - {name: a, count: 100000000, cores: 2, memory: 1Gi}", "count must be 1 to 5,000"),
        ("nodes:\n  - {name: a, count: .inf, cores: 2, memory: 1Gi}", "infinity"),  # int(inf) overflows
        ("nodes:\n  - {name: a, cores: 1" + "0" * 400 + ", memory: 1Gi}", "too large"),
    ):
        bad = tmp_path / "bad.yaml"
        bad.write_text(text)
        with pytest.raises(SimulationInputError, match=message):
            load_cluster(str(bad))
    with pytest.raises(SimulationInputError, match="not a preset"):
        load_cluster(str(tmp_path / "missing.yaml"))


def test_a_cluster_of_profiled_nodes(tmp_path: Path) -> None:
    """What profile-node --json wrote (one profile, or a list of them) is a cluster too."""
    fast = {"node": "fast", "cores": 16, "memory_bytes": 64 * GIB, "benchmarks": {"cpu_events_per_s": 3000.0},
            "capabilities": ["gpu"]}  # fmt: skip
    slow = {"node": "slow", "cores": 8, "memory_bytes": 32 * GIB, "benchmarks": {"cpu_events_per_s": 1000.0}}
    (tmp_path / "both.json").write_text(json.dumps([fast, slow]))
    cluster = load_cluster(str(tmp_path / "both.json"))
    assert [(n.name, n.cores, n.memory_bytes) for n in cluster.nodes] == [
        ("fast", 16, 64 * GIB),
        ("slow", 8, 32 * GIB),
    ]
    assert cluster.nodes[0].capabilities == {"gpu"} and cluster.nodes[1].benchmarks == slow["benchmarks"]
    (tmp_path / "one.json").write_text(json.dumps(fast))
    assert [n.name for n in load_cluster(str(tmp_path / "one.json")).nodes] == ["fast"]
    (tmp_path / "unsized.json").write_text(json.dumps({"node": "x", "benchmarks": {"cpu_events_per_s": 1.0}}))
    with pytest.raises(SimulationInputError, match="profiles without cores and memory_bytes: x"):
        load_cluster(str(tmp_path / "unsized.json"))
