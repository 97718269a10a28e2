"""Reading per-request records (docs/formats.md) and deriving per-request quantities.

Guarantees: :func:`read_records` returns every column of the contract with its dtype
(absent optional columns filled as unknown), rejects a file missing a required column
by naming it, and :func:`requests` returns exactly one row per logical request (the
``final`` attempt) with the derived times of docs/formats.md:

* ``response_s`` = ``last_byte_s`` of the final attempt − ``scheduled_s`` (measured from
  the first scheduled time, so no coordinated omission); NaN unless the request completed;
* ``ttfb_s`` = ``first_byte_s`` − ``scheduled_s`` of the final attempt (NaN unless completed);
* ``service_s`` = ``last_byte_s`` − ``sent_s``; ``lag_s`` = generator lag of attempt 0:
  ``issued_s`` − ``scheduled_s`` when the records have ``issued_s`` (when the generator took
  the request up), else ``dispatch_s`` − ``scheduled_s``. ``dispatch_s`` also includes the
  wait for a free connection of the client, which is response time, not generator lateness;
* ``size`` = ``expected_size`` where known, else the bytes received;
* ``completed`` (outcome ``ok``), ``attempts``, ``bytes_all_attempts`` (body bytes that
  crossed the link for this request, aborted attempts included).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

REQUIRED = ("request_id", "final", "scheduled_s", "last_byte_s", "outcome")

DTYPES = {
    "request_id": "int64", "attempt": "int64", "final": "int64", "client": "int64", "session": "int64",
    "class": "int64", "path": "string", "expected_size": "float64", "bytes": "float64", "status": "float64",
    "scheduled_s": "float64", "issued_s": "float64", "dispatch_s": "float64", "connect_start_s": "float64", "connect_end_s": "float64",
    "conn_id": "float64", "reuse_index": "float64", "sent_s": "float64", "first_byte_s": "float64",
    "last_byte_s": "float64", "outcome": "string", "error": "string",
}
DEFAULTS = {"attempt": 0, "client": 0, "session": -1, "class": 0}
# records.parquet keeps these columns' integer types (docs/formats.md), nullable where the
# CSV field is empty; read_records gives them back as float64, the type the analysis's
# NaN arithmetic wants.
STORED_INTEGERS = {"expected_size": "UInt64", "bytes": "UInt64", "status": "UInt16", "conn_id": "UInt64",
                   "reuse_index": "UInt32"}

OUTCOMES = ("ok", "http_error", "refused", "aborted", "gave_up", "connect_error", "reset", "timeout", "invalid", "interrupted")
# Final outcomes that are failures of the server or network rather than the user giving up
# (``refused``, a 503 under overload, is the server's choice: counted apart).
ERROR_OUTCOMES = ("http_error", "connect_error", "reset", "timeout", "invalid")


# intervals.csv (docs/formats.md "Interval series"): one row per second, all counts.
INTERVAL_DTYPES = {"t_s": "int64", "issued": "int64", "completed": "int64", "bytes": "int64", "in_flight": "int64",
                   "errors": "int64", "connections_open": "int64"}


class RecordsError(ValueError):
    """A records file that does not follow docs/formats.md."""


def read_records(path: str | Path) -> pd.DataFrame:
    """All attempts of ``records.csv`` (or ``.parquet``) with contract dtypes."""
    path = Path(path)
    if path.suffix == ".parquet":
        frame = pd.read_parquet(path)
    else:
        frame = pd.read_csv(path, dtype={"path": "string", "outcome": "string", "error": "string"},
                            keep_default_na=False, na_values={c: [""] for c in DTYPES if c not in ("path", "outcome", "error")})
    return normalize(frame, source=str(path))


def to_stored(records: pd.DataFrame) -> pd.DataFrame:
    """``records`` (as :func:`read_records` returns them) with the types records.parquet stores."""
    return records.astype(STORED_INTEGERS)


def read_intervals(path: str | Path) -> pd.DataFrame:
    """``intervals.csv`` (or ``.parquet``) with the documented integer columns."""
    path = Path(path)
    frame = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
    return frame.astype({c: t for c, t in INTERVAL_DTYPES.items() if c in frame.columns})


def normalize(frame: pd.DataFrame, source: str = "records") -> pd.DataFrame:
    """Checks the required columns and gives every contract column its dtype."""
    missing = [c for c in REQUIRED if c not in frame.columns]
    if missing:
        raise RecordsError(f"{source}: missing required column(s) {', '.join(missing)}; see docs/formats.md")
    frame = frame.copy()
    for column, dtype in DTYPES.items():
        if column not in frame.columns:
            frame[column] = DEFAULTS.get(column, pd.NA if dtype == "string" else np.nan)
        if dtype == "string":
            frame[column] = frame[column].astype("string").fillna("")
        elif dtype == "int64":
            frame[column] = pd.to_numeric(frame[column], errors="raise").fillna(DEFAULTS.get(column, 0)).astype("int64")
        else:
            frame[column] = pd.to_numeric(frame[column], errors="raise").astype("float64")
    unknown = sorted(set(frame["outcome"].unique()) - set(OUTCOMES))
    if unknown:
        raise RecordsError(f"{source}: unknown outcome(s) {', '.join(unknown)}; accepted: {', '.join(OUTCOMES)}")
    return frame


def requests(records: pd.DataFrame) -> pd.DataFrame:
    """One row per logical request (its final attempt) with derived columns, sorted by
    ``scheduled_s``. Raises if a request has no final attempt or more than one."""
    finals = records[records["final"] == 1]
    duplicated = finals["request_id"].duplicated()
    if duplicated.any():
        raise RecordsError(f"request_id {int(finals['request_id'][duplicated].iloc[0])} has more than one final attempt")
    if len(finals) != records["request_id"].nunique():
        lost = np.setdiff1d(records["request_id"].unique(), finals["request_id"].to_numpy())
        raise RecordsError(f"request_id {int(lost[0])} has no final attempt")
    first = records.sort_values("attempt").drop_duplicates("request_id").set_index("request_id")
    out = finals.set_index("request_id").copy()
    per_request = records.groupby("request_id")
    out["attempts"] = per_request.size()
    out["bytes_all_attempts"] = per_request["bytes"].sum()
    # docs/formats.md: issued_s is optional; without it dispatch_s is the best estimate.
    taken_up = first["issued_s"].where(first["issued_s"].notna(), first["dispatch_s"])
    out["lag_s"] = taken_up - first["scheduled_s"]
    out = out.reset_index()
    completed = (out["outcome"] == "ok").to_numpy()
    out["completed"] = completed
    out["response_s"] = np.where(completed, out["last_byte_s"] - out["scheduled_s"], np.nan)
    out["ttfb_s"] = np.where(completed, out["first_byte_s"] - out["scheduled_s"], np.nan)
    out["service_s"] = out["last_byte_s"] - out["sent_s"]
    out["size"] = out["expected_size"].where(out["expected_size"].notna(), out["bytes"])
    return out.sort_values(["scheduled_s", "request_id"], kind="stable").reset_index(drop=True)
