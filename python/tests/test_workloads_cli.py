"""`sojourn trace` end to end through the installed console command."""

import json
import subprocess
import sys

import pytest

from sojourn import cli
from sojourn.workloads import docroot, io

SOJOURN = [sys.executable, "-m", "sojourn.cli"]


def run(*args, check=True):
    result = subprocess.run([*SOJOURN, "trace", *map(str, args)], capture_output=True, text=True)
    if check and result.returncode != 0:
        raise AssertionError(f"exit {result.returncode}: {result.stderr}")
    return result


@pytest.mark.parametrize("sub", ["gen", "shape", "import", "docroot", "stats"])
def test_help(sub, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["trace", sub, "--help"])
    assert exit_info.value.code == 0
    assert "usage: sojourn trace " + sub in capsys.readouterr().out


def test_gen_shape_docroot_stats(tmp_path):
    trace = tmp_path / "trace.csv"
    out = run("gen", "-o", trace, "--requests", 40000, "--rho", 1, "--link-mbps", 10, "--seed", 1).stdout
    assert "40000 requests" in out
    again = tmp_path / "again.csv"
    run("gen", "-o", again, "--requests", 40000, "--rho", 1, "--link-mbps", 10, "--seed", 1)
    assert trace.read_bytes() == again.read_bytes()  # same seed, same trace

    shaped = tmp_path / "w1.csv"
    out = run("shape", trace, "-o", shaped, "--link-mbps", 10, "--profile", "W1", "--time-compression", 5).stdout
    assert "largest |achieved/target - 1|" in out
    periods = (tmp_path / "w1.periods.csv").read_text().splitlines()
    assert periods[0] == "period,phase,start_s,end_s,target_rho,achieved_rho,requests,bytes"

    root = tmp_path / "root"
    out = run("docroot", shaped, root).stdout
    assert "written" in out
    first = io.read_trace(shaped).iloc[0]
    assert (root / first["path"].lstrip("/")).read_bytes() == docroot.content(first["path"], 0, int(first["size"]))

    ccdf = tmp_path / "ccdf.png"
    out = run("stats", shaped, "--link-mbps", 10, "--json", "--ccdf", ccdf).stdout
    described = json.loads(out)["w1.csv"]
    assert described["requests"] == len(io.read_trace(shaped))
    assert described["offered_rho"] == pytest.approx(0.7, rel=0.05)  # W1's average load
    assert ccdf.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_import_reports_skipped_lines(tmp_path, capsys):
    log = tmp_path / "access.log"
    log.write_text(
        '1.2.3.4 - - [01/Jul/1995:00:00:01 -0400] "GET /a HTTP/1.0" 200 10\n'
        "garbage\n"
        '1.2.3.5 - - [01/Jul/1995:00:00:02 -0400] "GET /b HTTP/1.0" 200 20\n'
    )
    assert cli.main(["trace", "import", "clf", str(log), "-o", str(tmp_path / "t.csv")]) == 0
    out = capsys.readouterr().out
    assert "2 of 3 entries imported, 1 skipped" in out and "line 2" in out


@pytest.mark.parametrize(
    "args, message",
    [
        (["gen", "-o", "x.csv", "--requests", "10"], "rate"),
        (["gen", "-o", "x.csv", "--requests", "10", "--rate", "1", "--model", "bounded_pareto"], "needs --k, --p, --alpha"),
        (["shape", "absent.csv", "-o", "y.csv", "--link-mbps", "10", "--profile", "W1"], "no such trace file"),
        (["shape", "absent.csv", "-o", "y.csv", "--link-mbps", "10", "--kind", "alternating"], "needs --low-s"),
        (["import", "clf", "absent.log", "-o", "z.csv"], "no such input file"),
    ],
)
def test_bad_input_is_named(tmp_path, monkeypatch, capsys, args, message):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["trace", *args]) == 2
    assert message in capsys.readouterr().err


def test_import_several_files_with_a_log_format_then_docroot_and_stats(tmp_path, capsys):
    fmt = '$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent $request_time'
    (tmp_path / "access.log.1").write_text('10.0.0.1 - - [22/Nov/2026:10:00:00 +0000] "GET /a HTTP/1.1" 200 10 0.010\n')
    (tmp_path / "access.log").write_text('10.0.0.2 - - [25/Nov/2026:10:00:00 +0000] "GET /a/b HTTP/1.1" 200 20 0.020\n'
                                         '10.0.0.2 - - [25/Nov/2026:10:00:01 +0000] "GET /%00 HTTP/1.1" 200 5 0.001\n')
    trace = tmp_path / "t.csv"
    assert cli.main(["trace", "import", "clf", str(tmp_path / "access.log"), str(tmp_path / "access.log.1"),
                     "--log-format", fmt, "-o", str(trace)]) == 0
    out = capsys.readouterr().out
    assert "3 of 3 entries imported" in out and "access.log.1: 1 of 1 imported" in out
    assert trace.read_text().splitlines()[0] == "arrival_s,client,path,size,status,logged_size,response_s"

    # /a is a file, so /a/b cannot be; /%00 cannot be a name: both counted, exit 0.
    assert cli.main(["trace", "docroot", str(trace), str(tmp_path / "root")]) == 0
    out = capsys.readouterr().out
    assert "1 written, 0 reused, 2 skipped" in out and "skipped 1: holds a NUL byte (%00)" in out

    assert cli.main(["trace", "stats", str(trace), "--ccdf", str(tmp_path / "c.png")]) == 0
    assert "one gap of" in capsys.readouterr().err  # three days between two days' requests


def test_import_names_a_log_format_it_cannot_read(tmp_path, capsys):
    (tmp_path / "a.log").write_text("x\n")
    assert cli.main(["trace", "import", "clf", str(tmp_path / "a.log"), "--log-format", "%h %t", "-o", str(tmp_path / "t.csv")]) == 2
    assert "lacks" in capsys.readouterr().err
    assert not (tmp_path / "t.csv").exists() and not (tmp_path / "t.csv.partial").exists()
