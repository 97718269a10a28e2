"""Session metrics (003 §5.2) on hand-made records and a stage series."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from sojourn.analysis import session_metrics as sessions
from sojourn.analysis.records import normalize, requests


def records(rows):
    """rows: (request_id, session, client, path, status, outcome, scheduled_s, last_byte_s)."""
    frame = pd.DataFrame(rows, columns=["request_id", "session", "client", "path", "status", "outcome", "scheduled_s",
                                        "last_byte_s"])
    frame["final"] = 1
    return requests(normalize(frame)).sort_values("request_id").reset_index(drop=True)


ROWS = [
    # session 0 (client 0): two requests in time
    (0, 0, 0, "/stage/MM/1", 200, "ok", 0.0, 0.5),
    (1, 0, 0, "/stage/SR/2", 200, "ok", 1.0, 1.8),
    # session 1 (client 1): one in time, one too slow for a 1 s bound
    (2, 1, 1, "/stage/MM/1", 200, "ok", 0.2, 0.4),
    (3, 1, 1, "/stage/CO/1", 200, "ok", 1.2, 2.7),
    # session 2 (client 2): dropped by the server (503)
    (4, 2, 2, "/stage/BR/9", 503, "http_error", 2.0, 2.1),
    # session 3 (client 3): still running at the end
    (5, 3, 3, "/stage/MM/1", None, "interrupted", 2.5, None),
]


def test_judging_and_per_class_by_address():
    # Two source addresses: even clients gold (class 0, bound 1 s), odd silver (class 1, bound 2 s).
    judged = sessions.judge(records(ROWS), delay_bounds={0: 1.0, 1: 2.0}, address_classes=[0, 1])
    assert list(judged["stage"]) == ["MM", "SR", "MM", "CO", "BR", "MM"]
    # Request 3 took 1.5 s: within silver's 2 s bound.
    assert list(judged["met_bound"]) == [True, True, True, True, False, False]
    table = sessions.per_class(judged).set_index("class")
    gold, silver = table.loc[0], table.loc[1]
    assert (gold["requests"], gold["served"], gold["sessions"], gold["sessions_aborted"]) == (3, 2, 2, 1)
    assert gold["timeout_rate"] == pytest.approx(1 / 3)
    assert gold["drop_rate"] == pytest.approx(1 / 3)
    assert gold["response_mean_s"] == pytest.approx((0.5 + 0.8) / 2)
    assert gold["response_met_mean_s"] == pytest.approx((0.5 + 0.8) / 2)
    assert (silver["requests"], silver["served"], silver["sessions"], silver["session_abort_rate"]) == (2, 2, 1, 0.0)
    assert silver["response_mean_s"] == pytest.approx((0.2 + 1.5) / 2)
    # With one 1 s bound for all, request 3 (1.5 s) was served but missed it.
    one = sessions.per_class(sessions.judge(records(ROWS), delay_bounds={0: 1.0, 1: 1.0}, address_classes=[0, 1]))
    assert one.set_index("class").loc[1, "response_met_mean_s"] == pytest.approx(0.2)


def test_one_bound_for_all_and_overall():
    judged = sessions.judge(records(ROWS), delay_bounds={0: 1.0})
    assert list(judged["met_bound"]) == [True, True, True, False, False, False]
    summary = sessions.overall(judged)
    assert summary["requests"] == 5 and summary["sessions"] == 3 and summary["sessions_aborted"] == 2
    assert summary["timeout_rate"] == pytest.approx(2 / 5)


def test_productivity_over_time():
    judged = sessions.judge(records(ROWS), delay_bounds={0: 1.0})
    series = sessions.productivity_over_time(judged, bin_s=1.0)
    # Outcomes at 0.5, 1.8, 0.4 (met), 2.7, 2.1 (not): bins 0: +2, 1: +1, 2: -2.
    assert list(series["completed"]) == [2, 1, 0]
    assert list(series["aborted"]) == [0, 0, 2]
    assert list(series["productivity"]) == [2, 1, -2]
    with pytest.raises(ValueError, match="bin_s"):
        sessions.productivity_over_time(judged, bin_s=0)


def test_missing_bound_is_named():
    with pytest.raises(ValueError, match=r"no delay bound for class\(es\) \[1\]"):
        sessions.judge(records(ROWS), delay_bounds={0: 1.0}, address_classes=[0, 1])


def test_series_queue_lengths_and_anatomy(tmp_path):
    path = tmp_path / "series.csv"
    path.write_text(
        ",".join(sessions.SERIES_COLUMNS) + "\n"
        "0.5,MM,3,10,0,0,0,1.0,0.05\n"
        "0.5,CO,1,2,0,0,0,0.5,0.02\n"
        "1.5,MM,0,20,1,2,1,3.0,0.10\n"
        "1.5,CO,4,2,0,0,0,0.5,0.02\n"
    )
    series = sessions.read_series(path)
    queues = sessions.queue_lengths(series)
    assert list(queues.columns) == ["CO", "MM"]
    assert queues.loc[1.5, "CO"] == 4 and queues.loc[0.5, "MM"] == 3
    parts = sessions.anatomy(series)
    assert parts.loc["MM", "queueing_mean_s"] == pytest.approx(3.0 / 20)
    assert parts.loc["MM", "processing_mean_s"] == pytest.approx(0.10 / 20)
    assert parts.loc["MM", "dropped"] == 3
    assert parts["weight_mean"].isna().all()  # a series from before 28 Nov 2026 has no weights
    assert parts["cpu_s"].isna().all()  # nor the stages' CPU
    weighted = tmp_path / "weighted.csv"
    weighted.write_text("t_s,stage,queue_length,completed,late,dropped_waiting_room,dropped_deadline,queueing_s,"
                        "processing_s,cpu_s,weight\n"
                        "0.5,MM,3,10,0,0,0,1.0,0.05,0.05,0.75\n0.5,CO,1,2,0,0,0,0.5,0.02,0.02,0.25\n"
                        "1.5,MM,0,20,1,2,1,3.0,0.10,0.10,0.25\n1.5,CO,4,2,0,0,0,0.5,0.02,0.02,0.75\n")
    weighted_parts = sessions.anatomy(sessions.read_series(weighted))
    weights = weighted_parts["weight_mean"]
    assert weights["MM"] == pytest.approx(0.5) and weights["CO"] == pytest.approx(0.5)
    assert weighted_parts.loc["MM", "cpu_s"] == pytest.approx(0.10)  # the last cumulative sample
    bad = tmp_path / "bad.csv"
    bad.write_text("t_s,stage\n")
    with pytest.raises(ValueError, match="missing column"):
        sessions.read_series(bad)


def test_no_finished_requests():
    judged = sessions.judge(records(ROWS[-1:]))
    assert sessions.per_class(judged).empty
    assert sessions.productivity_over_time(judged).empty
    assert math.isnan(sessions.per_class(sessions.judge(records(ROWS[4:5]))).loc[0, "response_mean_s"])
