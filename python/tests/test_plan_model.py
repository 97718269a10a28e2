"""`sojourn plan` (003 §3): hand-checked plans, infeasible inputs, spec errors, the command."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from sojourn.plan.model import plan
from sojourn.plan.spec import EXAMPLE, PlanSpecError, load_spec, parse_spec


def spec(times, transitions, bounds, ratio=0.5, cpus=1):
    n = len(times)
    return parse_spec(
        {
            "stages": [f"s{i}" for i in range(n)],
            "processing_times": times,
            "transitions": transitions,
            "request_session_ratio": ratio,
            "cpus": cpus,
            "classes": [{"name": f"c{p}", "delay_bound": d} for p, d in enumerate(bounds)],
        }
    )


def test_one_stage_one_class():
    # T = 1, d = 1: lambda = 1/(1+1) = 0.5; upper = P/T = 1; phi = 0.5 * 0.5.
    result = plan(spec([1.0], [[1.0]], [1.0]))
    assert result.feasible
    assert result.arrival_rates[0, 0] == pytest.approx(0.5)
    assert result.upper[0, 0] == pytest.approx(1.0)
    assert result.session_rates[0] == pytest.approx(0.25)
    assert result.utilization == pytest.approx(0.5)


def test_second_class_gets_its_share_of_what_the_first_leaves():
    # T = 1, d = (1, 3): lambda = (1/2, 1/4); class 2 departs at most
    # lambda2 / (lambda1 + lambda2) / T = (1/4) / (3/4) = 1/3 >= 1/4.
    result = plan(spec([1.0], [[1.0]], [1.0, 3.0]))
    assert result.feasible
    assert result.arrival_rates[:, 0] == pytest.approx([0.5, 0.25])
    assert result.upper[1, 0] == pytest.approx(1 / 3)
    assert result.utilization == pytest.approx(0.75)


def test_tight_bounds_are_infeasible_and_explained():
    # d = (0.2, 0.5): lambda = (1/1.2, 1/1.5); class 2 upper (2/3) / (5/6 + 2/3) = 4/9 < 2/3,
    # and the CPU demand is 1/1.2 + 1/1.5 = 1.5.
    result = plan(spec([1.0], [[1.0]], [0.2, 0.5]))
    assert not result.feasible
    assert result.upper[1, 0] == pytest.approx(4 / 9)
    assert len(result.problems) == 2
    assert "class 'c1' at stage 's0'" in result.problems[0] and "0.6667" in result.problems[0]
    assert "CPU demand 1.500" in result.problems[1]


def test_two_stage_cycle_at_the_boundary_is_feasible():
    # Stages alternate (P = [[0,1],[1,0]]), T = (1, 2), d = (1, 2) per stage:
    # lambda = (1/2, 1/4); upper_0 = P[1,0]/T_1 = 1/2 (met exactly), upper_1 = P[0,1]/T_0 = 1;
    # CPU demand 1/2 * 1 + 1/4 * 2 = 1 (exactly full).
    result = plan(spec([1.0, 2.0], [[0, 1], [1, 0]], [[1.0, 2.0]]))
    assert result.arrival_rates[0] == pytest.approx([0.5, 0.25])
    assert result.upper[0] == pytest.approx([0.5, 1.0])
    assert result.utilization == pytest.approx(1.0)
    assert result.feasible, result.problems
    # A little tighter at stage 0 and it is not.
    assert not plan(spec([1.0, 2.0], [[0, 1], [1, 0]], [[0.9, 2.0]])).feasible


def test_more_cpus_admit_more_demand():
    # Two independent stages, T = 1, d = 0.5: lambda = 2/3 each, eq. 3 holds at
    # each stage (upper 1), but together they need 4/3 of a CPU.
    one = plan(spec([1.0, 1.0], [[1, 0], [0, 1]], [0.5], cpus=1))
    assert not one.feasible and "CPU demand 1.333 of 1 CPU(s)" in one.problems[0]
    assert plan(spec([1.0, 1.0], [[1, 0], [0, 1]], [0.5], cpus=2)).feasible


def test_bundled_003_example():
    result = plan(load_spec(EXAMPLE))
    assert result.spec.stages == ("MM", "CO", "SR", "BR")
    # Fig. 5 rows are normalized (SR's printed row sums to 100.1%).
    assert np.allclose(result.spec.transitions.sum(axis=1), 1.0)
    # gold at MM: 1 / (0.5 + 10).
    assert result.arrival_rates[0, 0] == pytest.approx(1 / 10.5)
    # gold's upper bound at MM: sum_k P[k, MM] / T_k = 0.748/0.5 + 0.135/1 + 0.181/1.5 + 0.137/2 (rows normalized).
    p = result.spec.transitions
    assert result.upper[0, 0] == pytest.approx(p[0, 0] / 0.5 + p[1, 0] / 1 + p[2, 0] / 1.5 + p[3, 0] / 2)
    # eq. 4 as printed: phi = r_rs * sum of the class's rates.
    assert result.session_rates[0] == pytest.approx(0.526 * sum(1 / (t + 10) for t in (0.5, 1, 1.5, 2)))
    assert result.feasible and result.utilization == pytest.approx(0.972, abs=5e-4)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"processing_times": [1, -2]}, "processing_times[1] = -2; expected a finite number > 0"),
        ({"processing_times": [1]}, "processing_times has 1 entries; expected one per stage (2)"),
        ({"transitions": [[1, 0]]}, "transitions needs 2 rows"),
        ({"transitions": [[0, 0], [1, 0]]}, "transitions[0] is all zero"),
        ({"colour": 1}, "unknown key(s) colour"),
        ({"classes": []}, "no [[classes]]"),
        ({"classes": [{"name": "a", "delay_bound": [1, 2, 3]}]}, "classes[0].delay_bound has 3 entries"),
        ({"classes": [{"name": "a", "delay_bound": 1}, {"name": "a", "delay_bound": 2}]}, "repeat"),
        ({"request_session_ratio": 0}, "request_session_ratio = 0; expected a number > 0"),
        ({"stages": ["x", "x"]}, "repeat a name"),
    ],
)
def test_bad_specs_name_the_key(change, message):
    data = {
        "stages": ["a", "b"],
        "processing_times": [1, 2],
        "transitions": [[50, 50], [0, 1]],
        "request_session_ratio": 0.5,
        "classes": [{"name": "gold", "delay_bound": 5}],
    }
    data.update(change)
    with pytest.raises(PlanSpecError) as err:
        parse_spec(data, "t.toml")
    assert message in str(err.value)
    assert str(err.value).startswith("t.toml: ")


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "sojourn.cli", "plan", *args], capture_output=True, text=True)


def test_command_exit_status_and_json(tmp_path):
    ok = run_cli("--json")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["feasible"] is True
    tight = tmp_path / "tight.toml"
    tight.write_text(
        'stages = ["only"]\nprocessing_times = [1]\ntransitions = [[1]]\nrequest_session_ratio = 0.5\n'
        '[[classes]]\nname = "a"\ndelay_bound = 0.2\n[[classes]]\nname = "b"\ndelay_bound = 0.5\n'
    )
    bad = run_cli(str(tight))
    assert bad.returncode == 1
    assert "infeasible" in bad.stdout and "class 'b' at stage 'only'" in bad.stdout
    broken = tmp_path / "broken.toml"
    broken.write_text("stages = [")
    err = run_cli(str(broken))
    assert err.returncode == 2 and "is not valid TOML" in err.stderr
    missing = run_cli(str(tmp_path / "none.toml"))
    assert missing.returncode == 2 and "cannot read plan file" in missing.stderr
    assert run_cli("--show-example").stdout == EXAMPLE.read_text()
