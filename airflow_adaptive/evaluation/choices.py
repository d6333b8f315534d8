"""The replay's named choices, apart from the replay itself: the command line lists them in its
help without importing SciPy and pandas (``airflow-adaptive --help`` stays quick)."""

from __future__ import annotations

HISTORY_MODES = ("completed", "sequential")
# OOM kills per task: the default strategy's sweep, a 1-2-5 series from none allowed to no budget
BUDGETS = (0.0, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)
