"""Past the largest input a family has finished: a line's value there is a guess (capped), and a
quantile rule is raised to a rising line's value; the notes that say so."""

from __future__ import annotations

import numpy as np
import pytest

from airflow_adaptive.core.sizing.adaptive import AdaptivePredictor
from airflow_adaptive.core.sizing.base import Sample
from airflow_adaptive.core.units import GIB


def test_a_quantile_past_the_inputs_seen_is_raised_to_a_rising_lines_value() -> None:
    """A quantile of peaks ignores input: on Lotaru bacass a quantile rule gave Unicycler 5.2 GiB at
    an input twice the largest finished, for a 7.1 GiB peak. Where a family's peaks grow with input
    (its line's slope above 0, one-sided at 1 %), past the largest input finished the allocation is
    at least the line's value there, within the cap a line has there; inside the inputs seen, or
    where peaks do not grow with input, the quantile stands."""
    rng = np.random.default_rng(1)
    inputs = np.linspace(1, 8, 8) * GIB
    rising = [Sample(int(0.5 * x + rng.normal(0, 0.05) * GIB), int(x), 60.0) for x in inputs]
    model = AdaptivePredictor(max_oom_rate=None).fit(rising)
    assert not model._line_chosen  # too few tasks scored to leave the first rule (P95 + 15 %)
    line = model._rising_line_at(12 * GIB)
    assert line == pytest.approx(6 * GIB, rel=0.05) and model._predict(12 * GIB) < 0.8 * line
    allocation, note = model.predict_noted(12 * GIB, 64 * GIB)
    assert (
        allocation == int(line)
        and note.startswith("input 12 GiB is beyond")
        and note.endswith(f"its peaks grow with input: its line says {line / GIB:.3g} GiB there")
    )
    largest_peak = max(s.peak_memory_bytes for s in rising)  # the cap, as a line's: request or this + 15 %
    capped, note = model.predict_noted(40 * GIB, 2 * GIB)
    assert capped == int(largest_peak * 1.15) and note.endswith(
        f"largest peak + margin, {capped / GIB:.3g} GiB"
    )
    assert model.predict_noted(4 * GIB, 64 * GIB) == (int(model._predict(4 * GIB)), "")
    flat = [Sample(int(2 * GIB + rng.normal(0, 0.05) * GIB), int(x), 60.0) for x in inputs]
    steady = AdaptivePredictor(max_oom_rate=None).fit(flat)
    assert steady.predict_noted(12 * GIB, 64 * GIB) == (int(steady._predict(12 * GIB)), "")


def test_a_line_beyond_the_largest_input_seen_is_capped_at_the_request_or_the_largest_peak() -> None:
    """Memory that grew with input on small inputs often levels off on large ones (Lotaru bacass's
    Unicycler: 4.5 GiB from 0.3 to 0.7 GB of input, a line on the small ones says 31 GiB at 1.2 GB),
    so past the largest input finished a line's value is a guess: at most the larger of the request
    and the largest peak + 15 %. Inside the inputs seen the line stands."""
    rng = np.random.default_rng(0)
    inputs = rng.uniform(1, 20, 40) * GIB
    samples = [Sample(int(2 * x + rng.normal(0, 0.3) * GIB), int(x), 60.0) for x in inputs]
    model = AdaptivePredictor().fit(samples)
    assert model._line_chosen
    largest_peak = max(s.peak_memory_bytes for s in samples)
    far = int(60 * GIB)  # the line says about 120 GiB here
    assert model._predict(far) > 100 * GIB
    assert model.predict(far, user_request_bytes=8 * GIB) == int(largest_peak * 1.15)
    assert model.predict(far, user_request_bytes=100 * GIB) == 100 * GIB
    at_request, note = model.predict_noted(far, 100 * GIB)
    assert at_request == 100 * GIB and "at most the request, 100 GiB" in note
    at_peak, note = model.predict_noted(far, 8 * GIB)
    assert at_peak == int(largest_peak * 1.15) and "largest peak + margin" in note
    inside = int(10 * GIB)
    assert model.predict(inside, user_request_bytes=8 * GIB) == int(model._predict(inside))
    assert model.predict_noted(inside, 8 * GIB) == (int(model._predict(inside)), "")
    # Without a request the cap bounds whatever the rule or the small-sample bound says.
    assert model.predict(far) == int(largest_peak * 1.15)
    # A killed or sampled attempt is a lower bound, not a finished input: it moves neither the
    # largest input finished nor the largest peak.
    killed = Sample(int(30 * GIB), far, 60.0, lower_bound=True)
    again = AdaptivePredictor().fit([*samples, killed])
    assert again.finished_span_ == model.finished_span_
    assert again.predict(far, user_request_bytes=8 * GIB) <= int(largest_peak * 1.15)
