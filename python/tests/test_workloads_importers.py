"""Importers on hand-made access-log lines (Common, Combined, and the fields Apache and
nginx write after them, Apache LogFormat and nginx log_format strings) and WC98 binary
samples, including malformed and truncated input, rotated and compressed files, dates in
another century and clock jumps: bad entries are counted and reported, never fatal; same
seed, same trace, however the input is cut into blocks."""

import gzip
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sojourn.workloads import importers, io, logformat

CLF_LINES = [
    '199.72.81.55 - - [01/Jul/1995:00:00:01 -0400] "GET /history/apollo/ HTTP/1.0" 200 6245',
    'unicomp6.unicomp.net - - [01/Jul/1995:00:00:06 -0400] "GET /shuttle/countdown/ HTTP/1.0" 200 3985',
    '199.120.110.21 - - [01/Jul/1995:00:00:06 -0400] "GET /shuttle/missions/sts-73/mission-sts-73.html HTTP/1.0" 200 4085',
    'burger.letters.com - - [01/Jul/1995:00:00:11 -0400] "GET /shuttle/countdown/liftoff.html HTTP/1.0" 304 0',
    'this is not a log line',
    '199.72.81.55 - - [01/Jul/1995:00:00:12 -0400] "GET /history/apollo/ HTTP/1.0" 304 -',
    '1.2.3.4 - - [32/Jul/1995:00:00:12 -0400] "GET /x HTTP/1.0" 200 5',
    '1.2.3.4 - - [01/Jul/1995:00:00:13 -0400] "" 400 5',
    '1.2.3.4 - - [01/Jul/1995:00:00:14 -0400] "GET /a,b.gif" 200 77',
    '1.2.3.4 - - [01/Jul/1995:00:00:15 -0400] "GET /trunc',
]
COMBINED_LINES = [
    '127.0.0.1 - frank [10/Oct/2000:13:55:36 -0700] "GET /apache_pb.gif HTTP/1.0" 200 2326 "http://www.example.com/start.html" "Mozilla/4.08 [en] (Win98; I ;Nav)"',
    '127.0.0.2 - - [10/Oct/2000:13:55:37 -0700] "GET http://example.com/full/form.html?q=1 HTTP/1.1" 200 99 "-" "curl/8"',
    '127.0.0.1 - frank [10/Oct/2000:13:55:38 -0700] "HEAD /apache_pb.gif HTTP/1.0" 200 0 "-" "x \\"quoted\\" agent"',
    # Our server's access log (crates/server/src/access_log.rs): Combined plus service microseconds.
    '10.0.0.2 - - [10/Oct/2000:20:55:39 +0000] "GET /o/00017.bin HTTP/1.1" 200 1520 "-" "sojourn-load" 5321',
]


def write(tmp_path, name, lines, compress=False):
    data = ("\n".join(lines) + "\n").encode()
    path = tmp_path / name
    path.write_bytes(gzip.compress(data) if compress else data)
    return path


def test_clf_imports_good_lines_and_counts_bad_ones(tmp_path):
    trace, report = importers.import_clf(write(tmp_path, "access.log", CLF_LINES), seed=1)
    assert report.entries == 10
    assert report.imported == 6
    assert report.skipped == 4
    assert report.reasons == {
        "not Common/Combined Log Format": 2,
        "request line without METHOD /path": 1,
        "bad timestamp (expected dd/Mon/yyyy:HH:MM:SS +zzzz)": 1,
    }
    assert any(" line 5: not Common/Combined Log Format: 'this is not a log line'" in example for example in report.examples)
    assert list(trace["status"]) == [200, 200, 200, 304, 304, 200]
    # One size per path: the largest 200 response; the logged size is kept.
    apollo = trace[trace["path"] == "/history/apollo/"]
    assert set(apollo["size"]) == {6245} and list(apollo["logged_size"]) == [6245, 0]
    # ',' is percent-encoded so the CSV needs no quoting.
    assert "/a%2Cb.gif" in set(trace["path"])
    # Timestamps: spread within their second, sorted, starting at 0.
    assert trace["arrival_s"].iloc[0] == 0.0
    assert np.all(np.diff(trace["arrival_s"]) >= 0)
    assert trace["client"].tolist()[0] == 0 and trace["client"].max() == 4
    io.validate_trace(trace)


