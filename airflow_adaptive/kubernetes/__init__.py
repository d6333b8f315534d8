"""Adapters between Kubernetes client models and the core types."""
