"""One typed exception hierarchy for the provider (no Airflow imports here)."""

from __future__ import annotations


class AdaptiveError(Exception):
    """Base class of every error raised by airflow-adaptive."""


class InvalidQuantityError(AdaptiveError, ValueError):
    """A Kubernetes resource quantity could not be parsed or is not positive."""


class HistoryUnavailableError(AdaptiveError):
    """The history store could not be reached; callers fail open."""


class HistoryRejectedError(AdaptiveError):
    """The history store refused this input for good (too long, out of range); retrying cannot help."""


class TraceFormatError(AdaptiveError, ValueError):
    """A trace file has no usable rows or is of an unknown format."""


class UnknownStrategyError(AdaptiveError, KeyError):
    """No predictor or retry policy is registered under the given name."""

    def __str__(self) -> str:
        # KeyError's str() is the repr of its key, which wrapped this message in quotes.
        return Exception.__str__(self)


class InvalidCapabilityError(AdaptiveError, ValueError):
    """A required capability name cannot be a Kubernetes label name."""


class SimulationInputError(AdaptiveError, ValueError):
    """A simulator cluster file or workload spec is malformed."""


class ClusterUnavailableError(AdaptiveError):
    """The Kubernetes API could not be reached or refused the request."""


class InvalidConfigError(AdaptiveError, ValueError):
    """An ``[adaptive]`` option has a value the provider cannot use."""


class InvalidSettingError(AdaptiveError, ValueError):
    """A setting of a replay, a simulation or a strategy is out of range or names nothing known."""


class DagFileError(AdaptiveError, ValueError):
    """A DAG file given to a command cannot be imported, or Airflow would find no DAG in it."""


class InvalidProfileError(AdaptiveError, ValueError):
    """Node profiles that cannot be grouped (none, duplicate names, no shared or finite benchmark)."""
