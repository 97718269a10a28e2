"""Load shaping: persistent load, and the transient overloads of 000 §2.3 (Table 1).

Load is defined by the bottleneck (000 §2.2): rho = offered bytes per second / uplink
rate. A *profile* is a sequence of periods, each with a length and a target rho;
:func:`shape` fills each period with the next requests of the trace (in trace order,
sizes and paths unchanged) carrying exactly rho * link rate * length bytes, and spreads
them over the period by scaling their original inter-arrival times by one factor per
period, which is how 000 §2.3 obtains a load ("we divide all interarrival times by x").

Guarantees:

- Period boundaries are placed where the cumulative bytes are nearest the cumulative
  target, so errors never accumulate from period to period. Where a large request
  straddles a boundary, the smaller requests that follow it are pulled in front of it
  and it opens the next period, so a period misses its bytes by about one small
  request, not one large one (see ``_place_boundaries``). Each period's achieved rho is
  reported, never assumed.
- A time-compression factor c divides every period length by c and keeps every
  period's rho (short runs of the same shape, with c times fewer bytes per period).
- The result is a valid trace (non-decreasing arrivals starting at 0) plus a
  per-period table of target vs achieved rho.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterator

import numpy as np
import pandas as pd

from sojourn import papers

from .io import validate_trace



@dataclass(frozen=True)
class TransientProfile:
    """Alternating or intermittent overload (000 §2.3, Fig. 3): a cycle of a low-load
    period and an overload period, starting with the low period."""

    name: str
    kind: str  # "alternating" (equal lengths) or "intermittent" (rare spikes)
    low_s: float
    high_s: float
    low_rho: float
    high_rho: float

    def __post_init__(self) -> None:
        if self.kind not in ("alternating", "intermittent"):
            raise ValueError(f"profile {self.name}: kind must be alternating or intermittent, got {self.kind!r}")
        if self.low_s <= 0 or self.high_s <= 0 or self.low_rho <= 0 or self.high_rho <= 0:
            raise ValueError(f"profile {self.name}: period lengths and rho values must be > 0")

    @property
    def mean_rho(self) -> float:
        return (self.low_s * self.low_rho + self.high_s * self.high_rho) / (self.low_s + self.high_s)

    def periods(self) -> Iterator[tuple[str, float, float]]:
        """(phase, length_s, rho) forever, low first."""
        while True:
            yield "low", self.low_s, self.low_rho
            yield "high", self.high_s, self.high_rho


def alternating(low_s: float, high_s: float, low_rho: float, high_rho: float, name: str = "alternating") -> TransientProfile:
    return TransientProfile(name, "alternating", low_s, high_s, low_rho, high_rho)


def intermittent(low_s: float, high_s: float, low_rho: float, high_rho: float, name: str = "intermittent") -> TransientProfile:
    return TransientProfile(name, "intermittent", low_s, high_s, low_rho, high_rho)


# 000 Table 1 (sojourn/papers.toml): alternating and intermittent transient overload.
PROFILES: dict[str, TransientProfile] = {
    w["name"]: TransientProfile(w["name"], w["kind"], w["low_s"], w["high_s"], w["low_rho"], w["high_rho"])
    for w in papers.transient()
}


def profile_by_name(name: str) -> TransientProfile:
    try:
        return PROFILES[name.upper()]
    except KeyError:
        raise ValueError(f"unknown profile {name!r}; accepted: {', '.join(PROFILES)}") from None


INTERARRIVALS = ("scaled", "poisson")


def shape(
    trace: pd.DataFrame,
    link_bps: float,
    profile: TransientProfile | str | None = None,
    rho: float | None = None,
    time_compression: float = 1.0,
    seed: int = 0,
    duration_s: float | None = None,
    interarrivals: str = "scaled",
    cost: np.ndarray | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Shape ``trace`` to a profile (or to a persistent ``rho``) on a ``link_bps`` link.

    Returns ``(shaped_trace, periods)``; ``periods`` has one row per period with
    ``period, phase, start_s, end_s, target_rho, achieved_rho, requests, bytes``.
    Without ``duration_s`` the result holds as many whole periods as the trace's bytes
    fill (persistent: the whole trace in one period); with it, exactly that many seconds
    (of the compressed time line), or an error saying how many bytes are missing.
    ``time_compression`` divides the profile's period lengths (a persistent ``rho`` has
    one period, whose length follows from the bytes or ``duration_s``).
    ``interarrivals="poisson"`` redraws arrivals inside each period as a Poisson process
    (seeded) instead of scaling the trace's own inter-arrival times.
    ``cost`` gives the bytes each request puts on the link (default: its size), so rho
    can count what the link carries (:func:`wire_bytes`) rather than bodies alone;
    ``achieved_rho`` is then on that basis and ``bytes`` stays the bodies' bytes.
    """
    if (profile is None) == (rho is None):
        raise ValueError("give exactly one of profile (W1..W10 or a TransientProfile) or rho (persistent load)")
    if not link_bps > 0:
        raise ValueError(f"link_bps must be > 0, got {link_bps}")
    if not time_compression > 0:
        raise ValueError(f"time_compression must be > 0, got {time_compression}")
    if interarrivals not in INTERARRIVALS:
        raise ValueError(f"unknown interarrivals {interarrivals!r}; accepted: {', '.join(INTERARRIVALS)}")
    validate_trace(trace, source="trace to shape")
    if len(trace) == 0:
        raise ValueError("the trace to shape is empty")
    bodies = trace["size"].to_numpy(dtype=np.float64)
    sizes = bodies if cost is None else np.asarray(cost, dtype=np.float64)
    if sizes.shape != bodies.shape or not np.all(sizes >= bodies):
        raise ValueError("cost must give each request's bytes on the link, at least its size")
    cumulative = np.cumsum(sizes)
    total_bytes = cumulative[-1]
    bytes_per_s = link_bps / 8.0

    if isinstance(profile, str):
        profile = profile_by_name(profile)
    if profile is None:
        if not rho > 0:
            raise ValueError(f"rho must be > 0, got {rho}")
        length = duration_s if duration_s is not None else total_bytes / (rho * bytes_per_s)
        phases, lengths, rhos = ["persistent"], np.array([length]), np.array([rho])
    else:
        phases, lengths, rhos = _profile_periods(profile, time_compression, total_bytes, bytes_per_s, duration_s)
    target_end = np.cumsum(rhos * bytes_per_s * lengths)
    if target_end[-1] > total_bytes * (1 + 1e-9) and duration_s is not None:
        raise ValueError(
            f"the trace holds {total_bytes:.0f} bytes but {duration_s} s of this profile needs "
            f"{target_end[-1]:.0f}: generate or import a longer trace"
        )
    order, boundaries = _place_boundaries(sizes, target_end, np.diff(np.concatenate([[0.0], target_end])))
    sizes = sizes[order]
    cumulative = np.cumsum(sizes)
    used = int(boundaries[-1])
    period_of = np.repeat(np.arange(len(lengths)), np.diff(boundaries))
    starts = np.concatenate([[0.0], np.cumsum(lengths)[:-1]])

    original = trace["arrival_s"].to_numpy(dtype=np.float64)
    if interarrivals == "scaled":
        mean_gap = (original[-1] - original[0]) / max(len(original) - 1, 1)
        first = original[boundaries[:-1].clip(max=len(original) - 1)]
        following = np.where(boundaries[1:] < len(original), original[boundaries[1:].clip(max=len(original) - 1)], original[-1] + mean_gap)
        span = following - first
        offset = original[:used] - first[period_of]
        fraction = np.divide(offset, span[period_of], out=np.zeros(used), where=span[period_of] > 0)
        # Equal original timestamps (span 0) are spread evenly over the period instead.
        even = (np.arange(used) - boundaries[period_of]) / np.maximum(np.diff(boundaries), 1)[period_of]
        fraction = np.where(span[period_of] > 0, fraction, even)
    else:
        rng = np.random.default_rng(seed)
        fraction = rng.random(used)
        fraction = fraction[np.lexsort((fraction, period_of))]
    arrival = starts[period_of] + fraction * lengths[period_of]
    arrival = np.maximum.accumulate(arrival)  # float rounding at period edges

    shaped = trace.iloc[order[:used]].reset_index(drop=True)
    shaped["arrival_s"] = arrival
    bytes_before = np.concatenate([[0.0], cumulative])
    period_load = bytes_before[boundaries[1:]] - bytes_before[boundaries[:-1]]
    bodies_before = np.concatenate([[0.0], np.cumsum(bodies[order[:used]])])
    period_bytes = bodies_before[boundaries[1:]] - bodies_before[boundaries[:-1]]
    periods = pd.DataFrame(
        {
            "period": np.arange(len(lengths)),
            "phase": phases,
            "start_s": starts,
            "end_s": starts + lengths,
            "target_rho": rhos,
            "achieved_rho": period_load * 8.0 / (link_bps * lengths),
            "requests": np.diff(boundaries),
            "bytes": period_bytes.astype(np.int64),
        }
    )
    return shaped, periods


