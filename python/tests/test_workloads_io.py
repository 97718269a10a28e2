"""Trace CSV reading and writing (docs/formats.md): round trip, and errors that name the
row and column and say what is accepted."""

import numpy as np
import pandas as pd
import pytest

from sojourn.workloads import io, models


def test_round_trip_keeps_values_and_microseconds(tmp_path):
    trace = models.make_trace("wc98", n_requests=5000, rate=300, seed=1)
    trace["session"] = np.where(np.arange(5000) % 2, 7, -1)
    path = io.write_trace(trace, tmp_path / "t.csv")
    lines = path.read_text().splitlines()
    assert lines[0] == "arrival_s,client,path,size,session"
    assert lines[1].startswith("0.000000,")
    back = io.read_trace(path)
    assert list(back.columns) == ["arrival_s", "client", "path", "size", "session"]
    np.testing.assert_allclose(back["arrival_s"], trace["arrival_s"], atol=5e-7)
    assert back["size"].dtype == np.uint64 and back["client"].dtype == np.uint32
    assert list(back["path"]) == list(trace["path"])
    assert (back["session"].to_numpy() == trace["session"].to_numpy()).all()


def test_reader_accepts_the_formats_md_example(tmp_path):
    path = tmp_path / "example.csv"
    path.write_text("arrival_s,client,path,size,session\n0.000000,0,/o/000017.bin,1520,-1\n0.000843,3,/o/000002.bin,87321,-1\n")
    trace = io.read_trace(path)
    assert trace["size"].tolist() == [1520, 87321]
    assert trace["arrival_s"].tolist() == [0.0, 0.000843]


def test_optional_columns_fill_their_defaults(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("arrival_s,client,path,size,session,class\n0.1,0,/a,1,,\n0.2,0,/b,2,5,3\n")
    trace = io.read_trace(path)
    assert trace["session"].tolist() == [-1, 5]
    assert trace["class"].tolist() == [0, 3]


@pytest.mark.parametrize(
    "body, message",
    [
        ("0.1,1,/a,5\n0.2,x,/b,3\n", r"data row 2 \(line 3\), column 'client': 'x'.*integer"),
        ("0.1,1,/a,5\n0.2,1,/b,-3\n", r"data row 2 \(line 3\), column 'size'"),
        ("0.1,1,/a,5\n0.05,1,/b,3\n", r"data row 2, column 'arrival_s': 0.05 is earlier"),
        ("-1,1,/a,5\n", r"data row 1 \(line 2\), column 'arrival_s'"),
        ("0.1,1,a,5\n", r"column 'path': 'a'.*starting with '/'"),
        ("0.1,1,/a b,5\n", r"column 'path'"),
    ],
)
def test_errors_name_row_and_column(tmp_path, body, message):
    path = tmp_path / "bad.csv"
    path.write_text("arrival_s,client,path,size\n" + body)
    with pytest.raises(io.TraceFormatError, match=message):
        io.read_trace(path)


def test_missing_column_and_missing_file(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("arrival_s,client,path\n0.1,1,/a\n")
    with pytest.raises(io.TraceFormatError, match="missing required column.*size"):
        io.read_trace(path)
    with pytest.raises(io.TraceFormatError, match="no such trace file"):
        io.read_trace(tmp_path / "absent.csv")


def test_writer_refuses_an_invalid_trace(tmp_path):
    bad = pd.DataFrame({"arrival_s": [1.0, 0.5], "client": [0, 0], "path": ["/a", "/b"], "size": [1, 2]})
    with pytest.raises(io.TraceFormatError, match="non-decreasing"):
        io.write_trace(bad, tmp_path / "t.csv")
    assert not (tmp_path / "t.csv").exists()
