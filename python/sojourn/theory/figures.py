"""The figures of 004 §6 (Figs. 7-8) and the transient-overload study of 000 §6.

Each function computes a table (a DataFrame, also written as CSV) and draws the figure
from it (PNG), so the numbers behind every figure are saved beside it.

* :func:`fig7`: SRPT mean slowdown vs size percentile at rho 0.9, exponential vs bounded
  Pareto alpha 1.1 with the same mean (3000), p = 1e10; the checks of 004 §6.2's text.
* :func:`fig8`: the same for bounded Pareto with mean 3000 and alpha 0.5 .. 1.9.
* :func:`transient`: W1-W10 (000 Table 1) simulated under PS and SRPT on the same
  arrivals (``sojourn-engine sim``): jobs in the system over time, recovery after each
  overload period, mean response, and the largest 1% of jobs (000 §6.2-6.3).
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from sojourn.engine import engine_path  # noqa: E402
from sojourn.workloads.shaping import PROFILES  # noqa: E402
from sojourn.theory.formulas import BoundedPareto, Distribution, Exponential, slowdown_by_percentile  # noqa: E402

# 004 §6.2: Fig. 7 plots task size percentiles; the text's statements are read at the 99th.
PERCENTILES = np.round(np.arange(0.01, 0.9901, 0.01), 4)
FIG8_ALPHAS = (0.5, 0.7, 0.9, 1.1, 1.3, 1.5, 1.7, 1.9)
# 000 Table 1 (low-load seconds, overload seconds) as sojourn.workloads shapes traces; the
# simulator has the same table (crates/sim/src/workload.rs; test_theory_transient checks).
TRANSIENT = {name: (profile.low_s, profile.high_s) for name, profile in PROFILES.items()}


SIZES_ARGS = {"exponential": lambda d: ["--sizes", "exp", "--mean", repr(d.mean_size)],
              "bounded_pareto_1.1": lambda d: ["--sizes", "bpareto", "--k", repr(d.k), "--p", repr(d.p), "--alpha", repr(d.alpha)]}


def simulated_slowdown(name: str, dist, rho: float, jobs: int, bins: int = 20, seed: int = 1) -> pd.DataFrame:
    """SRPT mean slowdown per equal-count size bin from ``sojourn-engine sim`` (M/G/1,
    ``jobs`` jobs), beside the closed form averaged over the same percentiles."""
    result = subprocess.run([str(engine_path()), "sim", *SIZES_ARGS[name](dist), "--rho", str(rho), "--jobs", str(jobs),
                             "--seed", str(seed), "--link", "8", "--policy", "srpt", "--size-bins", str(bins)],
                            check=True, capture_output=True, text=True)
    rows = []
    for b in json.loads(result.stdout)["by_size"]:
        inside = np.linspace(b["from_fraction"], b["to_fraction"], 52)[1:-1]
        rows.append({"percentile": (b["from_fraction"] + b["to_fraction"]) / 2, "simulated": b["mean_slowdown"],
                     "theory": float(np.mean(slowdown_by_percentile(dist, rho, inside)))})
    return pd.DataFrame(rows)


def work_share_above(dist: Distribution, percentile: float) -> float:
    """The share of all work (bytes) in the jobs above ``percentile`` of the sizes: what a
    job at that percentile is not interrupted by under SRPT (004 §6.2)."""
    return 1.0 - float(dist.partial_moment(1, dist.ppf(percentile))) / dist.mean


def fig7(out: Path, rho: float = 0.9, mean: float = 3000.0, p: float = 1e10,
         simulate_jobs: int = 0) -> tuple[pd.DataFrame, dict]:
    """004 Fig. 7; returns the curve table and the checks of its text. With
    ``simulate_jobs``, simulated SRPT slowdowns per size bin are drawn as points and saved
    as fig7-simulated.csv. tail-share.csv holds §6.2's explanation: the share of all work
    in the largest 1% and 5% of jobs under each distribution."""
    curves = {"exponential": Exponential(mean), "bounded_pareto_1.1": BoundedPareto.with_mean(mean, 1.1, p)}
    pd.DataFrame([{"distribution": name, "largest": round(1 - q, 6), "work_share": work_share_above(dist, q)}
                  for name, dist in curves.items() for q in (0.99, 0.95)]).to_csv(_made(out) / "tail-share.csv", index=False)
    table = pd.DataFrame({"percentile": PERCENTILES})
    for name, dist in curves.items():
        table[name] = slowdown_by_percentile(dist, rho, PERCENTILES)
    simulated = {name: simulated_slowdown(name, dist, rho, simulate_jobs) for name, dist in curves.items()} if simulate_jobs else {}
    bp, ex = table["bounded_pareto_1.1"], table["exponential"]
    beyond = np.array([0.999, 0.9999])
    checks = {
        "bp_max_slowdown_to_p99": float(bp.max()),
        "exp_min_slowdown_largest_5pct": float(ex[table["percentile"] >= 0.95].min()),
        "exp_max_slowdown_to_p99": float(ex.max()),
        "bp_slowdown_p99.9_p99.99": [float(v) for v in slowdown_by_percentile(curves["bounded_pareto_1.1"], rho, beyond)],
    }
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(table["percentile"], ex, label="Exponential")
    ax.plot(table["percentile"], bp, label="BP (alpha 1.1)")
    for (name, points), colour in zip(simulated.items(), ("C0", "C1")):
        ax.plot(points["percentile"], points["simulated"], "o", ms=3, color=colour, label=f"simulated ({simulate_jobs:,} jobs)")
    ax.set(xlabel="Percentile of job size distribution", ylabel="Mean slowdown under SRPT",
           title=f"004 Fig. 7: M/G/1 SRPT, rho = {rho}, mean {mean:g}")
    ax.legend()
    _save(fig, table, out, "fig7")
    if simulated:
        pd.concat([frame.assign(distribution=name) for name, frame in simulated.items()]).to_csv(out / "fig7-simulated.csv", index=False)
        checks["simulated_max_relative_error"] = {
            name: float(((frame["simulated"] - frame["theory"]).abs() / frame["theory"]).max()) for name, frame in simulated.items()}
    return table, checks


def fig8(out: Path, rho: float = 0.9, mean: float = 3000.0, p: float = 1e10) -> pd.DataFrame:
    """004 Fig. 8: bounded Pareto, constant mean, alpha from 0.5 to 1.9."""
    table = pd.DataFrame({"percentile": PERCENTILES})
    for alpha in FIG8_ALPHAS:
        dist = BoundedPareto.with_mean(mean, alpha, p)
        table[f"alpha_{alpha}"] = slowdown_by_percentile(dist, rho, PERCENTILES)
    fig, ax = plt.subplots(figsize=(6, 4))
    for alpha in FIG8_ALPHAS:
        ax.plot(table["percentile"], table[f"alpha_{alpha}"], label=f"alpha {alpha}")
    ax.set(xlabel="Percentile of job size distribution", ylabel="Mean slowdown under SRPT",
           title=f"004 Fig. 8: bounded Pareto, mean {mean:g}, rho = {rho}")
    ax.legend(fontsize="small")
    _save(fig, table, out, "fig8")
    return table


def _made(out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    return out


def _save(fig, table: pd.DataFrame, out: Path, name: str) -> None:
    _made(out)
    fig.tight_layout()
    fig.savefig(out / f"{name}.png", dpi=120)
    plt.close(fig)
    table.to_csv(out / f"{name}.csv", index=False)


def _simulate(args: list[str], workdir: Path) -> pd.DataFrame:
    subprocess.run([str(engine_path()), "sim", *args, "--size-bins", "0", "--out", str(workdir)],
                   check=True, capture_output=True, text=True)
    return pd.read_csv(workdir / "records.csv", usecols=["scheduled_s", "expected_size", "last_byte_s"])


def in_system(records: pd.DataFrame, times: np.ndarray) -> np.ndarray:
    """Number of jobs present (arrived, not finished) at each of ``times``."""
    arrived = np.searchsorted(np.sort(records["scheduled_s"].to_numpy()), times, side="right")
    left = np.searchsorted(np.sort(records["last_byte_s"].to_numpy()), times, side="right")
    return arrived - left


def recovery_times(records: pd.DataFrame, low_s: float, high_s: float, window_s: float = 1.0) -> np.ndarray:
    """For each overload period: seconds from its end until requests arriving in a
    ``window_s`` window again see a mean response time at most twice the policy's normal
    level (the median window mean over the second halves of the low-load periods); NaN
    if that does not happen before the next overload. This is the users' view of how
    fast the server "recuperates" once load drops (000 §6.3)."""
    arrival = records["scheduled_s"].to_numpy()
    response = records["last_byte_s"].to_numpy() - arrival
    window = np.floor(arrival / window_s).astype(np.int64)
    sums = np.bincount(window, weights=response)
    counts = np.bincount(window)
    starts = np.arange(len(counts)) * window_s
    means = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
    cycle = low_s + high_s
    phase = np.mod(starts, cycle)
    normal = np.nanmedian(means[(phase >= low_s / 2) & (phase + window_s <= low_s)])
    result = []
    for end in np.arange(cycle, starts[-1], cycle):
        after = (starts >= end - 1e-9) & (starts < end + low_s)
        calm = np.nonzero(after & (means <= 2 * normal))[0]
        result.append(starts[calm[0]] - end if calm.size else np.nan)
    return np.array(result)


def transient(out: Path, workloads: tuple[str, ...] | None = None, duration_s: float = 1800.0,
              link_bps: float = 10e6, mean: float = 5000.0, alpha: float = 1.1, p: float = 2.02e6,
              seed: int = 1) -> pd.DataFrame:
    """000 §6: every workload of Table 1 under PS and SRPT on the same arrivals.

    Sizes are bounded Pareto (alpha 1.1 as in 000 §6.3) with the World Cup trace's mean
    (5 KB) and largest file (2.02 MB, 000 §2.1) as mean and upper bound.
    """
    workloads = workloads or tuple(TRANSIENT)
    rows, series = [], {}
    with tempfile.TemporaryDirectory(prefix="sojourn-transient-") as tmp:
        for name in workloads:
            low_s, high_s = TRANSIENT[name]
            for policy in ("ps", "srpt"):
                records = _simulate(["--sizes", "bpareto", "--alpha", str(alpha), "--mean", str(mean), "--p", str(p),
                                     "--profile", name, "--duration", str(duration_s), "--link", str(link_bps),
                                     "--seed", str(seed), "--policy", policy], Path(tmp) / f"{name}-{policy}")
                response = records["last_byte_s"] - records["scheduled_s"]
                largest = records["expected_size"] >= records["expected_size"].quantile(0.99)
                grid = np.arange(0.0, float(records["scheduled_s"].max()), 0.5)
                present = in_system(records, grid)
                series[(name, policy)] = (grid, present)
                rows.append({
                    "workload": name, "policy": policy, "jobs": len(records),
                    "mean_response_s": float(response.mean()),
                    "largest_1pct_mean_response_s": float(response[largest].mean()),
                    "mean_in_system": float(present.mean()), "peak_in_system": int(present.max()),
                    "mean_recovery_s": float(np.nanmean(recovery_times(records, low_s, high_s))),
                })
    table = pd.DataFrame(rows)
    wide = table.pivot(index="workload", columns="policy").reindex(list(workloads))
    wide.columns = [f"{metric}_{policy}" for metric, policy in wide.columns]
    wide["mean_response_ratio_ps_over_srpt"] = wide["mean_response_s_ps"] / wide["mean_response_s_srpt"]
    wide["largest_1pct_ratio_srpt_over_ps"] = wide["largest_1pct_mean_response_s_srpt"] / wide["largest_1pct_mean_response_s_ps"]
    wide = wide.reset_index()

    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    first = workloads[0]
    for policy, label in (("ps", "PS (FAIR)"), ("srpt", "SRPT")):
        grid, present = series[(first, policy)]
        shown = grid <= min(grid[-1], 6 * sum(TRANSIENT[first]))
        axes[0].plot(grid[shown], present[shown], label=label, lw=0.8)
    axes[0].set(xlabel="time (s)", ylabel="jobs in system", title=f"{first}: buildup and recovery")
    axes[0].legend()
    x = np.arange(len(workloads))
    axes[1].bar(x - 0.2, wide["mean_response_s_ps"], 0.4, label="PS (FAIR)")
    axes[1].bar(x + 0.2, wide["mean_response_s_srpt"], 0.4, label="SRPT")
    axes[1].set_xticks(x, workloads)
    axes[1].set(ylabel="mean response time (s)", yscale="log", title="000 Table 1 workloads (cf. 000 Fig. 12)")
    axes[1].legend()
    _save(fig, wide, out, "transient")
    return wide
