"""The history store: the provider's own tables in the Airflow metadata database."""
