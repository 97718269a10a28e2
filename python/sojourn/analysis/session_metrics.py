"""Session metrics of 003 §5.2 over saved records and the stage pool's series.

Inputs are the per-request frame of :func:`sojourn.analysis.records.requests`
(one row per logical request) and, for queue lengths and the response-time
anatomy, the stage pool's ``series_csv`` (columns of
``sojourn_stages::pool::SERIES_COLUMNS``: ``t_s, stage, queue_length, completed,
late, dropped_waiting_room, dropped_deadline, queueing_s, processing_s``, and
since 27 Nov 2026 ``cpu_s`` and since 28 Nov 2026 ``weight`` (the dispatcher's share of
the stage at the sample), which older series lack and :data:`SERIES_COLUMNS` does not
require; cumulative except ``queue_length`` and ``weight``).

Definitions (003 §4.1, §5.2):

* a request *meets its bound* when its outcome is ``ok`` with status 200 and its
  response time is at most its class's delay bound (no bound given: any ``ok``);
* the *request timeout rate* of a class is the share of its finished requests
  (outcome not ``interrupted``) that did not meet their bound; the *drop rate* the
  share answered 503 (dropped by the server's dispatch policy);
* a session is *aborted* when one of its requests did not meet its bound;
* productivity in an interval is requests that met their bound minus requests that
  did not, by the time their outcome was known (``last_byte_s``).

The class of a request is its ``class`` column, or, with ``address_classes``, the
class of its client's source address: the load generator gives client ``c`` the
``c mod N``-th of its N ``--source-addrs``, and in session mode the client is the
session, so ``address_classes[k]`` is the class served to the k-th address.

All functions are pure (frames in, frames out).
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

SERIES_COLUMNS = ("t_s", "stage", "queue_length", "completed", "late", "dropped_waiting_room", "dropped_deadline",
                  "queueing_s", "processing_s")


def stage_of(paths: pd.Series) -> pd.Series:
    """The stage a ``/stage/<name>/...`` path names; empty for other paths."""
    return paths.astype("string").str.extract(r"^/stage/([^/?]+)", expand=False).fillna("")


def judge(requests: pd.DataFrame, delay_bounds: Mapping[int, float] | None = None,
          address_classes: Sequence[int] | None = None) -> pd.DataFrame:
    """``requests`` with ``class`` (re)derived and ``stage``, ``finished``,
    ``served`` (200 ``ok``), ``met_bound`` and ``dropped`` columns added."""
    frame = requests.copy()
    if address_classes is not None:
        if not address_classes:
            raise ValueError("address_classes is empty; expected the class of each source address")
        frame["class"] = np.asarray(address_classes)[frame["client"].to_numpy() % len(address_classes)]
    classes = frame["class"].to_numpy()
    if delay_bounds is not None:
        missing = sorted(set(int(c) for c in np.unique(classes)) - set(delay_bounds))
        if missing:
            raise ValueError(f"no delay bound for class(es) {missing}; delay_bounds has {sorted(delay_bounds)}")
        bound = np.array([delay_bounds[c] for c in classes], dtype=float)
    else:
        bound = np.full(len(frame), np.inf)
    outcome = frame["outcome"].astype("string")
    ok = (outcome == "ok") & (frame["status"] == 200)
    frame["stage"] = stage_of(frame["path"])
    frame["finished"] = (outcome != "interrupted").to_numpy()
    frame["served"] = ok.to_numpy()
    frame["met_bound"] = (ok & (frame["response_s"] <= bound)).to_numpy()
    frame["dropped"] = (frame["status"] == 503).to_numpy()
    return frame


def per_class(judged: pd.DataFrame) -> pd.DataFrame:
    """003 Tables 3-6 and Fig. 13 per class: requests, those served (200 ``ok``: §5.2's
    "number of completed requests"), mean response time of
    served requests (as 003 averages) and of those that met their
    bound, request timeout and drop rates, sessions and session abort rate."""
    finished = judged[judged["finished"]]
    rows = []
    for cls, group in finished.groupby("class", sort=True):
        sessions = group[group["session"] >= 0].groupby("session")["met_bound"].all()
        served = group[group["served"]]
        met = group[group["met_bound"]]
        rows.append({
            "class": int(cls),
            "requests": len(group),
            "served": int(len(served)),
            "response_mean_s": float(served["response_s"].mean()) if len(served) else float("nan"),
            "response_met_mean_s": float(met["response_s"].mean()) if len(met) else float("nan"),
            "timeout_rate": float(1 - group["met_bound"].mean()),
            "drop_rate": float(group["dropped"].mean()),
            "sessions": int(len(sessions)),
            "sessions_aborted": int((~sessions).sum()),
            "session_abort_rate": float((~sessions).mean()) if len(sessions) else float("nan"),
        })
    return pd.DataFrame(rows, columns=["class", "requests", "served", "response_mean_s", "response_met_mean_s", "timeout_rate", "drop_rate", "sessions",
                                       "sessions_aborted", "session_abort_rate"])


def overall(judged: pd.DataFrame) -> dict:
    """The same measures over all classes together."""
    everything = judged.assign(**{"class": 0})
    row = per_class(everything)
    return {} if row.empty else row.iloc[0].drop("class").to_dict()


def productivity_over_time(judged: pd.DataFrame, bin_s: float = 1.0) -> pd.DataFrame:
    """Per interval of ``bin_s`` seconds from the first scheduled request:
    ``completed`` (met their bound), ``aborted`` (did not) and ``productivity`` =
    completed − aborted (003 §4.1)."""
    if bin_s <= 0:
        raise ValueError(f"bin_s {bin_s}; expected seconds > 0")
    finished = judged[judged["finished"]]
    if finished.empty:
        return pd.DataFrame(columns=["t_s", "completed", "aborted", "productivity"])
    start = judged["scheduled_s"].min()
    # A request whose outcome has no last byte time counts at its scheduled time.
    at = finished["last_byte_s"].fillna(finished["scheduled_s"])
    bins = np.floor((at - start) / bin_s).astype(int)
    counts = pd.DataFrame({"bin": bins, "met": finished["met_bound"]}).groupby("bin")["met"].agg(["sum", "count"])
    index = np.arange(0, bins.max() + 1)
    counts = counts.reindex(index, fill_value=0)
    completed = counts["sum"].astype(int).to_numpy()
    aborted = (counts["count"] - counts["sum"]).astype(int).to_numpy()
    return pd.DataFrame({"t_s": index * bin_s, "completed": completed, "aborted": aborted,
                         "productivity": completed - aborted})


def read_series(path: str | Path) -> pd.DataFrame:
    """The stage pool's series CSV, checked for its columns."""
    frame = pd.read_csv(path, dtype={"stage": "string"})
    missing = [c for c in SERIES_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"{path}: missing column(s) {', '.join(missing)}; expected {', '.join(SERIES_COLUMNS)}")
    return frame