# An Ethernet frame of a full-sized segment (1500-byte MTU): 14 bytes of Ethernet header,
# 20 of IP, 20 of TCP and 12 of timestamps (RFC 7323) around 1448 bytes of payload.
FRAME_BYTES = 1514


def wire_bytes(sizes: np.ndarray, per_request: float, segment_payload: int = 1448) -> np.ndarray:
    """Bytes the uplink carries for responses of ``sizes``: the bodies, the headers of
    the frames that carry them, and ``per_request`` bytes besides (the response head and
    the packets that carry no body: SYN-ACK, the request's ACK, the FIN's ACK).

    000 §2.3 sets load by the measured bandwidth utilization of the uplink, which counts
    all of these; shaping on bodies alone offers about 15% more than the named rho on
    WC98-like sizes (a run's counters show it: ``offered_wire_rho`` in its summary)."""
    sizes = np.asarray(sizes, dtype=np.float64)
    frames = np.ceil(sizes / segment_payload)
    return sizes + (FRAME_BYTES - segment_payload) * frames + per_request


# A boundary is left where it falls when the request straddling it is this small a
# share of the period's bytes; otherwise smaller requests are pulled forward past it.
SMALL_SHARE = 0.005
# How far ahead (in requests) smaller requests are looked for.
REFILL_WINDOW = 4096


