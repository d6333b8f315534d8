"""Airflow's entry points end to end: operator, policy, priority, UI, commands, packaging, bad input."""
