"""``sojourn-engine sim`` against the M/G/1 closed forms of sojourn.theory.formulas.

Fixed seeds; enough jobs that the sampling error is well inside the 2% tolerance
(at rho 0.9 both cases need ~10^7 jobs: response times are strongly autocorrelated,
and with 2-3 million jobs a seed can miss by 2%). Time unit = one byte on an 8 bit/s link, so sizes are service times.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from sojourn.engine import engine_path
from sojourn.theory.formulas import BoundedPareto, Exponential, Srpt, fcfs_response

TOLERANCE = 0.02

EXP = (["--sizes", "exp", "--mean", "1"], Exponential(1.0))
BP = (["--sizes", "bpareto", "--k", "1000", "--p", "1e5", "--alpha", "1.5"], BoundedPareto(1000.0, 1e5, 1.5))

CASES = [
    ("exp", *EXP, 0.5, 1_000_000),
    ("exp", *EXP, 0.9, 10_000_000),
    ("bpareto", *BP, 0.5, 1_000_000),
    ("bpareto", *BP, 0.9, 10_000_000),
]


def simulate(args: list[str], rho: float, jobs: int, policy: str) -> dict:
    result = subprocess.run([str(engine_path()), "sim", *args, "--rho", str(rho), "--jobs", str(jobs), "--seed", "42",
                             "--link", "8", "--policy", policy, "--size-bins", "0"],
                            check=True, capture_output=True, text=True)
    return json.loads(result.stdout)


def expected(policy: str, dist, rho: float) -> tuple[float, float | None]:
    """Mean response time and mean slowdown (None where it is infinite)."""
    if policy == "ps":
        return dist.mean / (1 - rho), 1 / (1 - rho)
    if policy == "srpt":
        srpt = Srpt(dist, rho)
        return srpt.mean_response(), srpt.mean_slowdown()
    # FCFS: E[1/S] is infinite for the exponential, so only the mean response time.
    return float(fcfs_response(dist, rho, dist.mean)), None


@pytest.mark.parametrize("name,args,dist,rho,jobs", CASES, ids=[f"{c[0]}-rho{c[3]}" for c in CASES])
def test_simulator_matches_closed_forms(name, args, dist, rho, jobs):
    policies = ["ps", "srpt"] + (["fcfs"] if name == "exp" else [])
    for policy in policies:
        summary = simulate(args, rho, jobs, policy)
        assert summary["jobs"] == jobs
        response, slowdown = expected(policy, dist, rho)
        assert summary["mean_response_s"] == pytest.approx(response, rel=TOLERANCE), policy
        if slowdown is not None:
            assert summary["mean_slowdown"] == pytest.approx(slowdown, rel=TOLERANCE), policy


def test_bands_and_las_bracketed_by_ps_and_srpt():
    """Size bands (000 §3) and LAS sit between ideal SRPT and PS on a heavy-tailed load."""
    args, dist = BP
    means = {p: simulate(args, 0.9, 300_000, p)["mean_response_s"] for p in ("ps", "srpt", "las", "bands")}
    assert means["srpt"] < means["bands"] < means["ps"]
    assert means["srpt"] < means["las"] < means["ps"]
