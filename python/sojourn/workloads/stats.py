"""Statistics of a trace's request sizes (000 §2.1) and the CCDF figure of 000 Fig. 1.

Pure functions over a trace DataFrame; the figure is written with matplotlib's Agg
backend (no display needed).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

# A trace whose one largest gap between requests is more than this share of its duration
# is mostly idle time (a clock jump, logs from days apart): `trace stats` warns, and the
# importers name such gaps and cut off the few lines beyond them (importers.py).
DOMINANT_GAP = 0.5

# The tail fit uses the sizes between these request quantiles (LLCD regression,
# Crovella & Taqqu's log-log CCDF method): above the body, below the last few points.
TAIL_FROM, TAIL_TO = 0.90, 0.999


@dataclass
class TraceStats:
    requests: int
    objects: int
    duration_s: float
    total_bytes: int
    mean: float
    min: int
    max: int
    median: float
    p90: float
    share_top_1pct: float
    share_top_3pct: float
    tail_alpha: float
    offered_rho: float | None
    link_bps: float | None
    largest_gap_s: float
    largest_gap_at_s: float

    def warnings(self) -> list[str]:
        """What makes the statistics misleading: one gap dominating the duration."""
        if self.duration_s > 0 and self.largest_gap_s > DOMINANT_GAP * self.duration_s:
            return [f"one gap of {self.largest_gap_s:.3f} s (after t = {self.largest_gap_at_s:.3f} s) is "
                    f"{self.largest_gap_s / self.duration_s:.0%} of the trace's {self.duration_s:.3f} s: rates and "
                    f"offered load over the duration are mostly idle time"]
        return []

    def as_dict(self) -> dict:
        return asdict(self)

    def rows(self) -> list[tuple[str, str]]:
        rows = [
            ("requests", f"{self.requests}"),
            ("distinct objects", f"{self.objects}"),
            ("duration", f"{self.duration_s:.3f} s"),
            ("largest gap", f"{self.largest_gap_s:.3f} s after t = {self.largest_gap_at_s:.3f} s"),
            ("total bytes", f"{self.total_bytes}"),
            ("mean size", f"{self.mean:.1f} B"),
            ("min size", f"{self.min} B"),
            ("max size", f"{self.max} B"),
            ("median size", f"{self.median:.0f} B"),
            ("90th percentile", f"{self.p90:.0f} B"),
            ("bytes in largest 1 % of requests", f"{self.share_top_1pct:.3f}"),
            ("bytes in largest 3 % of requests", f"{self.share_top_3pct:.3f}"),
            (f"tail alpha (LLCD fit, p{TAIL_FROM * 100:g}-p{TAIL_TO * 100:g})", f"{self.tail_alpha:.3f}"),
        ]
        if self.offered_rho is not None:
            rows.append((f"offered load at {self.link_bps / 1e6:g} Mbit/s", f"rho = {self.offered_rho:.3f}"))
        return rows


def top_share(sorted_sizes: np.ndarray, fraction: float) -> float:
    """Share of all bytes carried by the largest ``fraction`` of requests."""
    count = int(round(len(sorted_sizes) * fraction))
    total = sorted_sizes.sum(dtype=np.float64)
    return float(sorted_sizes[len(sorted_sizes) - count :].sum(dtype=np.float64) / total) if total else 0.0


def tail_alpha(sorted_sizes: np.ndarray) -> float:
    """Slope of the log-log CCDF between the TAIL_FROM and TAIL_TO quantiles (least
    squares), negated: the Pareto alpha of the tail (000 §2.1 reports alpha < 1.5)."""
    n = len(sorted_sizes)
    lo, hi = int(n * TAIL_FROM), int(n * TAIL_TO)
    if hi - lo < 10:
        return float("nan")
    x = sorted_sizes[lo:hi].astype(np.float64)
    ccdf = 1.0 - (np.arange(lo, hi) + 0.5) / n
    unique = np.concatenate([x[1:] != x[:-1], [True]])  # last point of each run of equal sizes
    if unique.sum() < 3:
        return float("nan")
    slope = np.polyfit(np.log10(x[unique]), np.log10(ccdf[unique]), 1)[0]
    return float(-slope)


def describe(trace: pd.DataFrame, link_bps: float | None = None) -> TraceStats:
    """The statistics ``sojourn trace stats`` prints."""
    if len(trace) == 0:
        raise ValueError("the trace is empty")
    sizes = np.sort(trace["size"].to_numpy(dtype=np.uint64))
    arrivals = trace["arrival_s"].to_numpy(dtype=np.float64)
    duration = float(arrivals[-1] - arrivals[0]) if len(arrivals) > 1 else 0.0
    gaps = np.diff(arrivals)
    gap_at = int(np.argmax(gaps)) if len(gaps) else 0
    total = int(sizes.sum(dtype=np.uint64))
    rho = total * 8.0 / (link_bps * duration) if link_bps and duration > 0 else None
    return TraceStats(
        requests=len(sizes),
        objects=int(trace["path"].nunique()),
        duration_s=duration,
        total_bytes=total,
        mean=float(sizes.mean(dtype=np.float64)),
        min=int(sizes[0]),
        max=int(sizes[-1]),
        median=float(np.median(sizes)),
        p90=float(np.quantile(sizes, 0.9)),
        share_top_1pct=top_share(sizes, 0.01),
        share_top_3pct=top_share(sizes, 0.03),
        tail_alpha=tail_alpha(sizes),
        offered_rho=rho,
        link_bps=link_bps if rho is not None else None,
        largest_gap_s=float(gaps[gap_at]) if len(gaps) else 0.0,
        largest_gap_at_s=float(arrivals[gap_at]) if len(gaps) else 0.0,
    )


def plot_ccdf(traces: dict[str, pd.DataFrame], path: str | os.PathLike) -> None:
    """Write the log-log CCDF of request sizes, F̄(x) = Pr{size > x} (000 Fig. 1),
    one curve per named trace."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6, 4.5))
    for label, trace in traces.items():
        sizes = np.sort(trace["size"].to_numpy(dtype=np.float64))
        n = len(sizes)
        # About 2000 points, spaced geometrically both in rank (the body) and in
        # distance from the largest (the tail).
        points = min(n, 1000)
        from_start = np.geomspace(1, n, num=points).astype(np.int64) - 1
        from_end = n - np.geomspace(1, n, num=points).astype(np.int64)
        index = np.unique(np.concatenate([from_start, from_end]).clip(0, n - 1))
        ccdf = 1.0 - (index + 1) / n
        keep = ccdf > 0
        axes.loglog(sizes[index][keep], ccdf[keep], label=label, linewidth=1.2)
    axes.set_xlabel("request size x (bytes)")
    axes.set_ylabel("Pr{size > x}")
    axes.set_title("Complementary CDF of request sizes")
    axes.grid(True, which="both", alpha=0.3)
    if len(traces) > 1:
        axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
