"""The sessions part of a repetition's summary and of the report, from a stored result
with hand-made records and stage series (hand-checked numbers), and its absence from
reports of runs without session data."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pandas as pd
import pytest

from sojourn.analysis.results import summarize_repetition
from sojourn.analysis.session_metrics import summarize_directory
from sojourn.report.html import build_report
from sojourn.runner.layout import write_json

# (request_id, session, client, path, status, outcome, scheduled_s, last_byte_s). Two
# source addresses: even clients gold (bound 1 s), odd clients silver (bound 2 s).
ROWS = [
    (0, 0, 0, "/stage/MM/1", 200, "ok", 0.0, 0.5),       # gold, met
    (1, 0, 0, "/stage/SR/2", 200, "ok", 1.0, 1.8),       # gold, met
    (2, 1, 1, "/stage/MM/1", 200, "ok", 0.2, 0.4),       # silver, met
    (3, 1, 1, "/stage/CO/1", 200, "ok", 1.2, 2.7),       # silver, 1.5 s: within 2 s
    (4, 2, 2, "/stage/BR/9", 503, "http_error", 2.0, 2.1),  # gold, dropped: session 2 aborted
    (5, 3, 3, "/stage/MM/1", None, "interrupted", 2.5, None),  # not finished
]
SERIES = [  # t_s, stage, queue_length, completed, late, dropped_waiting_room, dropped_deadline, queueing_s, processing_s
    (0.5, "MM", 2, 1, 0, 0, 0, 0.1, 0.01), (0.5, "SR", 0, 0, 0, 0, 0, 0.0, 0.0),
    (1.0, "MM", 0, 2, 0, 0, 0, 0.3, 0.02), (1.0, "SR", 1, 1, 0, 0, 1, 0.4, 0.03),
]


def write_session_repetition(directory: Path, run: str, variant: str, rate: float) -> Path:
    path = directory / run / "0"
    path.mkdir(parents=True)
    frame = pd.DataFrame(ROWS, columns=["request_id", "session", "client", "path", "status", "outcome", "scheduled_s",
                                       "last_byte_s"])
    frame["final"] = 1
    frame["bytes"] = frame["status"].map({200: 67, 503: 40})  # session mode has no expected size
    frame.to_csv(path / "records.csv", index=False)
    pd.DataFrame(SERIES, columns=["t_s", "stage", "queue_length", "completed", "late", "dropped_waiting_room",
                                  "dropped_deadline", "queueing_s", "processing_s"]).to_csv(path / "series.csv", index=False)
    write_json(path / "classes.json", {"source_addrs": ["10.78.0.1", "10.78.1.1"], "address_classes": [0, 1],
                                       "class_names": ["gold", "silver"], "delay_bounds_s": [1.0, 2.0]})
    write_json(path / "run.json", {"run": run, "variant": variant, "repetition": 0, "sweep_value": rate,
                                   "config": {"network": {"link_mbps": 100.0}, "server": {"kind": "sojourn"}},
                                   "inputs": {"periods": []}})
    write_json(path / "status.json", {"state": "complete", "reason": ""})
    write_json(path / "summary.json", summarize_repetition(path, 100e6))
    return path


def test_session_summary_by_hand(tmp_path):
    summary = summarize_directory(write_session_repetition(tmp_path, "fifo-rate=1", "fifo", 1.0))
    gold, silver = summary["classes"]
    assert (gold["name"], gold["requests"], gold["sessions"], gold["sessions_aborted"]) == ("gold", 3, 2, 1)
    assert gold["timeout_rate"] == pytest.approx(1 / 3) and gold["drop_rate"] == pytest.approx(1 / 3)
    assert gold["response_mean_s"] == pytest.approx(0.65)  # served requests 0 and 1: 0.5 and 0.8 s
    assert (silver["name"], silver["requests"], silver["timeout_rate"], silver["session_abort_rate"]) == \
        ("silver", 2, 0.0, 0.0)
    assert summary["overall"]["requests"] == 5 and summary["overall"]["sessions_aborted"] == 1
    assert [p["productivity"] for p in summary["productivity"]] == [2, 1, 0]
    anatomy = {row["stage"]: row for row in summary["anatomy"]}
    assert anatomy["MM"]["queueing_mean_s"] == pytest.approx(0.15) and anatomy["SR"]["dropped"] == 1
    assert summary["queue_lengths"] == {"t_s": [0.5, 1.0], "MM": [2, 0], "SR": [0, 1]}


def test_report_has_sessions_section_only_with_session_data(tmp_path):
    directory = tmp_path / "dwfs"
    directory.mkdir()
    (directory / "spec.toml").write_text('name = "dwfs"\n[sweep]\nparameter = "workload.sessions.rate"\nvalues = [1, 2]\n')
    for variant in ("fifo", "dwfs"):
        for rate in (1.0, 2.0):
            write_session_repetition(directory, f"{variant}-rate={rate:g}", variant, rate)
    report = build_report(directory).read_text()
    assert "<h2>Sessions (003 §5)</h2>" in report
    section = report.split("<h2>Sessions (003 §5)</h2>", 1)[1]
    # Table row per run and class: fifo-rate=1 gold with its hand-checked timeout rate.
    assert re.search(r"<td>fifo-rate=1</td>\s*<td>gold</td>\s*<td>3</td>\s*<td>2</td>\s*<td>0.65</td>\s*"
                     r"<td>0.3333</td>", section)
    figures = re.findall(r'src="data:image/png;base64,([^"]+)"', section)
    assert len(figures) == 4  # vs load, productivity, queues, anatomy
    assert all(base64.b64decode(f).startswith(b"\x89PNG") for f in figures)

    plain = tmp_path / "plain"
    for path in (directory / "fifo-rate=1" / "0",):
        target = plain / "run" / "0"
        target.mkdir(parents=True)
        for name in ("records.csv", "run.json", "status.json", "summary.json"):
            (target / name).write_bytes((path / name).read_bytes())
    (plain / "spec.toml").write_text('name = "plain"\n')
    assert "Sessions (003" not in build_report(plain).read_text()
