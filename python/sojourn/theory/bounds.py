"""Ideal references for a measured run: the same arrivals and sizes on a fluid link.

:func:`ideal` replays a run's own requests (their first scheduled times and expected
sizes) through ``sojourn-engine sim`` at the run's bottleneck rate under ideal processor
sharing (what FAIR approximates) and ideal preemptive SRPT, and returns one row per
request and policy. A report divides measured response times by these to get
"measured / ideal" ratios; no real server can beat ideal SRPT's mean response time on
the same arrivals (SRPT minimizes mean response time on one link, 004 §6), so
``measured / srpt`` >= 1 on average is a bound, while ``measured / ps`` shows how close a
FAIR server comes to fluid sharing.

Guarantees: deterministic (no randomness: the arrivals are the run's); ``request_id``
and the time base of the input are kept; one output row per input request and policy.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import pandas as pd

from sojourn.engine import engine_path

POLICIES = ("ps", "srpt")

# A full-sized TCP segment carries 1460 payload bytes in a 1514-byte Ethernet frame, 1448
# with the timestamp option (RFC 7323, 12 bytes), and the uplink shaper counts frames:
# response bodies cross a link of nominal rate R at R * 1448/1514 at best.
FRAME_BYTES = 1514


def segment_payload(timestamps: bool = True, mtu: int = 1500) -> int:
    """Payload bytes of a full-sized segment (the MSS) at ``mtu``, the testbed's 1500 bytes
    unless a client group sets another: 40 bytes of IP and TCP headers, 12 more with timestamps."""
    return mtu - 40 - 12 * timestamps


def body_rate_bps(link_bps: float, timestamps: bool = True) -> float:
    """The best rate at which response bodies cross a link shaped to ``link_bps`` (frames)."""
    return link_bps * segment_payload(timestamps) / FRAME_BYTES
COLUMNS = ["request_id", "policy", "scheduled_s", "size", "first_byte_s", "last_byte_s", "response_s", "slowdown"]


def _requests(records_or_trace: pd.DataFrame | str | Path) -> pd.DataFrame:
    """One row per logical request: request_id, arrival (scheduled_s) and size."""
    frame = records_or_trace
    if not isinstance(frame, pd.DataFrame):
        frame = pd.read_csv(frame, keep_default_na=False, na_values=[""])
    if {"arrival_s", "size"} <= set(frame.columns):  # a trace (docs/formats.md)
        return pd.DataFrame({"request_id": range(len(frame)), "scheduled_s": frame["arrival_s"].to_numpy(float),
                             "size": frame["size"].to_numpy(float)})
    if {"request_id", "scheduled_s"} <= set(frame.columns):  # records (docs/formats.md)
        size = frame["expected_size"] if "expected_size" in frame.columns else frame["bytes"]
        if "bytes" in frame.columns:
            size = size.fillna(frame["bytes"])
        rows = pd.DataFrame({"request_id": frame["request_id"], "scheduled_s": frame["scheduled_s"].astype(float),
                             "size": size.astype(float)})
        rows = rows.dropna().drop_duplicates("request_id", keep="first")
        return rows.reset_index(drop=True)
    raise ValueError("ideal() needs records (request_id, scheduled_s, expected_size or bytes) "
                     "or a trace (arrival_s, size); got columns " + ", ".join(map(str, frame.columns)))


def ideal(records_or_trace: pd.DataFrame | str | Path, link_bps: float,
          policies: tuple[str, ...] = POLICIES) -> pd.DataFrame:
    """Ideal fluid schedules of a run's requests on a link of ``link_bps`` bits/s.

    ``records_or_trace``: a records DataFrame or ``records.csv`` path (one request per
    ``request_id``; its ``scheduled_s`` and ``expected_size``, else ``bytes``), or a trace
    DataFrame/``trace.csv`` path (``arrival_s``, ``size``; request_id = row number).
    ``policies``: any of ``ps``, ``srpt``, ``las``, ``fcfs``, ``bands``.

    Returns a long DataFrame with columns ``request_id, policy, scheduled_s, size,
    first_byte_s, last_byte_s, response_s, slowdown`` (times in the input's time base;
    slowdown = response / (size / link rate), NaN for empty responses).
    """
    if not link_bps > 0:
        raise ValueError(f"link_bps must be a positive rate in bits/s, got {link_bps!r}")
    requests = _requests(records_or_trace).sort_values(["scheduled_s", "request_id"], kind="stable")
    if requests.empty:
        return pd.DataFrame(columns=COLUMNS)
    origin = float(requests["scheduled_s"].min())
    frames = []
    with tempfile.TemporaryDirectory(prefix="sojourn-ideal-") as tmp:
        trace = Path(tmp) / "trace.csv"
        pd.DataFrame({"arrival_s": (requests["scheduled_s"] - origin).map(lambda t: f"{t:.6f}"), "client": 0,
                      "path": "/", "size": requests["size"].round().astype("int64")}).to_csv(trace, index=False)
        for policy in policies:
            out = Path(tmp) / policy
            subprocess.run([str(engine_path()), "sim", "--trace", str(trace), "--link", repr(float(link_bps)),
                            "--policy", policy, "--size-bins", "0", "--out", str(out)],
                           check=True, capture_output=True, text=True)
            sim = pd.read_csv(out / "records.csv", usecols=["request_id", "first_byte_s", "last_byte_s"])
            frame = pd.DataFrame({
                "request_id": requests["request_id"].to_numpy(),
                "policy": policy,
                "scheduled_s": requests["scheduled_s"].to_numpy(),
                "size": requests["size"].to_numpy(),
                "first_byte_s": sim["first_byte_s"].to_numpy() + origin,
                "last_byte_s": sim["last_byte_s"].to_numpy() + origin,
            })
            frame["response_s"] = frame["last_byte_s"] - frame["scheduled_s"]
            service = frame["size"] * 8.0 / link_bps
            frame["slowdown"] = (frame["response_s"] / service).where(service > 0)
            frames.append(frame)
    return pd.concat(frames, ignore_index=True)[COLUMNS]


def ratios(measured: pd.DataFrame, ideal_frame: pd.DataFrame) -> pd.DataFrame:
    """"Measured / ideal" per policy over the requests that completed in the run.

    ``measured``: one row per request with ``request_id`` and ``response_s`` (NaN for
    requests that did not complete, as ``sojourn.analysis.records.requests`` gives);
    ``ideal_frame``: the result of :func:`ideal`. Returns one row per ideal policy with
    ``requests``, ``measured_mean_response_s``, ``ideal_mean_response_s``,
    ``ratio_of_means`` and ``mean_ratio`` (mean of the per-request ratios).
    """
    done = measured.loc[measured["response_s"].notna(), ["request_id", "response_s"]]
    rows = []
    for policy, frame in ideal_frame.groupby("policy", sort=False):
        joined = done.merge(frame[["request_id", "response_s"]], on="request_id", suffixes=("", "_ideal"))
        joined = joined[joined["response_s_ideal"] > 0]
        rows.append({"policy": policy, "requests": len(joined),
                     "measured_mean_response_s": float(joined["response_s"].mean()),
                     "ideal_mean_response_s": float(joined["response_s_ideal"].mean()),
                     "ratio_of_means": float(joined["response_s"].mean() / joined["response_s_ideal"].mean()),
                     "mean_ratio": float((joined["response_s"] / joined["response_s_ideal"]).mean())})
    return pd.DataFrame(rows)


def summary(ideal_frame: pd.DataFrame) -> dict[str, float]:
    """Mean ideal response time per policy, e.g. ``{"ps": 0.41, "srpt": 0.12}``."""
    return {str(k): float(v) for k, v in ideal_frame.groupby("policy")["response_s"].mean().items()}
