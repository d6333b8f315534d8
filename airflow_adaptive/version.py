"""The package version, for the provider info and the UI."""

__version__ = "0.1.0"
