"""Pure policy: value types and decisions. Imports nothing from airflow, kubernetes or sqlalchemy."""
