"""The Python examples in the README and docs run as written (a user pastes them)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def examples() -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        for n, block in enumerate(BLOCK.findall(page.read_text())):
            found.append((f"{page.relative_to(ROOT)}#{n + 1}", block))
    return found


def test_the_pages_have_python_examples() -> None:
    assert any(name.startswith("README.md") for name, _ in examples())


@pytest.mark.parametrize(("name", "code"), examples(), ids=[name for name, _ in examples()])
def test_an_example_runs_as_written(name: str, code: str) -> None:
    exec(compile(code, name, "exec"), {"__name__": "readme_example"})
