"""The PNG reports: what a picture's axes claim (read from the figure before it is written)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from airflow_adaptive import plots


def test_replay_waste_bars_start_at_zero_on_a_linear_axis(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bar's length is its waste: on a log axis starting near the smallest bar, 230 against 260
    GB·h looked like several times the waste."""
    figures: dict[str, Any] = {}
    real_save = plots.save

    def keep(fig: Any, path: Path, dpi: int = 110) -> Path:
        figures[path.name] = fig.axes[0]
        return real_save(fig, path, dpi)

    monkeypatch.setattr(plots, "save", keep)
    strategies = {name: {"waste_gb_h": waste, "retries_per_100": 1.0}
                  for name, waste in (("adaptive", 231.0), ("pc95", 262.0), ("user", 980.0))}  # fmt: skip
    report = {"default_strategy": "adaptive",
              "traces": [{"trace": str(tmp_path / "t.csv"), "instances": 10, "history": "completed",
                          "strategies": strategies}]}  # fmt: skip
    (written,) = plots.write_replay_plots(report, tmp_path / "plots")
    axes = figures[written.name]
    assert written.exists() and axes.get_xscale() == "linear"
    assert axes.get_xlim()[0] == 0 and axes.get_xlim()[1] >= 980.0
    widths = sorted(bar.get_width() for bar in axes.patches)
    assert widths == [231.0, 262.0, 980.0] and all(bar.get_x() == 0 for bar in axes.patches)
    assert "log" not in axes.get_xlabel()
