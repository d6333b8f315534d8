"""The replay's named choices, apart from the replay itself: the command line lists them in its
help without importing SciPy and pandas (``airflow-adaptive --help`` stays quick)."""

from __future__ import annotations

HISTORY_MODES = ("completed", "sequential")
BUDGETS = (0.005, 0.01, 0.02, 0.05, 0.10, 0.2, 1.0)  # OOM kills per task: the default strategy's sweep
