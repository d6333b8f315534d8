"""The cluster simulator."""
