"""A run's load from several load generator processes (sojourn.runner.load_parts,
workload.load_processes): the merge of their files, and a real run in the testbed whose
records are the whole trace once, with run-wide ids, as one process's would be."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest

from sojourn import analysis
from sojourn.runner import load_parts
from sojourn.runner.experiment import run_experiment
from sojourn.runner.spec import SpecError, load_spec, validate


def test_the_parts_files_merge_into_the_runs(tmp_path):
    parts = [tmp_path / "process-0", tmp_path / "process-1"]
    for index, part in enumerate(parts):
        part.mkdir()
        (part / "records.csv").write_text("request_id,outcome\n" + f"{index},ok\n{index + 2},ok\n")
        (part / "intervals.csv").write_text("t_s,completed,in_flight\n1.0,2,1\n2.0,1,0\n" + ("3.0,1,0\n" * index))
        (part / "summary.json").write_text(json.dumps({
            "requests": 2, "outcomes": {"ok": 2}, "duration_s": 3.0 + index, "mode": "open", "process_part": f"{index}/2",
            "lag_s": {"count": 2, "mean": 0.001 * (index + 1), "min": 0.0, "max": 0.01, "p99": 0.002 * (index + 1)},
            "warnings": ["same"], "loop_busy_fraction_per_thread": [0.1]}))
    load_parts.merge(parts, tmp_path)
    records = pd.read_csv(tmp_path / "records.csv")
    assert sorted(records["request_id"]) == [0, 1, 2, 3]
    intervals = pd.read_csv(tmp_path / "intervals.csv")
    assert list(intervals["completed"]) == [4, 2, 1] and list(intervals["t_s"]) == [1.0, 2.0, 3.0]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert (summary["requests"], summary["outcomes"], summary["duration_s"]) == (4, {"ok": 4}, 4.0)
    assert summary["lag_s"]["p99"] == 0.004 and summary["lag_s"]["mean"] == pytest.approx(0.0015)
    assert summary["warnings"] == ["same"] and len(summary["processes"]) == 2 and "process_part" not in summary
    assert not (parts[0] / "records.csv").exists() and (parts[0] / "summary.json").exists()


def test_sessions_run_in_one_process():
    with pytest.raises(SpecError, match=r"workload\.load_processes = 2: sessions run in one load generator process"):
        validate({"name": "s", "network": {"groups": [{"name": n} for n in ("gold", "silver", "bronze")]},
                  "workload": {"mode": "sessions", "load_processes": 2}})


@pytest.mark.netns
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")
def test_two_processes_run_the_whole_trace_once(tmp_path):
    (tmp_path / "trace.csv").write_text("arrival_s,client,path,size\n"
                                        + "".join(f"{i * 0.05:.2f},{i % 5},/o{i % 3},{2000 + i % 3}\n" for i in range(80)))
    spec = tmp_path / "two.toml"
    spec.write_text('name = "two"\n[network]\nlink_mbps = 10\n[workload]\ntrace = "trace.csv"\nclients = 5\n'
                    'load_processes = 2\n[collect]\ndrain_s = 3\n')
    outcome = run_experiment(load_spec(spec), tmp_path / "results", prefix="sjlp")
    assert outcome.complete, outcome.states
    rep = tmp_path / "results" / "two" / "run" / "0"
    records = analysis.read_records(rep / "records.csv")
    assert sorted(records["request_id"]) == list(range(80))  # every request once, with its trace id
    for index in (0, 1):  # each process ran its clients only
        options = (rep / f"process-{index}" / "load.toml").read_text()
        assert f'process-part = "{index}/2"' in options
    assert set(records["client"] % 2) == {0, 1} and records["conn_id"].is_unique
    summary = json.loads((rep / "summary.json").read_text())
    assert summary["requests"] == 80 and summary["completed"] == 80
    assert [part["process_part"] for part in summary["load_generator"]["processes"]] == ["0/2", "1/2"]
    assert Path(rep / "load_summary.json").is_file()
