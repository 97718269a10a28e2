"""How a run's load is counted and how long its trace is: rho on the bodies or on the wire
(000 §2.3 measured load as the uplink's utilization), a trace of whole profile cycles, and
the rule that only the `compression` experiment compresses time."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sojourn.runner.inputs import trace_seconds
from sojourn.runner.spec import load_spec, validate
from sojourn.workloads import models, shaping

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"


def test_wire_bytes_add_frame_headers_per_segment_and_the_per_request_bytes():
    sizes = np.array([1.0, 1448.0, 1449.0, 10_000.0])
    wire = shaping.wire_bytes(sizes, per_request=465, segment_payload=1448)
    assert wire.tolist() == [1 + 66 + 465, 1448 + 66 + 465, 1449 + 132 + 465, 10_000 + 7 * 66 + 465]


def test_shaping_on_the_wire_offers_the_named_rho_in_wire_bytes_and_fewer_body_bytes():
    trace = models.make_trace(model="wc98", n_requests=40_000, rho=0.7, link_bps=10e6, clients=20, seed=5)
    body, body_periods = shaping.shape(trace, link_bps=10e6, profile="W1", duration_s=100)
    cost = shaping.wire_bytes(trace["size"], 465)
    wire, wire_periods = shaping.shape(trace, link_bps=10e6, profile="W1", duration_s=100, cost=cost)
    # Each period's achieved rho is on its own basis and meets the target.
    for periods in (body_periods, wire_periods):
        assert np.allclose(periods["achieved_rho"], periods["target_rho"], rtol=0.02)
    # The same rho on the wire carries about an eighth fewer body bytes (WC98-like sizes).
    ratio = wire_periods["bytes"].sum() / body_periods["bytes"].sum()
    assert 0.8 < ratio < 0.92, ratio
    assert len(wire) < len(body)


def test_cost_smaller_than_a_body_is_refused():
    trace = models.make_trace(model="wc98", n_requests=1000, rho=0.7, link_bps=10e6, clients=2, seed=1)
    with pytest.raises(ValueError, match="at least its size"):
        shaping.shape(trace, link_bps=10e6, rho=1.0, cost=trace["size"].to_numpy() - 1)


def test_cycles_give_the_trace_length_in_whole_profile_cycles():
    workload = validate({"name": "t", "workload": {"profile": "W1", "cycles": 1.5, "duration_s": 999}}).runs[0].config["workload"]
    assert trace_seconds(workload) == 75.0
    assert trace_seconds({**workload, "cycles": 0}) == 999
    assert trace_seconds({**workload, "profile": "W7"}) == pytest.approx(1.5 * 69)


@pytest.mark.parametrize("path", sorted(EXPERIMENTS.rglob("*.toml")), ids=lambda p: str(p.relative_to(EXPERIMENTS)))
def test_only_the_compression_experiment_compresses_time_at_either_scale(path):
    if path.name == "README.toml" or "stages" in path.parts:
        pytest.skip("not an experiment spec")
    for quick in (False, True):
        experiment = load_spec(path, quick=quick)
        compressed = [run.name for run in experiment.runs if run.config["workload"]["time_compression"] != 1]
        if path.name == "compression.toml":
            assert compressed, "compression must compare compressed runs"
        else:
            assert not compressed, f"{path.name} (quick={quick}) compresses time in {compressed}"
