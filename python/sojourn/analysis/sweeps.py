"""Across runs: confidence intervals over repetitions (002 §3.5) and capacity over a
load sweep (002 §4.4)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats


def confidence_interval(samples, level: float = 0.90) -> tuple[float, float, float]:
    """(mean, low, high): the two-sided ``level`` interval of the mean from Student's t
    with n−1 degrees of freedom, as 002 §3.5 (which checks normality and accepts n = 3).
    With one sample the interval is that sample (no spread can be estimated)."""
    values = np.asarray(samples, dtype=float)
    values = values[~np.isnan(values)]
    if values.size == 0:
        return (math.nan, math.nan, math.nan)
    mean = float(values.mean())
    if values.size == 1:
        return (mean, mean, mean)
    half = float(stats.t.ppf(0.5 + level / 2, values.size - 1) * values.std(ddof=1) / math.sqrt(values.size))
    return (mean, mean - half, mean + half)


def over_repetitions(summaries: pd.DataFrame, by: list[str], metrics: list[str], level: float = 0.90) -> pd.DataFrame:
    """One row per group of ``by`` (e.g. run name) with ``<metric>``, ``<metric>_lo``,
    ``<metric>_hi`` and the number of repetitions ``n``."""
    rows = []
    for key, group in summaries.groupby(by, sort=False):
        key = key if isinstance(key, tuple) else (key,)
        row = dict(zip(by, key))
        row["n"] = len(group)
        for metric in metrics:
            mean, low, high = confidence_interval(group[metric].to_numpy(dtype=float), level)
            row[metric], row[f"{metric}_lo"], row[f"{metric}_hi"] = mean, low, high
        rows.append(row)
    return pd.DataFrame(rows)


def capacity(sweep: pd.DataFrame, load: str, throughput: str = "throughput_rps") -> dict:
    """002 §4.4: capacity is the maximum throughput over the load sweep (whatever load
    reached it). Returns the capacity, the load that reached it, and whether that load is
    the sweep's last point (then the server may not have been saturated)."""
    valid = sweep.dropna(subset=[throughput])
    if valid.empty:
        return {"capacity": math.nan, "at_load": math.nan, "at_sweep_end": False}
    best = valid.loc[valid[throughput].idxmax()]
    return {"capacity": float(best[throughput]), "at_load": best[load].item() if hasattr(best[load], "item") else best[load],
            "at_sweep_end": bool(best[load] == valid[load].max())}


def next_level(levels: list[dict], listed: list[int], until_fall: int) -> int | None:
    """The users of the capacity probe's next level, or None when it is done: ``listed``
    in turn, then, while the most requests/s came at the newest level (the curve has not yet
    fallen past its maximum, 002 §4.4), up to ``until_fall`` more, each doubling the users."""
    if len(levels) < len(listed):
        return listed[len(levels)]
    if len(levels) >= len(listed) + until_fall or not levels:
        return None
    best = capacity(pd.DataFrame(levels), "users")
    return 2 * levels[-1]["users"] if best["at_sweep_end"] else None


def window_throughput(requests: pd.DataFrame, start_s: float, end_s: float) -> dict:
    """Completed requests per second whose last byte arrived in [start, end) seconds after
    the first request was scheduled (a capacity level after its warm-up), their body bits
    per second (001 §3.1 gives capacity in Mb/s), their mean response time and the errors
    in the same window."""
    if requests.empty or end_s <= start_s:
        return {"throughput_rps": math.nan, "throughput_bps": math.nan, "response_mean": math.nan, "errors": 0}
    origin = float(requests["scheduled_s"].min())
    finished = requests["last_byte_s"] - origin
    window = requests[(finished >= start_s) & (finished < end_s)]
    done = window[window["completed"]]
    return {"throughput_rps": len(done) / (end_s - start_s),
            "throughput_bps": float(done["bytes"].sum()) * 8 / (end_s - start_s),
            "response_mean": float(done["response_s"].mean()) if len(done) else math.nan,
            "errors": int(len(window) - len(done))}


def swept_users(summary: dict) -> bool:
    """Whether a repetition's summary is a capacity probe over several load levels (002
    §4.4), whose levels draw its figures; a load level that followed a probe, or an
    infinite-demand capacity (001 §3.1), has one."""
    return len(summary.get("levels") or []) > 1


def capacity_of_levels(levels: list[dict]) -> dict:
    """002 §4.4 over one sweep of load levels (each with ``users`` and ``throughput_rps``):
    the capacity (requests/s, and the body bits/s at that level), the level that reached
    it, whether that is the last level (then the server may not have been saturated), and
    the levels themselves."""
    frame = pd.DataFrame(levels)
    best = capacity(frame, "users") if len(frame) else {"capacity": math.nan, "at_load": math.nan, "at_sweep_end": False}
    at_best = frame[frame["users"] == best["at_load"]] if len(frame) else frame
    bps = float(at_best["throughput_bps"].iloc[0]) if "throughput_bps" in at_best and len(at_best) else math.nan
    return {"capacity_rps": best["capacity"], "capacity_bps": bps, "capacity_users": best["at_load"],
            "capacity_at_last_level": best["at_sweep_end"], "levels": levels}