def test_within_second_spread_is_seeded(tmp_path):
    path = write(tmp_path, "access.log", CLF_LINES)
    a, _ = importers.import_clf(path, seed=1)
    b, _ = importers.import_clf(path, seed=1)
    c, _ = importers.import_clf(path, seed=2)
    pd.testing.assert_frame_equal(a, b)
    assert not np.array_equal(a["arrival_s"], c["arrival_s"])
    # Request i logged in second s_i lands at s_i + u_i - u_0 (u uniform in [0, 1)):
    # within one second of its logged second counted from the first line.
    logged = np.array([0, 5, 5, 10, 11, 13], dtype=float)
    for frame in (a, c):
        arrival = frame["arrival_s"].to_numpy()
        assert np.all((arrival > logged - 1) & (arrival < logged + 1))


def test_combined_and_gzip(tmp_path):
    trace, report = importers.import_clf(write(tmp_path, "combined.log.gz", COMBINED_LINES, compress=True), seed=0)
    assert report.skipped == 0 and report.imported == 4 and not report.truncated
    assert list(trace["path"]) == ["/apache_pb.gif", "/full/form.html", "/apache_pb.gif", "/o/00017.bin"]
    assert list(trace["size"]) == [2326, 99, 2326, 1520]
    # Time zones are honoured: 20:55:39 +0000 is one second after 13:55:38 -0700.
    assert trace["arrival_s"].iloc[3] == pytest.approx(3.0, abs=1.0)


