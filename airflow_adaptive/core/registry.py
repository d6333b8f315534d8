"""Named things of one kind (sizing strategies, retry policies, placement policies), each listed
once: configuration, the CLI and the UI read the names from here, and an unknown name is one typed
error that lists the known ones."""

from __future__ import annotations

import difflib
from typing import Generic, TypeVar

from ..exceptions import UnknownStrategyError

T = TypeVar("T")


class Registry(Generic[T]):
    """Items by name, in the order they were registered."""

    def __init__(self, kind: str) -> None:
        self.kind = kind  # e.g. "sizing strategy", for the error
        self._items: dict[str, T] = {}

    def register(self, name: str, item: T) -> T:
        if name in self._items:
            raise ValueError(f"{self.kind} {name!r} registered twice")
        self._items[name] = item
        return item

    def get(self, name: str) -> T:
        try:
            return self._items[name]
        except KeyError:
            close = difflib.get_close_matches(name, self._items, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise UnknownStrategyError(
                f"unknown {self.kind} {name!r}{hint}; known: {', '.join(sorted(self._items))}"
            ) from None

    def names(self) -> tuple[str, ...]:
        return tuple(self._items)
