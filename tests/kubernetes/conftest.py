"""The fake cluster the grow agent's tests run against (``growing.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fake_kubernetes import FakeKubernetesApi
from tests.kubernetes.growing import growing_api


@pytest.fixture
def api(tmp_path: Path) -> Iterator[FakeKubernetesApi]:
    with growing_api(tmp_path) as fake:
        yield fake
