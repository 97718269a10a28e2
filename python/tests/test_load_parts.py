"""A run's load from several load generator processes (sojourn.runner.load_parts,
workload.load_processes): the merge of their files (`sojourn-engine load merge`), and a real
run in the testbed whose records are the whole trace once, with run-wide ids, as one
process's would be."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from host_noise import HOST_NOISE_UNJUDGED
from sojourn import analysis
from sojourn.engine import engine_path
from sojourn.runner import load_parts
from sojourn.runner.experiment import run_experiment
from sojourn.runner.spec import SpecError, load_spec, validate
from sojourn.servers import Server, ServerConfig, free_port


def test_processes_merge_into_what_one_process_writes(tmp_path):
    """Two real `load open --process-part I/2` runs against `sojourn-engine serve`, joined by
    `load merge`: every request once, in completion order, intervals summed, and a summary
    whose counts are the sums and whose percentiles are those of all requests together
    (each part's exact tally added, not the largest of the parts' percentiles)."""
    from test_load_servers import make_docroot

    engine = engine_path()
    root = make_docroot(tmp_path / "docroot")
    parts = [load_parts.part_dir(tmp_path, index) for index in (0, 1)]
    with Server(ServerConfig(kind="sojourn", root=root, port=free_port())) as server:
        # The parts differ (small files, large files), so the largest of their percentiles,
        # as the merge used to give, is not the run's.
        for index, (part, path) in enumerate(zip(parts, ("/1k.bin", "/64k.bin"))):
            done = subprocess.run([str(engine), "load", "open", "--target", f"127.0.0.1:{server.config.port}",
                                   "--out", str(part), "--rate", "300", "--duration", "1", "--clients", "10",
                                   "--path", path, "--process-part", f"{index}/2", "--quiet"],
                                  capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, done.stderr
    own = [json.loads((part / "summary.json").read_text()) for part in parts]
    load_parts.merge(engine, parts, tmp_path)
    records = pd.read_csv(tmp_path / "records.csv")
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert records["request_id"].is_unique and len(records) == own[0]["requests"] + own[1]["requests"]
    assert records["last_byte_s"].is_monotonic_increasing, "completion order, as one process writes"
    assert summary["requests"] == len(records) and summary["outcomes"] == {"ok": len(records)}
    assert pd.read_csv(tmp_path / "intervals.csv")["completed"].sum() == len(records)
    response = (records["last_byte_s"] - records["scheduled_s"]).to_numpy()
    for key, quantile in (("p50", 0.5), ("p90", 0.9)):  # HdrHistogram: 3 significant digits, µs
        assert summary["response_time_s"][key] == pytest.approx(np.quantile(response, quantile, method="inverted_cdf"), rel=0.01, abs=2e-6)
    largest_p50 = max(part["response_time_s"]["p50"] for part in own)
    assert summary["response_time_s"]["p50"] < largest_p50, (summary["response_time_s"], largest_p50)
    assert summary["connections_opened"] == own[0]["connections_opened"] + own[1]["connections_opened"]
    assert [part["process_part"] for part in summary["processes"]] == ["0/2", "1/2"] and "process_part" not in summary
    assert not (parts[0] / "records.csv").exists() and (parts[0] / "summary.json").exists()


def test_a_process_that_never_started_is_named_not_fatal(tmp_path):
    """A part without records (its process refused its options) leaves the others' merge
    whole and is named in the summary's warnings; with no part recorded, merge refuses."""
    from test_load_servers import make_docroot

    engine = engine_path()
    ran, empty = load_parts.part_dir(tmp_path, 0), load_parts.part_dir(tmp_path, 1)
    empty.mkdir()
    with Server(ServerConfig(kind="sojourn", root=make_docroot(tmp_path / "docroot"), port=free_port())) as server:
        done = subprocess.run([str(engine), "load", "open", "--target", f"127.0.0.1:{server.config.port}", "--out",
                               str(ran), "--rate", "50", "--duration", "0.5", "--path", "/1k.bin", "--process-part",
                               "0/2", "--quiet"], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
    requests = json.loads((ran / "summary.json").read_text())["requests"]
    load_parts.merge(engine, [ran, empty], tmp_path)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["requests"] == requests == len(pd.read_csv(tmp_path / "records.csv")) > 0
    assert any(str(empty) in warning and "did not start" in warning for warning in summary["warnings"])
    with pytest.raises(RuntimeError, match="none of .* has a records.csv"):
        load_parts.merge(engine, [empty], tmp_path / "nothing")


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
                    'load_processes = 2\n[collect]\ndrain_s = 3\n' + HOST_NOISE_UNJUDGED)
    outcome = run_experiment(load_spec(spec), tmp_path / "results", prefix="sjlp")
    assert outcome.complete, outcome.reasons()
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
