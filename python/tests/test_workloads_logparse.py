"""The engine's access-log parser (crates/logparse) against the polars reference
(``SOJOURN_IMPORT_PARSER=polars``): on lines real servers write, on lines every check
rejects, on bytes that are not UTF-8, and on seeded random edits of good lines, both give
the same trace and the same report (entries, skips by reason with their examples,
methods, per-file counts)."""

import dataclasses
import gzip
import random

import pandas as pd
import pytest

from sojourn.workloads import importers, logformat

from test_workloads_importers import APACHE_D, CLF_LINES, COMBINED_LINES, NGINX_FORMAT, NGINX_LINES, NGINX_REQUEST_TIME

pytestmark = pytest.mark.skipif(importers._engine_command(logformat.DEFAULT) is None,
                                reason="sojourn-engine with `logparse` not built (make build)")

TRICKY = [
    # Each line is one the fast path must either read exactly as polars or leave to it.
    '1.2.3.4 - - [1/Jul/1995:00:00:01 -0400] "GET /one-digit-day HTTP/1.0" 200 1',
    '1.2.3.4 - - [01/jul/1995:00:00:01 -0400] "GET /lower-month HTTP/1.0" 200 1',
    '1.2.3.4 - - [01/Jul/1995:00:00:60 -0400] "GET /leap-second HTTP/1.0" 200 1',
    '1.2.3.4 - - [29/Feb/1996:23:59:59 +2359] "GET /leap-day HTTP/1.0" 200 1',
    '1.2.3.4 - - [29/Feb/1900:00:00:00 +0000] "GET /no-leap-day HTTP/1.0" 200 1',
    '1.2.3.4 - - [01/Jul/0995:00:00:01 -04:00] "GET /year HTTP/1.0" 200 1',
    '1.2.3.4 - - [01/Jul/1995:00:00:02 -0400] "GET /plus-status HTTP/1.0" +200 1',
    '1.2.3.4 - - [01/Jul/1995:00:00:03 -0400] "GET /zero-status HTTP/1.0" 0200 0012',
    '1.2.3.4 - - [01/Jul/1995:00:00:04 -0400] "GET /big HTTP/1.0" 200 9007199254740993',
    '1.2.3.4 - - [01/Jul/1995:00:00:04 -0400] "GET /edge HTTP/1.0" 200 9007199254740992',
    '1.2.3.4 - - [01/Jul/1995:00:00:05 -0400] "GET /t 1.5e3" 200 1 "r" "u" 1e3',
    '1.2.3.4 - - [01/Jul/1995:00:00:05 -0400] "GET /t HTTP/1.0" 200 1 "r" "u"  12',
    '1.2.3.4 - - [01/Jul/1995:00:00:05 -0400] "GET /t HTTP/1.0" 200 1 "r" "u"12.50 x',
    '1.2.3.4 - - [01/Jul/1995:00:00:06 -0400] "GET ftp://host:21/abs?q#f HTTP/1.1" 200 1',
    '1.2.3.4 - - [01/Jul/1995:00:00:06 -0400] "GET http://host HTTP/1.1" 200 1',
    '1.2.3.4 - - [01/Jul/1995:00:00:06 -0400] "GET /a\\x2Fb\\x4g,c\\\\d HTTP/1.1" 200 1',
    '1.2.3.4 - - [01/Jul/1995:00:00:07 -0400] "GET /a"b HTTP/1.0" 200 1',
    '1.2.3.4 - - [01/Jul/1995:00:00:07 -0400] "GET /x HTTP/1.0 " 200 1',
    '1.2.3.4 - - [01/Jul/1995:00:00:07 -0400] "GET\t/x HTTP/1.0" 200 1',
    '1.2.3.4 - - [01/Jul/1995:00:00:07 -0400] "GET /x HTTP/11" 200 1',
    '   1.2.3.4 - - [01/Jul/1995:00:00:08 -0400] "GET /padded HTTP/1.0" 200 1   ',
    ' - - [01/Jul/1995:00:00:08 -0400] "GET /no-host HTTP/1.0" 200 1',
    '1.2.3.4 - - [01/Jul/1995:00:00:09 -0400] "GET /s HTTP/1.0" 99 1',
    '1.2.3.4 - - [01/Jul/1995:00:00:09 -0400] "GET /s HTTP/1.0" 200 - trailing words',
    '',
    '\t',
]
LATIN1 = (b'h\xe9 - - [01/Jul/1995:00:00:10 -0400] "GET /caf\xe9 HTTP/1.0" 200 3\x85\r\n'
          b'h\xe9 - - [01/Jul/1995:00:00:11 -0400] "GET /a\x1fb HTTP/1.0" 200 4\xa0\n'
          b'\x85 h - - [01/Jul/1995:00:00:12 -0400] "GET /nbsp\xa0x HTTP/1.0" 200 5\n'
          b'\x00\xff\n')
EPOCH_FORMAT = '%h %{msec}t "%r" %>s %b %{us}T'
EPOCH_LINES = ['1.1.1.1 1700000000123 "GET /m HTTP/1.1" 200 5 1234', '1.1.1.1 1700000000.5 "GET /m HTTP/1.1" 200 5 -',
               '1.1.1.2 +1700000001 "GET /n HTTP/1.1" 200 5 7', '1.1.1.2 inf "GET /n HTTP/1.1" 200 5 7',
               '1.1.1.3 1700000002 "PUT /o" 201 0 1e2']
