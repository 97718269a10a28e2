"""Closed forms of sojourn.theory.formulas and the statements of 004 §6.2."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate

from sojourn import cli
from sojourn.theory import figures
from sojourn.theory.formulas import (BoundedPareto, Exponential, Srpt, Surge, fcfs_response, ps_response,
                                      tcp_loss_throughput)

DISTS = [Exponential(3000.0), BoundedPareto(332.0, 1e10, 1.1), BoundedPareto(1000.0, 1e5, 1.5), Surge()]


@pytest.mark.parametrize("dist", DISTS, ids=lambda d: type(d).__name__)
def test_quantiles_and_moments_are_consistent(dist):
    q = np.array([0.01, 0.3, 0.5, 0.9, 0.99, 0.9999])
    assert dist.cdf(dist.ppf(q)) == pytest.approx(q, rel=1e-9)
    # Partial moments against direct integration of the CDF: int_0^x t dF = x F(x) - int_0^x F.
    for x in dist.ppf(np.array([0.2, 0.7, 0.95])):
        lo = dist.lower
        area, _ = integrate.quad(lambda t: dist.cdf(t), lo, x, limit=400, points=[9020.0] if lo < 9020.0 < x else None)
        assert dist.partial_moment(1, x) == pytest.approx(x * dist.cdf(x) - area - lo * dist.cdf(lo), rel=1e-6)


def test_means_of_the_papers_models():
    assert Surge().mean == pytest.approx(11108, abs=15)  # 004 §4.1
    assert Surge().tail_weight() == pytest.approx(0.07, abs=1e-3)
    bp = BoundedPareto.with_mean(3000.0, 1.1)
    assert bp.mean == pytest.approx(3000.0, rel=1e-9)
    assert bp.k == pytest.approx(332.07, abs=0.01)  # the BP of 004 Fig. 7 / [12]


def test_srpt_grid_matches_direct_quadrature():
    dist, rho = Exponential(1.0), 0.8
    lam = rho / dist.mean
    srpt = Srpt(dist, rho)
    for x in (0.1, 1.0, 3.0, 8.0):
        waiting = lam * (dist.partial_moment(2, x) + x * x * (1 - dist.cdf(x))) / (2 * (1 - lam * dist.partial_moment(1, x)) ** 2)
        residence, _ = integrate.quad(lambda t: 1 / (1 - lam * dist.partial_moment(1, t)), 0, x)
        assert srpt.response(x) == pytest.approx(waiting + residence, rel=1e-5)


@pytest.mark.parametrize("dist", DISTS, ids=lambda d: type(d).__name__)
def test_srpt_limits_and_ordering(dist):
    rho = 0.9
    srpt = Srpt(dist, rho)
    # Light load: a job is barely delayed.
    light = Srpt(dist, 1e-4)
    x = dist.ppf(0.5)
    assert light.response(x) == pytest.approx(x, rel=1e-3)
    # Slowdown never below 1; the largest job waits out the whole backlog
    # (lam E[S^2] / (2 (1-rho)^2)) and is slowed by at most 1/(1-rho) meanwhile.
    sizes = dist.ppf(np.linspace(0.01, 0.999, 50))
    assert np.all(srpt.slowdown(sizes) >= 1 - 1e-9)
    top = dist.top()
    backlog = rho / dist.mean * dist.second_moment / (2 * (1 - rho) ** 2)
    assert backlog + top <= float(srpt.response(top)) <= backlog + top / (1 - rho)
    # SRPT beats PS, which (for these high-variance sizes or equal for M/M/1) beats FCFS on the mean.
    assert srpt.mean_response() < dist.mean / (1 - rho)
    assert float(fcfs_response(dist, rho, dist.mean)) >= dist.mean / (1 - rho) * (1 - 1e-9)
    assert ps_response(dist, rho, 2.0) == pytest.approx(20.0)


def test_bad_load_is_named():
    with pytest.raises(ValueError, match="rho"):
        Srpt(Exponential(1.0), 1.0)
    with pytest.raises(ValueError, match="alpha"):
        BoundedPareto(1.0, 10.0, -1.0)


def test_fig7_statements_of_004(tmp_path):
    """004 §6.2: at rho 0.9 no BP (alpha 1.1) job size up to the 99th percentile sees mean
    slowdown above about 1.6, while under the exponential the largest sizes reach 10-11
    and the top few percent are at 5.6 or more."""
    table, checks = figures.fig7(tmp_path)
    assert checks["bp_max_slowdown_to_p99"] == pytest.approx(1.6, abs=0.05)
    assert 10.0 <= checks["exp_max_slowdown_to_p99"] <= 11.5
    ex = table.set_index("percentile")["exponential"]
    assert ex.loc[0.96] >= 5.6
    # Beyond the 99th percentile the BP curve rises towards 1/(1-rho): the statement is about the plotted range.
    assert checks["bp_slowdown_p99.9_p99.99"][0] > 1.6
    assert (tmp_path / "fig7.png").stat().st_size > 0 and (tmp_path / "fig7.csv").exists()


def test_fig8_heavier_tails_are_fairer(tmp_path):
    table = figures.fig8(tmp_path).set_index("percentile")
    at99 = [table.loc[0.99, f"alpha_{a}"] for a in figures.FIG8_ALPHAS]
    assert all(a < b for a, b in zip(at99, at99[1:])), at99
    assert table["alpha_0.5"].max() < 1.01 and table["alpha_0.7"].max() < 1.01  # "so close to 1 as to be invisible"
    assert table.loc[0.99, "alpha_1.9"] > 5


def test_cli_response_table(capsys):
    assert cli.main(["theory", "response", "--dist", "exp", "--mean", "1", "--rho", "0.5", "--percentiles", "0.5"]) == 0
    out = capsys.readouterr().out
    assert "srpt_slowdown" in out and "mean response PS 2" in out
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["theory", "response", "--dist", "exp", "--rho", "1.5"])
    assert exit_info.value.code == 2
    assert "'1.5': expected a load > 0 and < 1" in capsys.readouterr().err


def test_exponential_math():
    e = Exponential(2.0)
    assert e.mean == pytest.approx(2.0)
    assert e.second_moment == pytest.approx(8.0)
    assert float(e.ppf(1 - math.exp(-1))) == pytest.approx(2.0)


def test_fig7_simulated_per_size_bin(tmp_path):
    """The simulator draws 004 Fig. 7 too: SRPT mean slowdown in each of 20 equal-count size
    bins (2 million jobs, seed 1) within 3% of the closed form averaged over the bin."""
    _, checks = figures.fig7(tmp_path, simulate_jobs=2_000_000)
    errors = checks["simulated_max_relative_error"]
    assert errors["exponential"] < 0.03 and errors["bounded_pareto_1.1"] < 0.03, errors
    assert (tmp_path / "fig7-simulated.csv").exists()


def test_surge_agrees_with_the_workloads_model():
    """sojourn.workloads' SURGE renormalizes the two densities of 004 Table 1; ours (and the
    simulator's) gives the tail the bounded Pareto's own mass: the same model to 1e-4."""
    from sojourn.workloads.models import surge

    ours, theirs = Surge(), surge()
    assert ours.mean == pytest.approx(theirs.mean, rel=1e-4)
    q = np.array([0.1, 0.5, 0.9, 0.92, 0.95, 0.99, 0.999])
    assert ours.ppf(q) == pytest.approx(theirs.quantile(q), rel=2e-3)


def test_work_share_of_the_largest_jobs_004_section_6_2():
    """004 §6.2: the largest 1% hold (1 + ln 100) / 100 of an exponential's work (the
    closed form; "only 5%") and more than half of a bounded Pareto's with alpha 1.1."""
    from sojourn.theory.figures import work_share_above

    assert work_share_above(Exponential(3000.0), 0.99) == pytest.approx((1 + math.log(100)) / 100, rel=1e-9)
    heavy = BoundedPareto.with_mean(3000.0, 1.1, 1e10)
    assert 0.5 < work_share_above(heavy, 0.99) < work_share_above(heavy, 0.95) < 1.0
    assert work_share_above(heavy, 0.0) == pytest.approx(1.0)


def test_tcp_loss_throughput_is_mathis_and_names_bad_input():
    # 000 (J): 100 ms RTT, 5% loss: 1448 B / 0.1 s * sqrt(30) = 79.3 KB/s; a quarter of the
    # loss doubles it (throughput ~ 1/sqrt(p)), double the RTT halves it.
    rate = tcp_loss_throughput(0.1, 0.05)
    assert rate == pytest.approx(79310, rel=1e-4)
    assert tcp_loss_throughput(0.1, 0.0125) == pytest.approx(2 * rate)
    assert tcp_loss_throughput(0.2, 0.05) == pytest.approx(rate / 2)
    for bad in ((0, 0.05), (0.1, 0), (0.1, 1.0)):
        with pytest.raises(ValueError, match="rtt_s"):
            tcp_loss_throughput(*bad)
