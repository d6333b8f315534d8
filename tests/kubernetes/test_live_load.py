"""The idle-node view the pods of one machine share (placement_live_load): fresh, stale, unreadable."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from airflow_adaptive.kubernetes.live_load import live_load_path, shared_idle_nodes


class CountingCoreV1:
    """Stands in for the CoreV1Api calls idle_nodes_by_group makes: one node of group 1, idle."""

    def __init__(self) -> None:
        self.calls = 0

    def list_node(self, **_: Any) -> Any:
        from kubernetes.client import models as k8s

        self.calls += 1
        ready = k8s.V1NodeCondition(type="Ready", status="True")
        node = k8s.V1Node(
            metadata=k8s.V1ObjectMeta(name="n1", labels={"adaptive.airflow.io/group": "1"}),
            status=k8s.V1NodeStatus(conditions=[ready]),
        )
        return k8s.V1NodeList(items=[node])

    def list_pod_for_all_namespaces(self, **_: Any) -> Any:
        from kubernetes.client import models as k8s

        self.calls += 1
        return k8s.V1PodList(items=[])


def test_a_view_is_shared_until_it_is_older_than_the_ttl(tmp_path: Path) -> None:
    api, path, clock = CountingCoreV1(), live_load_path(str(tmp_path)), [1000.0]
    for _ in range(3):
        assert shared_idle_nodes(lambda: api, path, 10.0, lambda: clock[0]) == {1: 1}
    assert api.calls == 2  # listed once, then read from the shared file
    clock[0] += 9.9
    shared_idle_nodes(lambda: api, path, 10.0, lambda: clock[0])
    assert api.calls == 2
    clock[0] += 0.2  # 10.1 s old: listed again
    shared_idle_nodes(lambda: api, path, 10.0, lambda: clock[0])
    assert api.calls == 4
    assert Path(path).parent.name == "cache"  # beside the spool, never read by it


def test_a_broken_or_future_view_is_listed_again(tmp_path: Path) -> None:
    api, path = CountingCoreV1(), live_load_path(str(tmp_path))
    Path(path).parent.mkdir(parents=True)
    for broken in ("{", json.dumps({"listed_at": 2000.0, "idle": {"1": 0}}), json.dumps({"idle": []})):
        Path(path).write_text(broken)
        assert shared_idle_nodes(lambda: api, path, 10.0, lambda: 1000.0) == {1: 1}
        Path(path).write_text(broken)
    assert api.calls == 6
    blocked = tmp_path / "file"
    blocked.write_text("")  # the cache folder cannot be made: still an answer, just not shared
    assert shared_idle_nodes(lambda: api, live_load_path(str(blocked)), 10.0) == {1: 1}
