"""The pending queue and the order it is served in (Witt et al.'s heuristics, ALGORITHMS.md §5).

Like kube-scheduler's, the queue holds one sub-queue per (family, cores, capabilities): when the
head of a sub-queue fits nowhere, the rest of it (pods of similar size) waits for the next cycle
and other families go on. The orders:

- ``fifo``: the task's priority weight, then arrival; a retried task arrives anew (Witt's "time of
  arrival"), as a re-created pod does. SJFN placement puts the family's known runtime second.
- ``lff-persevere`` / ``lff-postpone``: least-finished-first, the family with the fewest
  successful attempts so far first (read at every scheduling cycle), then the task's failed
  attempts, more first (persevere) or fewer first (postpone), then arrival.
- ``critical-path``: the longest path to the DAG's end, counted in tasks (Witt's topology rank; no
  runtimes, as Airflow knows none), then arrival: an Airflow-like static upstream-weight baseline.
- ``lff-classes``: what the provider's PriorityClasses give kube-scheduler: the family's class
  (thirds of the families by successful attempts) fixed when the pod is created, then arrival.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence

from airflow_adaptive.core.lff import FamilyProgress, lff_key
from airflow_adaptive.exceptions import InvalidSettingError

from .workload import SimTask, Workload

QUEUE_ORDERS = ("fifo", "lff-persevere", "lff-postpone", "critical-path", "lff-classes")
Shape = tuple[str, float, frozenset[str]]
Entry = tuple[float, ...]  # ends with the attempt id
Head = tuple[Entry, Shape]


def path_to_end(workload: Workload) -> list[int]:
    """Per task, the number of tasks on the longest path from it to a task without children."""
    index = {t.id: i for i, t in enumerate(workload.tasks)}
    longest = [1] * len(workload.tasks)
    for i in reversed(workload.order):  # children come after their parents in the order
        for parent in workload.tasks[i].parents:
            p = index[parent]
            longest[p] = max(longest[p], longest[i] + 1)
    return longest


class PendingQueue:
    """Pending attempts, served in one of ``QUEUE_ORDERS``."""

    def __init__(
        self,
        order: str,
        workload: Workload,
        successes: Callable[[str], int],
        class_tier: Callable[[str], int] = lambda family: 0,
    ) -> None:
        if order not in QUEUE_ORDERS:
            raise InvalidSettingError(f"unknown queue order {order!r}; known: {', '.join(QUEUE_ORDERS)}")
        self.order = order
        self.tasks: Sequence[SimTask] = workload.tasks
        self.successes = successes
        self.class_tier = class_tier
        self.mode = order.removeprefix("lff-")
        self.rank = path_to_end(workload) if order == "critical-path" else None
        self.queues: dict[Shape, list[Entry]] = {}

    def push(self, aid: int, task_index: int, failed_attempts: int, runtime_key: float) -> None:
        task = self.tasks[task_index]
        shape = (task.family, task.request_cores, task.required_capabilities)
        entry: Entry
        if self.order == "fifo":
            entry = (-task.priority, runtime_key, aid)
        elif self.rank is not None:
            entry = (-self.rank[task_index], aid)
        elif self.order == "lff-classes":
            entry = (self.class_tier(task.family), aid)
        else:  # least-finished-first: the family part of the key is added per cycle (heads)
            entry = (lff_key(FamilyProgress(0, failed_attempts), self.mode)[1], aid)
        heapq.heappush(self.queues.setdefault(shape, []), entry)

    def head(self, shape: Shape) -> Head | None:
        queue = self.queues.get(shape)
        if not queue:
            return None
        if self.order.startswith("lff-"):
            return (self.successes(shape[0]), *queue[0]), shape
        return queue[0], shape

    def heads(self) -> list[Head]:
        """Every sub-queue's head, as a heap: the next attempt to try is ``heads[0]``."""
        found = [h for h in (self.head(shape) for shape in self.queues) if h is not None]
        heapq.heapify(found)
        return found

    def pop(self, shape: Shape) -> None:
        heapq.heappop(self.queues[shape])