def test_truncated_gzip_keeps_what_was_readable(tmp_path):
    data = gzip.compress(("\n".join(CLF_LINES * 50) + "\n").encode())
    path = tmp_path / "cut.log.gz"
    path.write_bytes(data[: len(data) // 2])
    trace, report = importers.import_clf(path)
    assert report.truncated
    assert 0 < report.imported < 300


def test_nothing_usable_is_an_error_that_says_so(tmp_path):
    with pytest.raises(ValueError, match="nothing usable"):
        importers.import_clf(write(tmp_path, "junk.log", ["junk", "more junk"]))


def wc98_records(**fields):
    records = np.zeros(len(fields["timestamp"]), dtype=importers.WC98_RECORD)
    for name, values in fields.items():
        records[name] = values
    return records


def sample_records():
    return wc98_records(
        timestamp=[894000000, 894000000, 894000001, 894000003, 894000004],
        client=[10, 20, 10, 30, 40],
        object=[7, 8, 7, 9, 9],
        size=[500, 900, 0, 100, 100],
        method=[0, 0, 0, 1, 0],
        # status index 2 = 200, 13 = 304 (high bits = HTTP version); 63 is not a status.
        status=[0x40 | 2, 2, 0x40 | 13, 2, 63],
        type=[1, 1, 1, 2, 2],
        server=[0, 1, 2, 3, 4],
    )


def test_wc98_binary_records(tmp_path):
    path = tmp_path / "wc_day1_1"
    path.write_bytes(sample_records().tobytes())
    trace, report = importers.import_wc98(path, seed=3)
    assert report.entries == 5 and report.imported == 4 and report.reasons == {"unknown status or method code": 1}
    assert list(trace["status"]) == [200, 200, 304, 200]
    # The first two share a second, so their order depends on the seed's spread.
    assert sorted(trace["path"][:2]) == ["/wc98/7", "/wc98/8"]
    assert list(trace["path"][2:]) == ["/wc98/7", "/wc98/9"]
    assert dict(zip(trace["path"], trace["size"])) == {"/wc98/7": 500, "/wc98/8": 900, "/wc98/9": 100}
    assert trace["client"].nunique() == 3
    # The last kept record, 3 s after the first, lands within a second of that.
    assert 2.0 < trace["arrival_s"].max() < 4.0


def test_wc98_big_endian_layout(tmp_path):
    # One record written by hand, field by field, big-endian: 4 x uint32 then 4 x uint8.
    raw = (1).to_bytes(4, "big") + (2).to_bytes(4, "big") + (3).to_bytes(4, "big") + (1234).to_bytes(4, "big") + bytes([0, 2, 1, 0])
    path = tmp_path / "one"
    path.write_bytes(raw)
    trace, report = importers.import_wc98(path)
    assert (trace["path"][0], int(trace["size"][0]), int(trace["status"][0])) == ("/wc98/3", 1234, 200)


def test_wc98_truncated_and_gzip(tmp_path):
    data = sample_records().tobytes()
    plain = tmp_path / "cut"
    plain.write_bytes(data[:-7])
    trace, report = importers.import_wc98(plain)
    assert report.truncated and report.reasons["partial record at end of file"] == 1
    assert report.imported == 4  # record 5 was cut (and was bad anyway)

    packed = tmp_path / "wc_day1_1.gz"
    packed.write_bytes(gzip.compress(data))
    trace_gz, report_gz = importers.import_wc98(packed, seed=0)
    trace_plain, _ = importers.import_wc98(_write_bytes(tmp_path / "plain", data), seed=0)
    pd.testing.assert_frame_equal(trace_gz, trace_plain)
    assert not report_gz.truncated


def _write_bytes(path, data):
    path.write_bytes(data)
    return path


REAL_SERVER_LINES = [
    # Apache escapes a quote in the request line as \" (the line that once stopped imports).
    '127.0.0.1 - - [10/Oct/2000:13:55:36 -0700] "GET /a\\"quoted\\".html HTTP/1.1" 200 2326',
    '2001:db8::1 - frank [10/Oct/2000:22:55:37 +0200] "POST /form HTTP/1.1" 200 - "http://r/" "agent \\"x\\""',
    '::1 - - [10/Oct/2000:20:55:38 +0000] "HEAD /b HTTP/1.0" 304 -',
    '10.0.0.1 - - [10/Oct/2000:20:55:39 +0000] "GET /c HTT',
    '10.0.0.1 - - [10/Oct/2000:20:55:40 +0530] "-" 408 -',
]


def test_real_server_lines_import_or_are_counted(tmp_path):
    trace, report = importers.import_clf(write(tmp_path, "real.log", REAL_SERVER_LINES))
    assert (report.entries, report.imported, report.skipped) == (5, 3, 2)
    assert report.reasons == {"not Common/Combined Log Format": 1, "request line without METHOD /path": 1}
    assert report.methods == {"GET": 1, "POST": 1, "HEAD": 1}
    assert "POST 1" in report.summary() and "replayed as GET" in report.summary()
    # Zones are honoured: in UTC the lines are 1 s apart in file order (whatever their
    # offsets), each placed within its second.
    assert list(trace["path"]) == ["/a%22quoted%22.html", "/form", "/b"]
    assert 1 < trace["arrival_s"].iloc[-1] < 3
    assert trace.loc[trace["path"] == "/form", "logged_size"].item() == 0
    back = io.read_trace(io.write_trace(trace, tmp_path / "real.csv"))
    assert list(back["path"]) == list(trace["path"])


# Lines as servers write them with fields after Common/Combined (each from its server's docs).
APACHE_D = [  # LogFormat "%h %l %u %t \"%r\" %>s %b \"%{Referer}i\" \"%{User-agent}i\" %D"
    '192.0.2.1 - - [22/Nov/2026:10:00:00 +0000] "GET /a HTTP/1.1" 200 512 "-" "curl/8.5" 1520',
    '192.0.2.2 - - [22/Nov/2026:10:00:01 +0000] "GET /b HTTP/1.1" 200 70000 "http://x/" "Mozilla/5.0 (X11)" 250000',
]
NGINX_REQUEST_TIME = [  # log_format ... '"$http_user_agent" $request_time'
    '198.51.100.7 - - [22/Nov/2026:10:00:00 +0100] "GET /c HTTP/2.0" 200 99 "-" "Go-http-client/2.0" 0.004',
    '198.51.100.8 - alice [22/Nov/2026:10:00:02 +0100] "POST /d HTTP/2.0" 201 0 "-" "-" 1.250',
]
NGINX_FORMAT = ('$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" '
                '"$http_user_agent" "$http_x_forwarded_for" $request_time $upstream_response_time')
NGINX_LINES = [
    '10.0.0.1 - - [22/Nov/2026:10:00:00 +0000] "GET /e HTTP/1.1" 200 10 "-" "ua" "203.0.113.7, 10.0.0.1" 0.020 0.018',
    '10.0.0.1 - - [22/Nov/2026:10:00:01 +0000] "GET /f HTTP/1.1" 502 0 "-" "ua" "203.0.113.8" 3.001 1.000, 2.000 : 0.001',
    '10.0.0.1 - - [22/Nov/2026:10:00:02 +0000] "GET /e HTTP/1.1" 304 0 "-" "ua" "-" 0.000 -',
]


def test_trailing_response_times_import_with_the_default_format(tmp_path):
    trace, report = importers.import_clf(write(tmp_path, "apache.log", APACHE_D + NGINX_REQUEST_TIME))
    assert (report.imported, report.skipped) == (4, 0)
    assert report.columns == ["response_s"] and "kept as response_s" in report.summary()
    times = dict(zip(trace["path"], trace["response_s"]))
    # %D is microseconds; $request_time seconds with millisecond resolution.
    assert times == pytest.approx({"/a": 0.00152, "/b": 0.25, "/c": 0.004, "/d": 1.25})
    back = io.read_trace(io.write_trace(trace, tmp_path / "t.csv"))
    assert back["response_s"].tolist() == pytest.approx(trace["response_s"].tolist())


def test_common_lines_followed_by_a_number_keep_it(tmp_path):
    # Our server's log without referer and agent, and Apache's "%h %l %u %t \"%r\" %>s %b %D".
    trace, report = importers.import_clf(write(tmp_path, "a.log", [
        '10.0.0.2 - - [10/Oct/2000:20:55:39 +0000] "GET /o/1.bin HTTP/1.1" 200 1520 5321',
        '10.0.0.2 - - [10/Oct/2000:20:55:40 +0000] "GET /o/2.bin HTTP/1.1" 200 1520',
    ]))
    assert report.skipped == 0
    assert trace["response_s"].iloc[0] == pytest.approx(0.005321) and np.isnan(trace["response_s"].iloc[1])


def test_nginx_log_format_with_upstream_times_and_forwarded_for(tmp_path):
    trace, report = importers.import_clf(write(tmp_path, "nginx.log", NGINX_LINES), log_format=NGINX_FORMAT)
    assert (report.imported, report.skipped) == (3, 0)
    assert trace["response_s"].tolist() == pytest.approx([0.02, 3.001, 0.0])
    # Upstream times of every upstream tried are summed; "-" is none.
    assert trace["upstream_response_s"].tolist()[:2] == pytest.approx([0.018, 3.001])
    assert np.isnan(trace["upstream_response_s"].iloc[2])
    # Clients are the forwarded-for addresses (all three came through one proxy, 10.0.0.1).
    assert trace["client"].tolist() == [0, 1, 2]
    assert report.columns == ["response_s", "upstream_response_s"]


def test_apache_log_formats_with_t_units(tmp_path):
    lines = ['192.0.2.9 - - [22/Nov/2026:10:00:00 +0000] "GET /g HTTP/1.1" 200 5 2']
    for spec, seconds in ((r'%h %l %u %t \"%r\" %>s %b %T', 2.0), ('%h %l %u %t "%r" %>s %b %{ms}T', 0.002)):
        trace, _ = importers.import_clf(write(tmp_path, "t.log", lines), log_format=spec)
        assert trace["response_s"].tolist() == [seconds]


def test_a_line_not_in_the_given_format_is_counted(tmp_path):
    trace, report = importers.import_clf(write(tmp_path, "n.log", NGINX_LINES + APACHE_D[:1]), log_format=NGINX_FORMAT)
    assert report.imported == 3
    assert report.reasons == {f"not in the log format {NGINX_FORMAT!r}": 1}


@pytest.mark.parametrize("spec, message", [
    ("%h %t %>s %b", "lacks"),
    ("%h %l %u %t %r%>s %b", "have nothing between them"),
    ("no fields at all", "no Apache directive"),
    ("%h [%t] %{fortnights}T \"%r\" %>s %b", "unknown unit 'fortnights'"),
    ('%h %t "%r" %>s %b %b', "more than one field for size"),
])
def test_log_formats_sojourn_cannot_read_are_named(spec, message):
    with pytest.raises(logformat.LogFormatError, match=message):
        logformat.layout(spec)


def line(host, when, path, size=100):
    return f'{host} - - [{when}] "GET {path} HTTP/1.1" 200 {size} "-" "ua"'


def test_rotated_and_compressed_files_merge_in_time_order(tmp_path):
    # logrotate's names: the newest is access.log; .2.gz is the oldest.
    old = [line("10.0.0.1", f"22/Nov/2026:08:00:0{i} +0000", f"/old{i}") for i in range(3)]
    middle = [line("10.0.0.2", f"22/Nov/2026:09:00:0{i} +0000", f"/mid{i}") for i in range(2)] + ["garbage"]
    new = [line("10.0.0.3", f"22/Nov/2026:10:00:0{i} +0000", f"/new{i}") for i in range(4)]
    files = [write(tmp_path, "access.log", new), write(tmp_path, "access.log.1", middle),
             write(tmp_path, "access.log.2.gz", old, compress=True)]
    trace, report = importers.import_clf(files, seed=3)
    assert [p[:4] for p in trace["path"]] == ["/old"] * 3 + ["/mid"] * 2 + ["/new"] * 4
    assert [(Path(c.path).name, c.entries, c.imported, c.skipped) for c in report.files] == [
        ("access.log.2.gz", 3, 3, 0), ("access.log.1", 3, 2, 1), ("access.log", 4, 4, 0)]
    assert report.examples == [f"{files[1]} line 3: not Common/Combined Log Format: 'garbage'"]
    assert "access.log.1: 2 of 3 imported, 1 skipped" in report.summary()
    # The order the files are named in changes nothing.
    again, _ = importers.import_clf(list(reversed(files)), seed=3)
    pd.testing.assert_frame_equal(trace, again)


def test_streaming_in_small_blocks_gives_the_same_trace(tmp_path, monkeypatch):
    rng = np.random.default_rng(2)
    lines = [line(f"10.0.{i % 7}.{i % 5}", f"22/Nov/2026:10:{i // 600 % 60:02d}:{i // 10 % 60:02d} +0000",
                  f"/o/{rng.integers(50)}", int(rng.integers(1, 9999))) for i in range(3000)]
    path = write(tmp_path, "big.log.gz", lines, compress=True)
    whole, _ = importers.import_clf(path, seed=5)
    monkeypatch.setattr(importers, "BLOCK_BYTES", 4096)
    monkeypatch.setattr(importers, "BUCKET_ROWS", 100)
    pieces, report = importers.import_clf(path, seed=5)
    pd.testing.assert_frame_equal(whole, pieces)
    assert report.imported == 3000 and len(whole) == 3000


def test_a_date_in_another_century_is_named_and_skipped(tmp_path):
    lines = [line("10.0.0.1", f"22/Nov/2026:10:{i // 60:02d}:{i % 60:02d} +0000", f"/p{i}") for i in range(0, 600, 20)]
    lines.insert(7, line("10.0.0.9", "22/Nov/1926:10:00:00 +0000", "/old-clock"))
    trace, report = importers.import_clf(write(tmp_path, "century.log", lines))
    assert report.imported == 30 and "/old-clock" not in set(trace["path"])
    assert report.reasons == {"time outlier (beyond a gap of most of the log's span)": 1}
    outlier = report.outliers[0]
    assert outlier.lines == 1 and outlier.gap_s > 99 * 365 * 86400
    assert outlier.examples == [f"{tmp_path / 'century.log'} line 8"]
    assert "time outlier: 1 line(s) 1926-11-22 10:00:00 UTC" in report.summary()
    assert trace["arrival_s"].max() < 600  # minutes, not a century

    kept, report = importers.import_clf(write(tmp_path, "century.log", lines), keep_outliers=True)
    assert len(kept) == 31 and report.skipped == 0 and "kept" in report.summary()
    assert kept["path"].iloc[0] == "/old-clock" and kept["arrival_s"].max() > 99 * 365 * 86400


def test_a_clock_jump_is_named_and_skipped(tmp_path):
    # Ten minutes of requests; for three lines the server's clock was an hour ahead.
    lines = [line("10.0.0.1", f"22/Nov/2026:10:{i // 60:02d}:{i % 60:02d} +0000", f"/q{i}") for i in range(0, 600, 10)]
    lines[20:23] = [line("10.0.0.1", f"22/Nov/2026:11:03:2{i} +0000", f"/jump{i}") for i in range(3)]
    trace, report = importers.import_clf(write(tmp_path, "jump.log", lines))
    assert len(trace) == 57 and not any(p.startswith("/jump") for p in trace["path"])
    assert [o.lines for o in report.outliers] == [3]
    assert report.outliers[0].examples[0].endswith("jump.log line 21")


def test_two_days_far_apart_are_kept_and_the_gap_named(tmp_path):
    lines = ([line("10.0.0.1", f"22/Nov/2026:10:00:{i:02d} +0000", f"/r{i}") for i in range(30)]
             + [line("10.0.0.1", f"25/Nov/2026:10:00:{i:02d} +0000", f"/s{i}") for i in range(30)])
    trace, report = importers.import_clf(write(tmp_path, "days.log", lines))
    assert len(trace) == 60 and not report.outliers
    assert report.largest_gap_s == pytest.approx(3 * 86400 - 29)
    assert "largest gap 3.0 days (100% of it) after 2026-11-22 10:00:29 UTC" in report.summary()
