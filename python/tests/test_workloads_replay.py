"""A generated (and an imported) trace, its docroot served by nginx, replayed by
`sojourn-engine load open --verify-content`: every body arrives with the size and the
content the trace and docs/formats.md promise."""

import shutil
import subprocess

import pandas as pd
import pytest

from sojourn.engine import engine_path
from sojourn.servers import Server, ServerConfig, free_port
from sojourn.workloads import docroot, importers, io, models, shaping

pytestmark = pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx is needed")


def replay(trace_path, port, out):
    subprocess.run(
        [str(engine_path()), "load", "open", "--trace", str(trace_path), "--target", f"127.0.0.1:{port}",
         "--out", str(out), "--verify-content", "--quiet", "--requests-per-conn", "5"],
        check=True, timeout=120,
    )
    return pd.read_csv(out / "records.csv")


def test_generated_shaped_trace_replays_with_verified_bodies(tmp_path):
    base = models.make_trace("wc98", n_requests=4000, rate=1000, clients=20, seed=9, n_objects=300)
    # 2 Mbit/s W2 compressed 20x: periods of 0.5 s, well within what loopback carries.
    trace, periods = shaping.shape(base, 2e6, profile="W2", time_compression=20)
    trace = trace[trace["arrival_s"] < 3.0]
    trace_path = io.write_trace(trace, tmp_path / "trace.csv")
    docroot.materialize(trace, tmp_path / "root")
    port = free_port()
    with Server(ServerConfig(kind="nginx", root=tmp_path / "root", port=port)):
        records = replay(trace_path, port, tmp_path / "out")
    final = records[records["final"] == 1]
    assert len(final) == len(trace)
    assert (final["outcome"] == "ok").all(), final["outcome"].value_counts()
    assert (final["bytes"] == final["expected_size"]).all()


def test_imported_log_paths_map_to_docroot_files(tmp_path):
    log = tmp_path / "access.log"
    log.write_text(
        '10.0.0.1 - - [22/Nov/2026:10:00:00 +0000] "GET /index/ HTTP/1.1" 200 2000 "-" "x"\n'
        '10.0.0.2 - - [22/Nov/2026:10:00:00 +0000] "GET /a%20b.bin HTTP/1.1" 200 70000 "-" "x"\n'
        '10.0.0.1 - - [22/Nov/2026:10:00:01 +0000] "GET /d/e/f.gif?v=2 HTTP/1.1" 200 31 "-" "x"\n'
        '10.0.0.3 - - [22/Nov/2026:10:00:01 +0000] "GET /a%20b.bin HTTP/1.1" 304 - "-" "x"\n'
    )
    trace, report = importers.import_clf(log, seed=1)
    assert report.skipped == 0
    trace_path = io.write_trace(trace, tmp_path / "trace.csv")
    docroot.materialize(io.read_trace(trace_path), tmp_path / "root")
    port = free_port()
    with Server(ServerConfig(kind="nginx", root=tmp_path / "root", port=port)):
        records = replay(trace_path, port, tmp_path / "out")
    assert (records["outcome"] == "ok").all(), records[["path", "outcome", "error"]]
    assert sorted(records["bytes"]) == [31, 2000, 70000, 70000]
