"""Example DAGs shipped with the provider (also exposed through the top-level ``dags/`` folder)."""
