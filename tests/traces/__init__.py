"""Trace importers."""