def _place_boundaries(sizes: np.ndarray, target_end: np.ndarray, budgets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Request order and period boundaries such that the bytes before each boundary are
    as near its cumulative target as the request sizes allow.

    Trace order is kept except where a large request straddles a boundary: then the
    smaller requests that follow it (up to ``REFILL_WINDOW`` ahead) and fit the remaining
    budget are moved before it, and it opens the next period. A request moves by at
    most one boundary and a few positions; the set of requests is unchanged. One
    iteration per period (vectorized inside), so this is cheap even for millions of
    requests.
    """
    n = len(sizes)
    order = np.arange(n)
    cumulative = np.cumsum(sizes)
    boundaries = [0]
    # The tolerance at a boundary is relative to the smaller of the two periods it separates.
    tolerances = SMALL_SHARE * np.minimum(budgets, np.concatenate([budgets[1:], budgets[-1:]]))
    for target, tolerance in zip(target_end, tolerances):
        straddler = int(np.searchsorted(cumulative, target, side="right"))
        if straddler >= n:
            boundaries.append(n)
            continue
        before = cumulative[straddler - 1] if straddler > 0 else 0.0
        deficit, excess = target - before, cumulative[straddler] - target
        if min(deficit, excess) <= tolerance:
            boundaries.append(straddler if deficit <= excess else straddler + 1)
            continue
        window = slice(straddler + 1, min(straddler + 1 + REFILL_WINDOW, n))
        following = order[window]
        candidate_sizes = sizes[following]
        taken = np.zeros(len(following), dtype=bool)
        remaining = deficit
        while remaining > tolerance:
            fits = ~taken & (candidate_sizes <= remaining)
            more = fits & (np.cumsum(np.where(fits, candidate_sizes, 0.0)) <= remaining)
            if not more.any():
                break
            taken |= more
            remaining = deficit - candidate_sizes[taken].sum()
        moved = np.concatenate([following[taken], [order[straddler]], following[~taken]])
        order[straddler : window.stop] = moved
        cumulative[straddler : window.stop] = before + np.cumsum(sizes[moved])
        boundaries.append(straddler + int(taken.sum()))
    return order, np.maximum.accumulate(np.array(boundaries))


def _profile_periods(
    profile: TransientProfile, compression: float, total_bytes: float, bytes_per_s: float, duration_s: float | None
) -> tuple[list[str], np.ndarray, np.ndarray]:
    """The periods of ``profile`` (lengths divided by ``compression``): up to
    ``duration_s`` if given (the last period cut short), else every whole period whose
    bytes the trace can fill."""
    phases: list[str] = []
    lengths: list[float] = []
    rhos: list[float] = []
    elapsed = needed = 0.0
    for phase, length, rho in profile.periods():
        length /= compression
        if duration_s is not None:
            if elapsed >= duration_s - 1e-9:
                break
            length = min(length, duration_s - elapsed)
        elif needed + rho * bytes_per_s * length > total_bytes:
            break
        phases.append(phase)
        lengths.append(length)
        rhos.append(rho)
        elapsed += length
        needed += rho * bytes_per_s * length
    if not phases:
        first_phase, first_length, first_rho = next(profile.periods())
        raise ValueError(
            f"the trace holds {total_bytes:.0f} bytes, less than the first {first_phase} period of "
            f"{profile.name} needs ({first_rho * bytes_per_s * first_length / compression:.0f}): "
            "generate or import a longer trace"
        )
    return phases, np.array(lengths), np.array(rhos)


def timeline(profile: TransientProfile, duration_s: float, time_compression: float = 1.0) -> pd.DataFrame:
    """The periods of ``profile`` covering ``duration_s`` (lengths divided by
    ``time_compression``, the last one cut short), as :func:`shape`'s table has them
    (period, phase, start_s, end_s, target_rho), for a load made without a trace: session
    arrivals whose rate follows the profile."""
    phases, lengths, rhos = _profile_periods(profile, time_compression, math.inf, 0.0, duration_s)
    starts = np.concatenate([[0.0], np.cumsum(lengths)[:-1]])
    return pd.DataFrame({"period": np.arange(len(lengths)), "phase": phases, "start_s": starts,
                         "end_s": starts + lengths, "target_rho": rhos})


def overload_spans(periods: list[dict]) -> list[tuple[float, float]]:
    """(start, end) of each stretch of consecutive periods (rows of :func:`shape`'s or
    :func:`timeline`'s table) whose target rho exceeds 1: the overloads of 000 §2.3."""
    spans: list[tuple[float, float]] = []
    for period in periods:
        if float(period.get("target_rho", 0)) <= 1.0:
            continue
        start, end = float(period["start_s"]), float(period["end_s"])
        if spans and spans[-1][1] == start:
            spans[-1] = (spans[-1][0], end)
        else:
            spans.append((start, end))
    return spans


def cycles_needed_bytes(profile: TransientProfile, link_bps: float, cycles: float, time_compression: float = 1.0) -> float:
    """Bytes a trace must hold for ``cycles`` cycles of ``profile``: useful to size
    :func:`sojourn.workloads.models.make_trace` before shaping."""
    cycle_s = (profile.low_s + profile.high_s) / time_compression
    return profile.mean_rho * link_bps / 8.0 * cycle_s * cycles


def requests_for(profile: TransientProfile, link_bps: float, mean_size: float, cycles: float, time_compression: float = 1.0) -> int:
    """Requests of mean size ``mean_size`` needed for ``cycles`` cycles, with 10 % spare."""
    return int(math.ceil(cycles_needed_bytes(profile, link_bps, cycles, time_compression) / mean_size * 1.1)) + 100