ISO_FORMAT = '$remote_addr [$time_iso8601] "$request" $status $body_bytes_sent $request_time "$http_x_forwarded_for"'
ISO_LINES = ['10.0.0.1 [2026-11-22T10:00:00+01:00] "GET /i HTTP/1.1" 200 1 0.1 "-"',
             '10.0.0.1 [2026-11-22T10:00:01+0100] "GET /i HTTP/1.1" 200 1 0.2 " 9.9.9.9 ,1.1.1.1"',
             '10.0.0.1 [2026-11-22T10:00:02Z] "GET /i HTTP/1.1" 200 1 0.3 ""',
             '10.0.0.1 [2026-11-22T10:00:03+01:00] "GET /i HTTP/1.1" 200 1 .5 "x"']
UPSTREAM_MANY = NGINX_LINES + [
    '10.0.0.1 - - [22/Nov/2026:10:00:03 +0000] "GET /g HTTP/1.1" 502 0 "-" "ua" "-" 1.0 0.1, 0.2, 0.3 : 0.4']


def both(monkeypatch, path, **options):
    """(trace, report) through the engine, then through polars only."""
    monkeypatch.delenv(importers.PARSER_VARIABLE, raising=False)
    engine = importers.import_clf(path, **options)
    monkeypatch.setenv(importers.PARSER_VARIABLE, "polars")
    reference = importers.import_clf(path, **options)
    monkeypatch.delenv(importers.PARSER_VARIABLE)
    return engine, reference


def assert_same(monkeypatch, path, **options):
    (trace, report), (trace_ref, report_ref) = both(monkeypatch, path, **options)
    pd.testing.assert_frame_equal(trace, trace_ref)
    assert dataclasses.asdict(report) == dataclasses.asdict(report_ref)
    return trace, report


@pytest.mark.parametrize("lines, log_format", [
    (CLF_LINES + COMBINED_LINES + APACHE_D + NGINX_REQUEST_TIME + TRICKY, None),
    (COMBINED_LINES + TRICKY, "combined"),
    (NGINX_LINES + TRICKY, NGINX_FORMAT),
    (UPSTREAM_MANY, NGINX_FORMAT),
    (EPOCH_LINES + TRICKY, EPOCH_FORMAT),
    (ISO_LINES + TRICKY, ISO_FORMAT),
    (APACHE_D, r'%h %l %u %t \"%r\" %>s %b \"%{Referer}i\" \"%{User-agent}i\" %D'),
], ids=["default", "combined", "nginx", "nginx-many-upstreams", "epoch", "iso8601", "apache-D"])
def test_engine_and_polars_agree_on_hand_made_lines(tmp_path, monkeypatch, lines, log_format):
    path = tmp_path / "access.log"
    path.write_text("\n".join(lines) + "\n")
    assert_same(monkeypatch, path, seed=3, log_format=log_format)


def test_engine_and_polars_agree_on_latin1_and_control_bytes(tmp_path, monkeypatch):
    path = tmp_path / "latin1.log"
    path.write_bytes(LATIN1 + "\n".join(CLF_LINES).encode())
    trace, report = assert_same(monkeypatch, path)
    assert "/caf\xe9" in set(trace["path"]) and report.skipped == 6


def test_engine_and_polars_agree_on_rotated_gzip_files_in_blocks(tmp_path, monkeypatch):
    monkeypatch.setattr(importers, "BLOCK_BYTES", 700)
    first = tmp_path / "access.log.1"
    first.write_bytes(gzip.compress(("\n".join(CLF_LINES + TRICKY) + "\n").encode())[:-9])  # truncated
    second = tmp_path / "access.log"
    second.write_text("\n".join(COMBINED_LINES))  # no final newline
    _, report = assert_same(monkeypatch, [second, first], seed=5)
    assert report.truncated and len(report.files) == 2


@pytest.mark.parametrize("seed", range(6))
def test_engine_and_polars_agree_on_random_edits(tmp_path, monkeypatch, seed):
    rng = random.Random(seed)
    good = [line.encode() for line in CLF_LINES + COMBINED_LINES + APACHE_D + NGINX_REQUEST_TIME]
    alphabet = b' "[]/:-+.,?#\\x0123456789AZaz\t\r\x1f\x85\xa0\xe9HTTP'
    lines = []
    for _ in range(400):
        line = bytearray(rng.choice(good))
        for _ in range(rng.randint(0, 3)):
            at = rng.randrange(len(line) + 1)
            action = rng.random()
            if action < 0.4 and at < len(line):
                del line[at]
            elif action < 0.8:
                line.insert(at, rng.choice(alphabet))
            elif at < len(line):
                line[at] = rng.choice(alphabet)
        lines.append(bytes(line))
    path = tmp_path / "edited.log"
    path.write_bytes(b"\n".join(lines))
    log_format = [None, "combined"][seed % 2]
    assert_same(monkeypatch, path, seed=seed, log_format=log_format)


def test_formats_the_engine_does_not_take_are_parsed_by_polars():
    strftime = logformat.layout(r'%h %l %u %{%d/%m/%Y %H:%M:%S}t "%r" %>s %b')
    assert importers._engine_layout(strftime) is None
    assert importers._engine_layout(logformat.layout('$remote_addr → [$time_local] "$request" $status $body_bytes_sent')) is None
    assert importers._engine_layout(logformat.layout("combined")) is not None


def test_text_keys_are_the_engines():
    # The vectors of crates/logparse/src/block.rs `text_keys`.
    assert importers._text_key("") == 0x9E3779B97F4A7C15
    assert importers._text_key("/a") == 0xAA99F946D7846937
    assert importers._text_key("/shuttle/missions/sts-73/mission-sts-73.html\xe9") == 0xD2A40A28B9376B7E
