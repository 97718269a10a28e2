"""Where a measured response time goes, and how far it is from the ideal schedule of the
same arrivals (issue 14: "SRPT against its ideal").

Each completed request's response time (``last_byte_s - scheduled_s``) is split into four
consecutive phases read off its record (docs/formats.md), which add up to it exactly:

- ``client_wait``: scheduled to the attempt reaching the network (``connect_start_s``, or
  ``sent_s`` on a reused connection): the generator's lag and a client's full connection
  pool (both should be ~0 in an open-loop run);
- ``handshake``: ``connect_start_s`` to ``connect_end_s``: the TCP handshake, with any SYN
  retransmission after a full SYN queue (000 §5);
- ``to_first_byte``: request sent to the first response byte: the accept queue, the server's
  queue before its first write, and one round trip;
- ``transfer``: first to last byte: the socket buffer, the uplink queue and TCP (slow
  start, loss recovery) for the rest of the body.

:func:`against_ideal` puts this beside the ideal fluid schedule of the same requests
(``ideal.parquet``, sojourn.theory.bounds.ideal) per size bin: the measured mean, the ideal
mean, their ratio, and how much of the excess each phase holds.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

PHASES = ("client_wait", "handshake", "to_first_byte", "transfer")


def phases(requests: pd.DataFrame) -> pd.DataFrame:
    """One row per completed request: ``request_id``, ``size``, ``response_s`` and the
    seconds of each phase of :data:`PHASES` (they sum to ``response_s``)."""
    done = requests[requests["completed"]]
    on_wire = done["connect_start_s"].where(done["connect_start_s"].notna(), done["sent_s"])
    connected = done["connect_end_s"].where(done["connect_end_s"].notna(), on_wire)
    return pd.DataFrame({
        "request_id": done["request_id"].to_numpy(),
        "size": done["size"].to_numpy(),
        "response_s": done["response_s"].to_numpy(),
        "client_wait": (on_wire - done["scheduled_s"]).to_numpy(),
        "handshake": (connected - on_wire).to_numpy(),
        "to_first_byte": (done["first_byte_s"] - connected).to_numpy(),
        "transfer": (done["last_byte_s"] - done["first_byte_s"]).to_numpy(),
    })


# The size cutoffs of 000 §3, so bins and kernel bands coincide.
SIZE_EDGES = (1024, 2048, 5120, 51200)


def size_bins(sizes: np.ndarray, edges: tuple[float, ...] = SIZE_EDGES) -> np.ndarray:
    """Bin index of each size: below 1K, 1-2K, 2-5K, 5-50K, above 50K by default."""
    return np.searchsorted(np.asarray(edges), sizes, side="right")


def by_size_bin(frame: pd.DataFrame, edges: tuple[float, ...] = SIZE_EDGES):
    """(label, rows) for each size bin of ``frame["size"]`` in order ("<1K" ... ">=50K" for
    the default edges, "bin i" otherwise), then ("all", frame); a bin may be empty."""
    labels = ["<1K", "1K-2K", "2K-5K", "5K-50K", ">=50K"] if len(edges) == 4 else \
        [f"bin {i}" for i in range(len(edges) + 1)]
    index = size_bins(frame["size"].to_numpy(float), edges)
    return [(label, frame[index == i]) for i, label in enumerate(labels)] + [("all", frame)]


def against_ideal(requests: pd.DataFrame, ideal: pd.DataFrame, policy: str = "srpt",
                  edges: tuple[float, ...] = SIZE_EDGES) -> pd.DataFrame:
    """Per size bin (and ``all``): requests, measured and ideal mean response time, their
    ratio, the mean of each phase, and each phase's share of the excess over the ideal
    (phase mean minus its ideal counterpart: the ideal's whole response is counted as
    ``transfer``, the ideal has no handshake or queue before its first byte)."""
    measured = phases(requests)
    schedule = ideal[ideal["policy"] == policy][["request_id", "response_s"]].rename(
        columns={"response_s": "ideal_s"})
    joined = measured.merge(schedule, on="request_id", how="inner")
    if joined.empty:
        raise ValueError(f"no completed request has an ideal {policy!r} schedule (policies in the file: "
                         f"{', '.join(sorted(ideal['policy'].unique()))})")
    rows = []
    for label, group in by_size_bin(joined, edges):
        if group.empty:
            continue
        measured_mean, ideal_mean = group["response_s"].mean(), group["ideal_s"].mean()
        excess = measured_mean - ideal_mean
        row = {"size_bin": label, "requests": len(group), "measured_mean_s": measured_mean,
               "ideal_mean_s": ideal_mean, "ratio": measured_mean / ideal_mean if ideal_mean > 0 else np.nan}
        for phase in PHASES:
            mean = group[phase].mean()
            row[f"{phase}_s"] = mean
            over = mean - (ideal_mean if phase == "transfer" else 0.0)
            row[f"{phase}_excess_share"] = over / excess if excess > 0 else np.nan
        rows.append(row)
    return pd.DataFrame(rows)
