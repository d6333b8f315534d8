"""Importers of task-resource traces into observations."""
