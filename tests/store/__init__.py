"""The history store behind its one interface, on SQLite and PostgreSQL."""
