"""The placement names the simulator runs: every registered policy, ``tarema-idle``,
``finish-time-live``, ``default``
(the provider's default, whichever policy it is) and a ``+locality`` suffix on any of them."""

from __future__ import annotations

from airflow_adaptive.core.placement import DEFAULT_PLACEMENT, PLACEMENT_POLICIES
from airflow_adaptive.exceptions import InvalidSettingError

# "tarema-idle" is tarema told which groups have idle nodes right now (the provider's
# placement_live_load): its distance then ignores overshooting onto idle groups (see TaremaScorer).
# "finish-time-live" is finish-time with live load (each node's cores, requested and expected busy); plain
# "finish-time" is what pods get without placement_live_load: no load, expected runtimes alone.
LIVE = ("tarema-idle", "finish-time-live")
WITHOUT_LIVE_LOAD = "finish-time"  # an own policy that reads load only from live load
PLACEMENTS = (*PLACEMENT_POLICIES.names(), *LIVE)
LOCALITY = "+locality"  # a placement with this suffix stages shared inputs and prefers their nodes
DEFAULT = "default"  # a name for the provider's default placement, whichever policy it is
ACCEPTED = tuple(p + suffix for suffix in ("", LOCALITY) for p in (DEFAULT, *PLACEMENTS))  # every name


def base_placement(placement: str) -> str:
    """The policy a placement name runs: without the locality suffix, ``default`` resolved."""
    base = placement.removesuffix(LOCALITY)
    base = DEFAULT_PLACEMENT if base == DEFAULT else base
    if base not in PLACEMENTS:
        raise InvalidSettingError(
            f"unknown placement {placement!r}; known: {DEFAULT}, {', '.join(PLACEMENTS)} (+locality)"
        )
    return base
