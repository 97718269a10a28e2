"""`sojourn-engine sim` writes records that sojourn.analysis reads like the load generator's."""

from __future__ import annotations

import subprocess

import pytest

from sojourn.analysis.records import read_records, requests
from sojourn.engine import engine_path


def test_analysis_reads_simulated_records(tmp_path):
    trace = tmp_path / "trace.csv"
    trace.write_text("arrival_s,client,path,size,session,class\n0.0,1,/a,4,7,1\n1.0,2,/b,1,-1,0\n2.0,3,/c,2,,0\n")
    out = tmp_path / "sim"
    subprocess.run([str(engine_path()), "sim", "--trace", str(trace), "--link", "8", "--policy", "srpt", "--out", str(out)],
                   check=True, capture_output=True)
    frame = requests(read_records(out / "records.csv")).set_index("request_id").sort_index()
    assert list(frame["response_s"]) == pytest.approx([7.0, 1.0, 2.0])
    assert list(frame["ttfb_s"]) == pytest.approx([0.0, 0.0, 0.0])
    assert list(frame["size"]) == [4, 1, 2]
    assert frame["completed"].all()
    assert list(frame["session"]) == [7, -1, -1] and list(frame["class"]) == [1, 0, 0]
