"""Shared storage and node-local input caches for the simulator (ALGORITHMS.md §6).

Every declared input lives on shared storage. A read from it gets an equal share of the aggregate
bandwidth among the shared reads in progress when it starts (fixed for that read, like the other
slowdowns). Blind policies read every input from shared storage. Locality policies stage medium and
big inputs that more than one task of the workload reads (the paper merges every run into one
meta-workflow, so it knows the readers): the first reader on a node copies the input (a shared read)
into the node's RAM disk when it fits, else its local disk, evicting least recently used entries;
later readers there read it locally. Small inputs always stay on shared storage.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Sequence
from typing import NamedTuple, TypeVar

from airflow_adaptive.core.locality import SizeClass, local_bytes_by_node, locality_weight, size_class
from airflow_adaptive.core.placement import group_weight

from .node_rules import NodeState
from .params import SimParams
from .workload import SimTask

N = TypeVar("N", bound=NodeState)


class InputRead(NamedTuple):
    seconds: float  # reading every input, locally or from shared storage
    shared_seconds: float  # of those, reading from shared storage
    ram_bytes: int  # node memory the RAM disk took (negative: freed by evictions)


class _Tier:
    """One node-local store: capacity, read bandwidth, entries in least-recently-used order."""

    def __init__(self, capacity_bytes: int, read_bytes_per_s: float) -> None:
        self.capacity_bytes = capacity_bytes
        self.read_bytes_per_s = read_bytes_per_s
        self.entries: OrderedDict[str, int] = OrderedDict()
        self.used_bytes = 0

    def hit(self, name: str) -> bool:
        if name in self.entries:
            self.entries.move_to_end(name)
            return True
        return False

    def put(self, name: str, size_bytes: int, keep: frozenset[str] = frozenset()) -> bool:
        """Store ``name``, evicting least recently used entries but never those in ``keep`` (what
        the reading task needs, as the staging program spares them); False when it cannot fit."""
        evictable = [entry for entry in self.entries if entry not in keep]
        spared_bytes = self.used_bytes - sum(self.entries[entry] for entry in evictable)
        if spared_bytes + size_bytes > self.capacity_bytes:
            return False
        for entry in evictable:
            if self.used_bytes + size_bytes <= self.capacity_bytes:
                break
            self.used_bytes -= self.entries.pop(entry)
        self.entries[name] = size_bytes
        self.used_bytes += size_bytes
        return True


class SharedStorage:
    """Reads of declared inputs; ``locality`` turns staging on."""

    def __init__(self, tasks: Sequence[SimTask], node_names: Sequence[str], params: SimParams,
                 *, locality: bool) -> None:  # fmt: skip
        self.params = params
        self.locality = locality
        readers = Counter(name for t in tasks for name, _ in set(t.inputs))
        self.staged = {
            name
            for t in tasks
            for name, size in t.inputs
            if readers[name] > 1 and size_class(size) in (SizeClass.MEDIUM, SizeClass.BIG)
        }
        self.tiers: dict[str, list[_Tier]] = {
            node: [
                _Tier(params.ram_disk_bytes, params.ram_disk_read_bytes_per_s),
                _Tier(params.local_disk_bytes, params.local_disk_read_bytes_per_s),
            ]
            for node in node_names
        }
        self.shared_reads = 0  # in progress now
        self.shared_read_bytes = 0

    def read(self, task: SimTask, node: str, free_memory_bytes: int) -> InputRead:
        """How the task reads its inputs on ``node``, with ``free_memory_bytes`` left there for a RAM
        disk: a staged copy goes to it only while the node has that much memory free (tmpfs holds
        node memory for what it stores, so pods get less)."""
        local_s = shared_bytes = 0.0
        ram = self.tiers[node][0]
        ram_before = ram.used_bytes
        for name, size in task.inputs:
            tier = self._holder(node, name)
            if tier is not None:
                local_s += size / tier.read_bytes_per_s
                continue
            shared_bytes += size
            if self.locality and name in self.staged:
                keep = frozenset(own for own, _ in task.inputs)
                self._stage(node, name, size, free_memory_bytes - (ram.used_bytes - ram_before), keep)
        shared_s = shared_bytes / self.per_reader_bytes_per_s()
        self.shared_read_bytes += int(shared_bytes)
        if shared_bytes:
            self.shared_reads += 1  # until the engine calls done_reading
        return InputRead(local_s + shared_s, shared_s, ram.used_bytes - ram_before)

    def done_reading(self, _event: object = None) -> None:
        self.shared_reads -= 1

    def _holder(self, node: str, name: str) -> _Tier | None:
        if not self.locality:
            return None
        return next((tier for tier in self.tiers[node] if tier.hit(name)), None)

    def _stage(self, node: str, name: str, size: int, free_memory_bytes: int, keep: frozenset[str]) -> None:
        ram, disk = self.tiers[node]
        if size <= free_memory_bytes and ram.put(name, size, keep):
            return
        disk.put(name, size, keep)

    def local_bytes(self, task: SimTask) -> dict[str, int]:
        """Bytes of the task's staged inputs each node holds (what the store would report); none
        without locality."""
        if not self.locality:
            return {}
        holders: dict[str, list[str]] = {}
        for node, tiers in self.tiers.items():
            for tier in tiers:
                for name in tier.entries:
                    holders.setdefault(name, []).append(node)
        return local_bytes_by_node(((n, size) for n, size in task.inputs if n in self.staged), holders)

    def nearest(
        self, nodes: list[N], ranked: Sequence[int], local: dict[str, int], runtime_s: float | None
    ) -> list[N]:
        """The nodes with the highest score as kube-scheduler sums the preferred terms a node matches:
        its group's weight (100, 50, ... in ``ranked`` order) plus its ``locality_weight``."""
        weights = {gid: group_weight(i) for i, gid in enumerate(ranked)}
        per_reader = self.per_reader_bytes_per_s()
        scores = [
            weights.get(n.group, 0) + locality_weight(local.get(n.spec.name, 0), per_reader, runtime_s)
            for n in nodes
        ]
        best = max(scores)
        return [n for n, score in zip(nodes, scores, strict=True) if score == best]

    def per_reader_bytes_per_s(self) -> float:
        return self.params.shared_read_bytes_per_s / (self.shared_reads + 1)