def queue_lengths(series: pd.DataFrame) -> pd.DataFrame:
    """Queue length of each stage over time (003 Figs. 11-12): index ``t_s``, one column per stage."""
    return series.pivot_table(index="t_s", columns="stage", values="queue_length", aggfunc="last").sort_index()


def anatomy(series: pd.DataFrame) -> pd.DataFrame:
    """Mean queueing and processing time per completed request of each stage over
    the whole series (003 Fig. 10, Table 7): the last cumulative sample over its
    completions."""
    last = series.sort_values("t_s").groupby("stage").last()
    completed = last["completed"].replace(0, np.nan)
    return pd.DataFrame({
        "completed": last["completed"].astype(int),
        "queueing_mean_s": last["queueing_s"] / completed,
        "processing_mean_s": last["processing_s"] / completed,
        "dropped": (last["dropped_waiting_room"] + last["dropped_deadline"]).astype(int),
        "dropped_waiting_room": last["dropped_waiting_room"].astype(int),
        "dropped_deadline": last["dropped_deadline"].astype(int),
        "late": last["late"].astype(int),
        # The CPU the stage's work burned in all, where the series has it: set against the
        # server's process CPU it leaves what the front end took (accepting, parsing, writing).
        "cpu_s": last["cpu_s"] if "cpu_s" in last else np.nan,
        # The mean sampled share, where the series has it (003 §4.2: DWFS's weights follow
        # the queue lengths and the timeout).
        "weight_mean": series.groupby("stage")["weight"].mean() if "weight" in series else np.nan,
    })


def summarize_directory(directory: str | Path, bin_s: float = 1.0) -> dict:
    """The session metrics of one repetition directory of `sojourn run` (JSON-ready):
    ``classes.json`` (class of each source address, delay bounds), ``records.csv`` and
    the pool's ``series.csv``. Keys: ``classes`` (per-class rows of :func:`per_class`
    with ``name``), ``overall``, ``productivity`` (per interval), ``anatomy`` (per
    stage), ``queue_lengths`` (``t_s`` and one list per stage), ``queue_mean`` (each stage's
    mean sampled queue length). Missing files give
    empty parts; NaN becomes None."""
    from sojourn.analysis.records import read_records, requests

    directory = Path(directory)
    info = json.loads((directory / "classes.json").read_text())
    names = info["class_names"]
    out: dict = {"class_names": names, "delay_bounds_s": info["delay_bounds_s"], "classes": [], "overall": {},
                 "productivity": [], "anatomy": [], "queue_lengths": {}, "queue_mean": {}}
    records = directory / "records.csv"
    if records.is_file() and records.stat().st_size > 0:
        # A generated model with classes makes the load generator record each request's
        # class; older results (and hand-written models) are classified by address.
        model = directory / "model.toml"
        recorded = model.is_file() and bool(tomllib.loads(model.read_text()).get("classes"))
        judged = judge(requests(read_records(records)), delay_bounds=dict(enumerate(info["delay_bounds_s"])),
                       address_classes=None if recorded else info["address_classes"])
        table = per_class(judged)
        table.insert(1, "name", [names[int(c)] for c in table["class"]])
        out["classes"] = table.to_dict("records")
        out["overall"] = overall(judged)
        out["productivity"] = productivity_over_time(judged, bin_s).to_dict("records")
    series = directory / "series.csv"
    if series.is_file() and series.stat().st_size > 0:
        frame = read_series(series)
        out["anatomy"] = anatomy(frame).reset_index().to_dict("records")
        lengths = queue_lengths(frame)
        out["queue_lengths"] = {"t_s": lengths.index.tolist(), **{str(c): lengths[c].tolist() for c in lengths}}
        out["queue_mean"] = {str(c): float(lengths[c].mean()) for c in lengths}  # Figs. 11-12 in one number
    return _json_ready(out)


def _json_ready(value):
    if isinstance(value, dict):
        return {str(k): _json_ready(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_ready(v) for v in value]
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return None if np.isnan(value) else float(value)
    return value
