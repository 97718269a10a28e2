"""Importing real logs as traces: access logs (Common/Combined, or any Apache ``LogFormat``
or nginx ``log_format``, :mod:`sojourn.workloads.logformat`) and World Cup 98 binary logs.

Guarantees:

- Streaming: files are read in blocks of :data:`BLOCK_BYTES` (gzip too, every member), each
  block parsed into a few integer columns kept in a temporary directory; a second pass
  sorts :data:`BUCKET_ROWS` rows at a time and hands them on. Memory grows with the number
  of distinct paths, not with lines. Access-log lines are parsed by ``sojourn-engine
  logparse`` (crates/logparse) where the engine has it and the format's time is Common,
  ISO 8601 or epoch: its fast path takes the lines it decides exactly as
  :func:`_parse_lines` (the polars reference) does and hands the rest to it, so results
  and skip counts are the same either way; otherwise, or with ``SOJOURN_IMPORT_PARSER=polars``,
  polars' vectorised kernels parse every block.
- Bad input is never fatal: every line or record that cannot be used is skipped and
  counted in the returned :class:`ImportReport` by reason, with the first few file names,
  line numbers and texts. Only an input with *no* usable entry is an error.
- Several files are merged in time order; the report counts each file's entries,
  imports and skips. A truncated gzip stream is imported up to where it breaks and reported.
- Time outliers: where one gap between consecutive logged seconds is more than
  :data:`sojourn.workloads.stats.DOMINANT_GAP` of the whole span and the lines beyond
  it are at most :data:`OUTLIER_SHARE` of all (a clock jump, a date in another century),
  those lines are named in the report and skipped and counted (``keep_outliers`` keeps
  them); repeated until no such gap is left. The largest remaining gap is named too.
- Logs with 1-second timestamps: each request is placed uniformly within its second by
  a hash of (``seed``, file, line), so the same log and seed give the same trace
  however it is read; sub-second timestamps are spread within their resolution. The
  trace is sorted by time and starts at 0.
- ``size`` is the object's size: the largest body size logged for that path with
  status 200 (or with any status if it never had a 200), so trace and docroot agree on
  one size per path; ``status`` and ``logged_size`` are kept as extra columns, and a
  logged response time as ``response_s`` (``upstream_response_s`` for nginx's
  ``$upstream_response_time``, summed over the upstreams tried). Query strings are
  dropped from paths. ``client`` numbers the distinct clients in order of first
  appearance in the trace: the first address of an X-Forwarded-For field where the
  format has one (the client behind a proxy), else the logged host.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import os
import queue
import struct
import subprocess
import tempfile
import threading
import zlib
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import pandas as pd
import polars as pl

from . import logformat
from .logformat import FORWARDED, HOST, METHOD, PATH, REQUEST, RESPONSE, SIZE, STATUS, TIME, UPSTREAM, Layout
from .stats import DOMINANT_GAP

GZIP_MAGIC = b"\x1f\x8b"
EXAMPLES = 5
BLOCK_BYTES = 8 << 20
BUCKET_ROWS = 1 << 18
# Lines beyond a dominating gap are outliers when they are at most this share of all.
OUTLIER_SHARE = 0.05
# Sizes a double no longer counts exactly (2^53 bytes) are corrupt lines.
MAX_SIZE = 2**53

Progress = Callable[[str, int, int], None]


@dataclass
class FileCounts:
    """One input file's share of an import."""

    path: str
    entries: int = 0
    imported: int = 0
    skipped: int = 0
    truncated: bool = False
    first_s: float | None = None  # earliest and latest logged time (Unix seconds)
    last_s: float | None = None


@dataclass
class Outlier:
    """Lines cut off from the rest by one gap."""

    lines: int
    first_s: float
    last_s: float
    gap_s: float
    examples: list[str] = field(default_factory=list)


@dataclass
class ImportReport:
    """What an import read, kept and skipped."""

    source: str
    entries: int = 0
    imported: int = 0
    skipped: int = 0
    reasons: dict[str, int] = field(default_factory=dict)
    examples: list[str] = field(default_factory=list)
    truncated: bool = False
    # Imported requests by logged method. A trace has no method column: replay requests
    # every entry with GET (a server answers HEAD/POST/... of a static object with its
    # body anyway, or not at all), so a log rich in other methods replays as more bytes.
    methods: dict[str, int] = field(default_factory=dict)
    files: list[FileCounts] = field(default_factory=list)
    outliers: list[Outlier] = field(default_factory=list)
    kept_outliers: bool = False
    span_s: float = 0.0
    largest_gap_s: float = 0.0
    largest_gap_at_s: float | None = None
    columns: list[str] = field(default_factory=list)

    def skip(self, counts: FileCounts, skip: Skip) -> None:
        self.skipped += skip.total
        counts.skipped += skip.total
        self.reasons[skip.reason] = self.reasons.get(skip.reason, 0) + skip.total
        for number, text in list(zip(skip.numbers, skip.texts))[: max(0, EXAMPLES - len(self.examples))]:
            self.examples.append(f"{counts.path} line {number}: {skip.reason}: {text[:100]!r}")

    def summary(self) -> str:
        text = f"{self.source}: {self.imported} of {self.entries} entries imported, {self.skipped} skipped"
        if self.reasons:
            text += " (" + ", ".join(f"{n} {r}" for r, n in self.reasons.items()) + ")"
        if self.methods and set(self.methods) != {"GET"}:
            text += "; methods " + ", ".join(f"{m} {n}" for m, n in sorted(self.methods.items())) + " (all replayed as GET)"
        if self.truncated:
            text += "; input truncated"
        lines = [text]
        if len(self.files) > 1:
            for counts in self.files:
                lines.append(f"  {counts.path}: {counts.imported} of {counts.entries} imported, {counts.skipped} skipped"
                             + (f", {_utc(counts.first_s)} to {_utc(counts.last_s)}" if counts.first_s is not None else "")
                             + ("; truncated" if counts.truncated else ""))
        for outlier in self.outliers:
            lines.append(f"  time outlier: {outlier.lines} line(s) {_utc(outlier.first_s)} to {_utc(outlier.last_s)}, "
                         f"{_duration(outlier.gap_s)} from the rest, " + ("kept" if self.kept_outliers else "skipped")
                         + (f" (e.g. {outlier.examples[0]})" if outlier.examples else ""))
        if self.largest_gap_at_s is not None and self.span_s > 0:
            share = self.largest_gap_s / self.span_s
            lines.append(f"  span {_duration(self.span_s)}; largest gap {_duration(self.largest_gap_s)} "
                         f"({share:.0%} of it) after {_utc(self.largest_gap_at_s)}"
                         + (f"; more than {DOMINANT_GAP:.0%}: the trace is mostly this gap (the lines on its "
                            f"smaller side are over {OUTLIER_SHARE:.0%} of all, so not outliers)"
                            if share > DOMINANT_GAP else ""))
        if self.columns:
            lines.append(f"  logged response times kept as {', '.join(self.columns)}")
        return "\n".join(lines)


def _utc(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _duration(seconds: float) -> str:
    for unit, size in (("days", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:g} s"


@dataclass
class Skip:
    """Lines of one block skipped for one reason: the first few (number, text) and how many."""

    reason: str
    numbers: list[int]
    texts: list[str]
    total: int


@dataclass
class Parsed:
    """One block: its usable rows, how many entries it had, what was skipped."""

    frame: pl.DataFrame
    entries: int
    skips: list[Skip]


# ---------------------------------------------------------------------------------------
# Reading: decompressed bytes in blocks.


def _decompressed(path: Path, counts: FileCounts, report: ImportReport, done: Callable[[int], None]) -> Iterator[bytes]:
    """The file's bytes, gunzipped if gzip (every member), ``BLOCK_BYTES`` at most at a
    time; a gzip stream that ends early or breaks is marked truncated."""
    with open(path, "rb") as handle:
        gz = handle.read(2) == GZIP_MAGIC
        handle.seek(0)
        decompressor = None
        while raw := handle.read(BLOCK_BYTES):
            done(len(raw))
            if not gz:
                yield raw
                continue
            while raw:
                decompressor = decompressor or zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
                try:
                    # Bounded output per call: a small file may unpack to gigabytes.
                    out = decompressor.decompress(raw, BLOCK_BYTES)
                except zlib.error:
                    counts.truncated = report.truncated = True
                    return
                yield out
                raw = decompressor.unconsumed_tail
                if decompressor.eof:
                    raw, decompressor = decompressor.unused_data, None
        if decompressor is not None:
            counts.truncated = report.truncated = True


def _line_blocks(pieces: Iterator[bytes]) -> Iterator[bytes]:
    """Whole lines, a piece at a time (the last line may lack its newline)."""
    pending: list[bytes | memoryview] = []
    for piece in pieces:
        cut = piece.rfind(b"\n") + 1
        if not cut:
            pending.append(piece)
            continue
        view = memoryview(piece)
        yield b"".join([*pending, view[:cut]])
        pending = [view[cut:]]
    if any(len(p) for p in pending):
        yield b"".join(pending)


# ---------------------------------------------------------------------------------------
# Parsing access-log lines (one block at a time).

# "METHOD target [HTTP/x.y]"; an absolute-form target keeps only its path, and the
# query is dropped (a docroot file has one content per path; replay is of static objects).
REQUEST_LINE = r"^(?P<method>[A-Z]+) (?:[a-zA-Z][a-zA-Z0-9+.-]*://[^/\s]*)?(?P<path>/[^\s?#]*)[^\s]*(?: HTTP/\d\.\d)?$"
# After the Common prefix: Combined's "referer" "user-agent", then a number (the default
# layout's response time, see sojourn.workloads.logformat).
TRAILING_TIME = r'^(?:"[^"]*" "[^"]*" ?)?([0-9]+(?:\.[0-9]+)?)(?: |$)'


def _lines(block: bytes) -> pl.DataFrame:
    """The block's lines as text (blank: null)."""
    if not block.isascii():
        # Latin-1: every byte is a character, so nothing is lost or refused.
        block = block.decode("latin-1").encode("utf-8")
    if b"\\" in block:
        # Escaped quotes and backslashes (Apache \" \\, nginx escape=json \") become what
        # a URL path carries (RFC 3986 §2.1), so no field holds a quote.
        block = block.replace(b"\\\\", b"%5C").replace(b'\\"', b"%22")
    if b"\x1f" in block:
        # The unit separator never belongs in a log line: it splits nothing here.
        block = block.replace(b"\x1f", b"?")
    lines = pl.read_csv(block, has_header=False, separator="\x1f", quote_char=None, new_columns=["line"],
                        schema={"line": pl.String}, comment_prefix=None)["line"]
    return pl.DataFrame({"line": lines.str.strip_chars()})


def _time(column: pl.Expr, spec: logformat.Field) -> pl.Expr:
    """Unix seconds (float) of a time field, null where it does not parse."""
    if spec.time_format == "epoch":
        return column.cast(pl.Float64, strict=False) * spec.unit
    parsed = column.str.strptime(pl.Datetime("us", "UTC"), spec.time_format, strict=False)
    return parsed.dt.epoch("us").cast(pl.Float64) / 1e6


def _requests(frame: pl.DataFrame, layout: Layout) -> pl.DataFrame:
    """``method`` and ``path`` (null for a bad request line), parsed once per distinct text."""
    roles = layout.roles()
    if REQUEST in roles:
        request = pl.col(REQUEST)
    else:
        method = pl.col(METHOD) if METHOD in roles else pl.lit("GET")
        request = pl.concat_str([method, pl.lit(" "), pl.col(PATH)])
    # Joined back by hash: an integer key joins several times faster than the text.
    frame = frame.with_columns(request.alias("_request")).with_columns(pl.col("_request").hash().alias("_key"))
    distinct = frame.group_by("_key").agg(pl.col("_request").first())
    parsed = distinct.select("_key", pl.col("_request").str.extract_groups(REQUEST_LINE).alias("_parts")).unnest("_parts")
    # Escapes in the logged target become percent-encoding (Apache's \" and \\ above, nginx's
    # \xHH), and ',' too so the trace CSV needs no quoting.
    parsed = parsed.with_columns(
        pl.col("path").str.replace_all(r"\\x([0-9A-Fa-f]{2})", "%$1").str.replace_all(",", "%2C", literal=True)
        .str.replace_all('"', "%22", literal=True))
    return frame.drop([c for c in (METHOD, PATH, "_request") if c in frame.columns]).join(
        parsed, on="_key", how="left", maintain_order="left").drop("_key")


def _number(column: str, spec: logformat.Field) -> pl.Expr:
    return pl.col(column).cast(pl.Float64, strict=False) * spec.unit


def _parse_access_block(block: bytes, first: int, layout: Layout) -> Parsed:
    """The block's usable lines (``first``: the number of its first line) as rows for
    :class:`_Stage`; the rest as skips."""
    lines = _lines(block)
    lines = lines.with_columns(pl.int_range(first, first + len(lines), eager=True).alias("number"))
    return _parse_lines(lines.filter(pl.col("line") != ""), layout)


def _parse_lines(lines: pl.DataFrame, layout: Layout, keyed: Callable[[pl.DataFrame], pl.DataFrame] | None = None) -> Parsed:
    """Lines that are not blank (``line``, ``number``) as rows and skips: the reference
    the engine's fast path (crates/logparse) agrees with, and the judge of every line
    that fast path leaves (see :func:`_engine_block`). ``keyed``: how clients and paths
    become keys (:func:`_keyed`)."""
    frame = logformat.split(lines, layout)
    fields = {f.role: f for f in layout.fields}
    time_spec = fields[TIME]
    expected = {logformat.CLF_TIME: "expected dd/Mon/yyyy:HH:MM:SS +zzzz", "epoch": "expected Unix seconds"}.get(
        time_spec.time_format, f"expected {time_spec.time_format}")
    frame = _requests(frame, layout).with_columns(
        _time(pl.col(TIME), time_spec).alias("time_s"), pl.col(STATUS).cast(pl.UInt16, strict=False).alias("status"),
        pl.col(SIZE).replace("-", "0").cast(pl.UInt64, strict=False).alias("logged_size"))
    # The first check a line fails, in this order, is why it is skipped.
    checks = [
        (~pl.col("fits"), "not Common/Combined Log Format" if layout is logformat.DEFAULT
         else f"not in the log format {layout.name!r}"),
        (pl.col("path").is_null(), "request line without METHOD /path"),
        (pl.col("time_s").is_null() | ~pl.col("time_s").is_finite(), f"bad timestamp ({expected})"),
        (~pl.col("status").is_between(100, 999).fill_null(False), "bad status (expected 100-999)"),
        (pl.col("logged_size").is_null(), "bad response size (expected digits or -)"),
        (pl.col("logged_size") > MAX_SIZE, "response size out of range"),
    ]
    reason = pl.when(checks[0][0]).then(pl.lit(checks[0][1]))
    for bad, why in checks[1:]:
        reason = reason.when(bad).then(pl.lit(why))
    frame = frame.with_columns(reason.alias("_reason"))
    skipped = frame.filter(pl.col("_reason").is_not_null()).group_by("_reason", maintain_order=True).agg(
        pl.len(), pl.col("number").head(EXAMPLES), pl.col("line").head(EXAMPLES))
    skips = [Skip(why, numbers, texts, total) for why, total, numbers, texts in skipped.iter_rows()]
    frame = frame.filter(pl.col("_reason").is_null())

    client = pl.col(HOST)
    if FORWARDED in fields:
        first = pl.col(FORWARDED).str.splitn(",", 2).struct.field("field_0").str.strip_chars()
        client = pl.when(first.is_in(["", "-"]).not_()).then(first).otherwise(client)
    columns = [client.alias("client"), pl.col("path"), pl.col("method"), pl.col("time_s"), pl.col("status"),
               pl.col("logged_size"), pl.col("number")]
    if RESPONSE in fields:
        columns.append(_number(RESPONSE, fields[RESPONSE]).alias(RESPONSE))
    elif "rest" in frame.columns and (frame["rest"] != "").any():
        value = pl.col("rest").str.extract(TRAILING_TIME, 1)
        unit = pl.when(value.str.contains(".", literal=True)).then(1.0).otherwise(1e-6)
        columns.append((value.cast(pl.Float64, strict=False) * unit).alias(RESPONSE))
    if UPSTREAM in fields:
        # nginx lists one time per upstream tried ("0.010, 0.020 : 0.005"); "-": none.
        times = pl.col(UPSTREAM).str.extract_all(r"[0-9]+(?:\.[0-9]+)?").list.eval(pl.element().cast(pl.Float64))
        columns.append(pl.when(times.list.len() > 0).then(times.list.sum()).alias(UPSTREAM))
    return Parsed((keyed or _keyed)(frame.select(columns)), len(lines), skips)


# ---------------------------------------------------------------------------------------
# World Cup 98 binary records.

# World Cup 98 binary log record (Internet Traffic Archive): 20 bytes, big-endian.
WC98_RECORD = np.dtype(
    [
        ("timestamp", ">u4"),
        ("client", ">u4"),
        ("object", ">u4"),
        ("size", ">u4"),
        ("method", "u1"),
        ("status", "u1"),
        ("type", "u1"),
        ("server", "u1"),
    ]
)
# The status byte: two high bits hold the request's HTTP version, the low six bits an
# index into the HTTP/1.1 status codes in the order of the ITA tools' table.
WC98_STATUS = np.array(
    [100, 101, 200, 201, 202, 203, 204, 205, 206, 300, 301, 302, 303, 304, 305,
     400, 401, 402, 403, 404, 405, 406, 407, 408, 409, 410, 411, 412, 413, 414, 415,
     500, 501, 502, 503, 504, 505],
    dtype=np.uint16,
)
WC98_METHODS = np.array(["GET", "HEAD", "POST", "PUT", "DELETE", "TRACE", "OPTIONS", "CONNECT", "other"])


def _record_blocks(pieces: Iterator[bytes]) -> Iterator[np.ndarray | bytes]:
    """Whole records, about a block at a time; then the bytes of a partial last record."""
    pending = b""
    for piece in pieces:
        pending += piece
        whole = len(pending) - len(pending) % WC98_RECORD.itemsize
        if whole >= BLOCK_BYTES // 2:
            yield np.frombuffer(pending[:whole], dtype=WC98_RECORD)
            pending = pending[whole:]
    whole = len(pending) - len(pending) % WC98_RECORD.itemsize
    if whole:
        yield np.frombuffer(pending[:whole], dtype=WC98_RECORD)
    if whole != len(pending):
        yield pending[whole:]


def _partial_record(tail: bytes, number: int) -> Parsed:
    return Parsed(pl.DataFrame(), 1, [Skip("partial record at end of file", [number], [f"{len(tail)} trailing bytes"], 1)])


def _parse_wc98_block(records: np.ndarray, first: int) -> Parsed:
    numbers = np.arange(first, first + len(records))
    status_index = records["status"] & 0x3F
    bad = (status_index >= len(WC98_STATUS)) | (records["method"] >= len(WC98_METHODS))
    skips = []
    if bad.any():
        shown = zip(records["status"][bad][:EXAMPLES], records["method"][bad][:EXAMPLES])
        skips.append(Skip("unknown status or method code", numbers[bad][:EXAMPLES].tolist(),
                          [f"status byte {s}, method {m}" for s, m in shown], int(bad.sum())))
    entries = len(records)
    records, numbers = records[~bad], numbers[~bad]
    return Parsed(_keyed(pl.DataFrame({
        "client": records["client"].astype(np.uint32),
        "path": "/wc98/" + pl.Series(records["object"].astype(np.uint32)).cast(pl.String),
        "method": WC98_METHODS[records["method"]],
        "time_s": records["timestamp"].astype(np.float64),
        "status": WC98_STATUS[records["status"] & 0x3F],
        "logged_size": records["size"].astype(np.uint64),
        "number": numbers,
    })), entries, skips)


# ---------------------------------------------------------------------------------------
# Pass 1: parsed blocks staged on disk, with what pass 2 needs.


@dataclass
class _Block:
    file: Path | None  # rows as an Arrow file
    low: int  # whole seconds
    high: int
    engine: _EngineRows | None = None  # and rows as the engine wrote them

    def rows(self) -> pl.DataFrame:
        """The block's rows (with their ``file``)."""
        parts = [pl.read_ipc(self.file)] if self.file is not None else []
        if self.engine is not None:
            parts.append(self.engine.frame())
        return parts[0] if len(parts) == 1 else pl.concat(parts, how="diagonal_relaxed")


# The engine's row columns (crates/logparse/src/block.rs) and their types.
ENGINE_COLUMNS = {"client": "<u8", "path_key": "<u8", "time_s": "<f8", "status": "<u2", "logged_size": "<u8",
                  "number": "<i8", RESPONSE: "<f8", UPSTREAM: "<f8"}
ENGINE_SECTIONS = {"path_key": "path"}


@dataclass
class _EngineRows:
    """A block's rows where the engine wrote them: read in pass 2, never copied in pass 1."""

    path: Path
    rows: int
    file_index: int
    offsets: dict[str, int]  # section -> byte offset in the file
    columns: dict[str, bool]  # optional column -> has values (else all null)

    def frame(self) -> pl.DataFrame:
        data = {}
        for name, dtype in ENGINE_COLUMNS.items():
            if name in (RESPONSE, UPSTREAM) and name not in self.columns:
                continue
            if name in self.columns and not self.columns[name]:
                data[name] = pl.Series(name, [None] * self.rows, dtype=pl.Float64)
                continue
            values = np.fromfile(self.path, dtype=dtype, count=self.rows, offset=self.offsets[ENGINE_SECTIONS.get(name, name)])
            data[name] = pl.Series(name, values).fill_nan(None) if name in (RESPONSE, UPSTREAM) else values
        return pl.DataFrame(data).with_columns(pl.lit(self.file_index, dtype=pl.UInt16).alias("file"))


def _keyed(frame: pl.DataFrame) -> pl.DataFrame:
    """Clients and paths by 64-bit hash (polars'), so no dictionary of them is kept per
    block; within one import a collision among even 10^8 distinct values has a chance
    of about 3·10^-4."""
    return frame.with_columns(pl.col("client").hash(), pl.col("path").hash().alias("path_key"))


@dataclass
class _Staged:
    """A parsed block as the report and pass 2 need it (its rows are in ``block.file``)."""

    entries: int
    skips: list[Skip]
    block: _Block | None = None
    first_s: float = 0.0
    last_s: float = 0.0
    paths: pl.DataFrame | None = None
    seconds: pl.DataFrame | None = None
    methods: dict[str, int] = field(default_factory=dict)
    columns: set[str] = field(default_factory=set)


def _staged(parse: Callable[[], Parsed], file_index: int, out: Path) -> _Staged:
    """On a worker: parse a block, write its rows to ``out``, and sum them up: each path's
    name and largest sizes, lines per logged second, requests per method."""
    parsed = parse()
    staged = _Staged(parsed.entries, parsed.skips)
    if len(parsed.frame):
        staged.methods, staged.paths, staged.seconds = _summary(parsed.frame)
        _write_rows(staged, parsed.frame.drop("method", "path"), file_index, out)
    return staged


def _summary(frame: pl.DataFrame) -> tuple[dict[str, int], pl.DataFrame, pl.DataFrame]:
    """Requests per method; per path (by key) its name and largest logged sizes (any
    status; 200); lines per logged second."""
    return (dict(frame["method"].value_counts().iter_rows()),
            frame.group_by("path_key").agg(pl.col("path").first(), pl.col("logged_size").max().alias("any"),
                                           pl.col("logged_size").filter(pl.col("status") == 200).max().alias("ok")),
            frame.group_by(pl.col("time_s").floor().cast(pl.Int64).alias("second")).len())


def _write_rows(staged: _Staged, frame: pl.DataFrame, file_index: int, out: Path) -> None:
    """The block's rows to ``out`` (with their file), and their time range."""
    staged.columns = {c for c in (RESPONSE, UPSTREAM) if c in frame.columns}
    staged.first_s, staged.last_s = frame["time_s"].min(), frame["time_s"].max()
    frame.with_columns(pl.lit(file_index, dtype=pl.UInt16).alias("file")).write_ipc(out)
    staged.block = _Block(out, int(np.floor(staged.first_s)), int(np.floor(staged.last_s)))


class _Stage:
    """Every block's rows (temporary Arrow files) and the tables over them: each path's
    name and sizes, the count of lines per logged second."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.blocks: list[_Block] = []
        self.paths: list[pl.DataFrame] = []
        self.seconds: list[pl.DataFrame] = []
        self.columns: set[str] = set()
        self._files = 0

    def next_file(self) -> Path:
        """Where the next block's rows go."""
        self._files += 1
        return self.directory / f"{self._files:06d}.arrow"

    def add(self, staged: _Staged, counts: FileCounts, report: ImportReport) -> None:
        counts.entries += staged.entries
        for skip in staged.skips:
            report.skip(counts, skip)
        if staged.block is None:
            return
        for method, count in staged.methods.items():
            report.methods[method] = report.methods.get(method, 0) + count
        self.paths.append(staged.paths)
        self.seconds.append(staged.seconds)
        if len(self.seconds) > 64:
            self.paths, self.seconds = [self.path_table()], [self._histogram()]
        counts.first_s = staged.first_s if counts.first_s is None else min(counts.first_s, staged.first_s)
        counts.last_s = staged.last_s if counts.last_s is None else max(counts.last_s, staged.last_s)
        self.columns |= staged.columns
        self.blocks.append(staged.block)

    def path_table(self) -> pl.DataFrame:
        """Per path (by key): its name and its largest logged sizes (any status; 200)."""
        return pl.concat(self.paths).group_by("path_key").agg(
            pl.col("path").first(), pl.col("any").max(), pl.col("ok").max())

    def _histogram(self) -> pl.DataFrame:
        return pl.concat(self.seconds).group_by("second").agg(pl.col("len").sum())

    def histogram(self) -> tuple[np.ndarray, np.ndarray]:
        """Logged seconds (sorted) and the lines in each."""
        table = self._histogram().sort("second")
        return table["second"].to_numpy(), table["len"].to_numpy().astype(np.int64)


# ---------------------------------------------------------------------------------------
# Time outliers and gaps.


def _kept_range(seconds: np.ndarray, lines: np.ndarray, report: ImportReport) -> tuple[int, int]:
    """Indexes (inclusive) into ``seconds`` of the lines kept in time, the outliers cut
    off beyond dominating gaps recorded in the report."""
    low, high = 0, len(seconds) - 1
    total = int(lines.sum())
    while high > low:
        gaps = np.diff(seconds[low:high + 1])
        at = int(np.argmax(gaps))
        if gaps[at] <= DOMINANT_GAP * (seconds[high] - seconds[low]):
            break
        before, after = int(lines[low:low + at + 1].sum()), int(lines[low + at + 1:high + 1].sum())
        if min(before, after) > OUTLIER_SHARE * total:
            break  # two large parts: a real gap, named below and by `trace stats`
        if before <= after:
            cut = (low, low + at)
            low = low + at + 1
        else:
            cut = (low + at + 1, high)
            high = low + at
        report.outliers.append(Outlier(int(lines[cut[0]:cut[1] + 1].sum()), float(seconds[cut[0]]),
                                       float(seconds[cut[1]]), float(gaps[at])))
    return low, high


def _name_outliers(stage: _Stage, files: list[FileCounts], report: ImportReport) -> None:
    """Example lines of each outlier group, and outliers counted as skipped unless kept."""
    for outlier in report.outliers:
        per_file = np.zeros(len(files), dtype=np.int64)
        for block in stage.blocks:
            if block.high < outlier.first_s or block.low > outlier.last_s:
                continue
            rows = block.rows().select("time_s", "file", "number").filter(
                pl.col("time_s").floor().is_between(outlier.first_s, outlier.last_s))
            per_file += np.bincount(rows["file"].to_numpy(), minlength=len(files))
            for index, number in rows.head(EXAMPLES - len(outlier.examples)).select("file", "number").iter_rows():
                outlier.examples.append(f"{files[index].path} line {number}")
        if not report.kept_outliers:
            reason = "time outlier (beyond a gap of most of the log's span)"
            report.reasons[reason] = report.reasons.get(reason, 0) + outlier.lines
            report.skipped += outlier.lines
            for counts, skipped in zip(files, per_file):
                counts.skipped += int(skipped)


# ---------------------------------------------------------------------------------------
# Pass 2: sorted rows, a bucket of whole seconds at a time.

GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _uniform(seed: int, keys: np.ndarray) -> np.ndarray:
    """A uniform number in [0, 1) per key: SplitMix64's output function (Steele, Lea and
    Flood 2014) of key·golden + seed, so a line's place in its second depends on the seed
    and the line alone, not on how the input was cut into blocks."""
    with np.errstate(over="ignore"):
        z = keys.astype(np.uint64) * GOLDEN + np.uint64(seed % 2**64)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z ^= z >> np.uint64(31)
    return (z >> np.uint64(11)).astype(np.float64) * 2.0**-53


def _buckets(seconds: np.ndarray, lines: np.ndarray) -> list[tuple[int, int]]:
    """Ranges [first, last] of whole seconds holding about BUCKET_ROWS lines each."""
    cumulative = np.cumsum(lines)
    ends = np.searchsorted(cumulative, np.arange(BUCKET_ROWS, cumulative[-1], BUCKET_ROWS), side="left")
    ends = np.unique(np.append(ends, len(seconds) - 1))
    starts = np.concatenate([[0], ends[:-1] + 1])
    return [(int(seconds[s]), int(seconds[e])) for s, e in zip(starts, ends)]


class _FirstSeen:
    """Client numbers 0, 1, ... in order of first appearance, over successive chunks."""

    def __init__(self):
        self.keys = np.zeros(0, dtype=np.uint64)  # sorted
        self.numbers = np.zeros(0, dtype=np.uint32)

    def __call__(self, keys: np.ndarray) -> np.ndarray:
        codes, distinct = pd.factorize(keys)  # distinct in order of first appearance
        where = np.searchsorted(self.keys, distinct).clip(max=max(len(self.keys) - 1, 0))
        known = (self.keys[where] == distinct) if len(self.keys) else np.zeros(len(distinct), bool)
        numbers = np.empty(len(distinct), dtype=np.uint32)
        numbers[known] = self.numbers[where[known]]
        numbers[~known] = np.arange(len(self.keys), len(self.keys) + int((~known).sum()), dtype=np.uint32)
        merged = np.concatenate([self.keys, distinct[~known]])
        order = np.argsort(merged, kind="stable")
        self.keys, self.numbers = merged[order], np.concatenate([self.numbers, numbers[~known]])[order]
        return numbers[codes]


def _sorted_chunks(stage: _Stage, files: list[FileCounts], rank: np.ndarray, seconds: np.ndarray,
                   lines: np.ndarray, seed: int, resolution: float, progress: Progress | None) -> Iterator[pl.DataFrame]:
    """The trace, in time order, about BUCKET_ROWS rows at a time."""
    # One size per path: its largest 200 response, else its largest of any status; found
    # by key with a binary search (every row's path is in the table).
    paths = stage.path_table().select("path_key", "path", pl.coalesce("ok", "any").alias("size")).sort("path_key")
    path_keys, path_sizes = paths["path_key"].to_numpy(), paths["size"].to_numpy()
    clients = _FirstSeen()
    start = float(seconds[0])
    offset = None
    written = 0
    per_file = np.zeros(len(files), dtype=np.int64)
    for first, last in _buckets(seconds, lines):
        parts = [b.rows() for b in stage.blocks if b.high >= first and b.low <= last]
        chunk = pl.concat(parts, how="diagonal_relaxed").filter((pl.col("time_s") >= first) & (pl.col("time_s") < last + 1))
        file = chunk["file"].to_numpy()
        keys = (rank[file].astype(np.uint64) << np.uint64(40)) | chunk["number"].to_numpy().astype(np.uint64)
        arrival = (chunk["time_s"].to_numpy() - start) + _uniform(seed, keys) * resolution
        # By arrival, then key: one stable sort by arrival suffices unless two are equal.
        order = np.argsort(arrival, kind="stable")
        if (np.diff(arrival[order]) == 0).any():
            order = np.lexsort((keys, arrival))
        arrival = arrival[order]
        if offset is None:
            offset = float(arrival[0])
        at = np.searchsorted(path_keys, chunk["path_key"].to_numpy()[order])
        extra = [chunk[c].gather(order) if c in chunk.columns else pl.Series(c, [None] * len(chunk), dtype=pl.Float64)
                 for c in (RESPONSE, UPSTREAM) if c in stage.columns]
        per_file += np.bincount(file, minlength=len(files))
        written += len(chunk)
        if progress:
            progress("sort", written, int(lines.sum()))
        yield pl.DataFrame([
            pl.Series("arrival_s", arrival - offset), pl.Series("client", clients(chunk["client"].to_numpy()[order])),
            paths["path"].gather(at), pl.Series("size", path_sizes[at]), chunk["status"].gather(order),
            chunk["logged_size"].gather(order), *extra])
    for counts, imported in zip(files, per_file):
        counts.imported = int(imported)


# ---------------------------------------------------------------------------------------
# The import.

# Blocks parsed at once: polars' string kernels use one core per column of a block.
WORKERS = 2


def _jobs(path: Path, file_index: int, layout: Layout | None, counts: FileCounts, report: ImportReport,
          stage: _Stage, done: Callable[[int], None]) -> Iterator[Callable[[], _Staged]]:
    """One job per block of the file: parse it (lines numbered from 1) and stage its rows."""
    pieces = _decompressed(path, counts, report, done)
    first = 1
    if layout is not None:
        for block in _line_blocks(pieces):
            yield partial(_staged, partial(_parse_access_block, block, first, layout), file_index, stage.next_file())
            first += block.count(b"\n") + (not block.endswith(b"\n"))
    else:
        for records in _record_blocks(pieces):
            if isinstance(records, bytes):
                counts.truncated = report.truncated = True
                yield partial(_staged, partial(_partial_record, records, first), file_index, stage.next_file())
            else:
                yield partial(_staged, partial(_parse_wc98_block, records, first), file_index, stage.next_file())
                first += len(records)


def _in_order(pool: ThreadPoolExecutor, jobs: Iterator[Callable[[], _Staged]]) -> Iterator[_Staged]:
    """The jobs' results in order, at most WORKERS + 1 blocks in memory at once."""
    running: deque = deque()
    for job in jobs:
        running.append(pool.submit(job))
        if len(running) > WORKERS:
            yield running.popleft().result()
    while running:
        yield running.popleft().result()


# ---------------------------------------------------------------------------------------
# Access logs parsed by the engine (`sojourn-engine logparse`, crates/logparse): its fast
# path takes the lines it can decide exactly as :func:`_parse_lines` does and hands back
# the rest, which :func:`_parse_lines` judges. Cutting with polars' string kernels was the
# bottleneck (540-620k lines/s on two threads, docs/workloads.md "Import speed").

PIPE_BYTES = 1 << 20
# SOJOURN_IMPORT_PARSER=polars: parse with polars only (the reference; slower).
PARSER_VARIABLE = "SOJOURN_IMPORT_PARSER"
ENGINE_TIMES = {logformat.CLF_TIME: "clf", "%Y-%m-%dT%H:%M:%S%z": "iso", "epoch": "epoch"}


def _engine_layout(layout: Layout) -> str | None:
    """The layout as the engine reads it (crates/logparse/src/layout.rs); None for one
    it does not take: a time written otherwise, a separator no Latin-1 line holds."""
    if any(ord(c) > 0xFF for text in layout.separators for c in text):
        return None
    fields = []
    for spec in layout.fields:
        item = {"role": spec.role}
        if spec.role == TIME:
            if spec.time_format not in ENGINE_TIMES:
                return None
            item |= {"time": ENGINE_TIMES[spec.time_format], "unit": repr(spec.unit)}
        elif spec.role == RESPONSE:
            item["unit"] = repr(spec.unit)
        fields.append(item)
    return json.dumps({"separators": list(layout.separators), "fields": fields, "open_end": layout.open_end})


@functools.cache
def _engine_parses(engine: str, modified: float) -> bool:
    """The engine has `logparse` (a binary built before it has not)."""
    try:
        return subprocess.run([engine, "logparse", "--layout", _engine_layout(logformat.DEFAULT), "--out", "."],
                              stdin=subprocess.DEVNULL, capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _engine_command(layout: Layout) -> list[str] | None:
    """How to run the engine's parser for ``layout``; None: parse with polars."""
    if os.environ.get(PARSER_VARIABLE, "engine") == "polars" or (spec := _engine_layout(layout)) is None:
        return None
    from sojourn.engine import engine_path

    try:
        engine = engine_path(build=False)
    except FileNotFoundError:
        return None
    if not _engine_parses(str(engine), engine.stat().st_mtime):
        return None
    return [str(engine), "logparse", "--layout", spec]


MASK64 = (1 << 64) - 1


def _text_key(text: str) -> int:
    """The engine's key of a client or path text (crates/logparse/src/block.rs
    ``text_key``): its Latin-1 bytes as little-endian 64-bit words, the last zero-padded,
    each xored in and mixed by SplitMix64's output function."""
    data = text.encode("latin-1")
    h = 0x9E3779B97F4A7C15 ^ len(data)
    for at in range(0, len(data), 8):
        z = h ^ int.from_bytes(data[at:at + 8].ljust(8, b"\0"), "little")
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        h = z ^ (z >> 31)
    return h


def _text_keys(texts: pl.Series) -> np.ndarray:
    known = {text: _text_key(text) for text in texts.unique()}
    return np.array([known[text] for text in texts], dtype=np.uint64)


def _engine_keyed(frame: pl.DataFrame) -> pl.DataFrame:
    """:func:`_keyed` with the engine's keys, for the lines :func:`_parse_lines` judges
    beside the engine (few: most logs have none)."""
    return frame.with_columns(pl.Series("client", _text_keys(frame["client"])),
                              pl.Series("path_key", _text_keys(frame["path"])))


class _Names:
    """The texts of the engine's path numbers (one import)."""

    def __init__(self):
        self.paths = pl.Series("path", [], dtype=pl.String)

    def add(self, header: dict, sections: dict[str, memoryview]) -> None:
        """The paths a block adds (in the order of the blocks)."""
        if header["paths"]:
            texts = pl.Series("path", bytes(sections["paths"]).decode("utf-8").split("\n"), dtype=pl.String)
            self.paths = pl.concat([self.paths, texts], rechunk=False)


def _engine_block(header: dict, sections: dict[str, memoryview], places: dict[str, tuple[int, int]], written: Path,
                  layout: Layout, names: _Names, file_index: int, out: Path) -> _Staged:
    """On a worker: a block as the engine parsed and summed it up (its rows stay in the
    engine's file ``written``), its pending lines judged by :func:`_parse_lines`, staged as
    :func:`_staged` does."""
    staged = _Staged(header["entries"], [])
    rows = header["rows"]
    paths, seconds, times = [], [], []
    block = _Block(None, 0, 0)
    if rows:
        roles = layout.roles()
        present = {RESPONSE: RESPONSE in roles or (layout.open_end and header["rest"]), UPSTREAM: UPSTREAM in roles}
        block.engine = _EngineRows(written, rows, file_index, {name: at for name, (at, _) in places.items()},
                                   {c: places[c][1] > 0 for c, there in present.items() if there})
        staged.columns = set(block.engine.columns)
        time_s = np.frombuffer(sections["time_s"], dtype="<f8")
        times += [time_s.min(), time_s.max()]
        codes = np.frombuffer(sections["block_paths"], dtype="<u4")
        ok = np.frombuffer(sections["block_ok"], dtype="<i8")
        paths.append(pl.DataFrame({
            "path_key": np.frombuffer(sections["block_keys"], dtype="<u8"), "path": names.paths.gather(codes),
            "any": np.frombuffer(sections["block_any"], dtype="<u8"),
            "ok": pl.Series(ok.astype(np.uint64)).scatter(np.flatnonzero(ok < 0), None)}))
        seconds.append(pl.DataFrame({"second": np.frombuffer(sections["seconds"], dtype="<i8"),
                                     "len": np.frombuffer(sections["lines"], dtype="<u4")}))
        staged.methods = dict(header["methods"])
    if header["pending"]:
        lines = _lines(bytes(sections["pending_lines"])).with_columns(
            pl.Series("number", np.frombuffer(sections["pending_numbers"], dtype="<i8")))
        judged = _parse_lines(lines, layout, _engine_keyed)
        staged.skips = judged.skips
        if len(judged.frame):
            methods, judged_paths, judged_seconds = _summary(judged.frame)
            for method, count in methods.items():
                staged.methods[method] = staged.methods.get(method, 0) + count
            paths.append(judged_paths)
            seconds.append(judged_seconds)
            frame = judged.frame.drop("method", "path")
            staged.columns |= {c for c in (RESPONSE, UPSTREAM) if c in frame.columns}
            times += [frame["time_s"].min(), frame["time_s"].max()]
            frame.with_columns(pl.lit(file_index, dtype=pl.UInt16).alias("file")).write_ipc(out)
            block.file = out
    if times:
        staged.paths, staged.seconds = pl.concat(paths), pl.concat(seconds)
        staged.first_s, staged.last_s = float(min(times)), float(max(times))
        block.low, block.high = int(np.floor(staged.first_s)), int(np.floor(staged.last_s))
        staged.block = block
    return staged


# The sections of an engine block read in pass 1; the rows' other columns wait for pass 2.
PASS1_SECTIONS = ("paths", "time_s", "pending_numbers", "pending_lines", "block_paths", "block_keys", "block_any",
                  "block_ok", "seconds", "lines")


def _reply(path: Path) -> tuple[dict, dict[str, memoryview], dict[str, tuple[int, int]]]:
    """A block as `sojourn-engine logparse` wrote it (crates/logparse/src/block.rs): its
    header, the sections pass 1 reads, and every section's (offset, size) in the file."""
    with open(path, "rb") as handle:
        length = int.from_bytes(handle.read(8), "little")
        header = json.loads(handle.read(length))
        places, at = {}, 8 + length
        for name, size in header["sections"]:
            places[name] = (at, size)
            at += size
        sections = {}
        for name in PASS1_SECTIONS:
            handle.seek(places[name][0])
            sections[name] = memoryview(handle.read(places[name][1]))
    return header, sections, places


def _engine_staged(command: list[str], paths: list[Path], layout: Layout, report: ImportReport, stage: _Stage,
                   done: Callable[[int], None]) -> Iterator[tuple[FileCounts, _Staged]]:
    """Every block of every file parsed by the engine, staged in order. The engine reads
    plain files itself; a thread sends it gzip files' blocks, decompressed. While the engine
    parses a block, workers stage the ones before (:func:`_engine_block`)."""
    command = [*command, "--out", str(stage.directory), "--block-bytes", str(BLOCK_BYTES)]
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    with contextlib.suppress(AttributeError, OSError):  # Linux: fewer, larger pipe transfers
        fcntl.fcntl(process.stdin.fileno(), fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    sent: queue.SimpleQueue = queue.SimpleQueue()
    failed: list[BaseException] = []

    def request(kind: int, data: bytes, first: int = 0) -> None:
        process.stdin.write(struct.pack("<QQq", kind, len(data), first))
        process.stdin.write(data)

    def send() -> None:
        try:
            for index, (path, counts) in enumerate(zip(paths, report.files)):
                with open(path, "rb") as handle:
                    gz = handle.read(2) == GZIP_MAGIC
                if not gz:
                    sent.put((index, True))
                    request(1, os.fsencode(path.resolve()))
                    process.stdin.flush()
                    continue
                first = 1
                for block in _line_blocks(_decompressed(path, counts, report, done)):
                    sent.put((index, False))
                    request(0, block, first)
                    first += block.count(b"\n") + (not block.endswith(b"\n"))
                process.stdin.flush()
        except BaseException as err:  # noqa: BLE001 - raised in the caller's thread below
            failed.append(err)
        finally:
            with contextlib.suppress(OSError):
                process.stdin.close()
            sent.put(None)

    def replies() -> Iterator[Callable[[], tuple[FileCounts, _Staged]]]:
        names = _Names()
        while (item := sent.get()) is not None:
            index, whole_file = item
            while True:
                line = process.stdout.readline()
                if not line:
                    raise RuntimeError(f"sojourn-engine logparse stopped: {process.stderr.read().decode(errors='replace')}")
                told = json.loads(line)
                written = Path(told["file"])
                header, sections, places = _reply(written)
                if whole_file:
                    done(told["bytes"])
                names.add(header, sections)  # in block order, here
                yield partial(lambda i, job: (report.files[i], job()), index,
                              partial(_engine_block, header, sections, places, written, layout, names, index,
                                      stage.next_file()))
                if told["last"]:
                    break

    sender = threading.Thread(target=send, name="sojourn-import-read", daemon=True)
    sender.start()
    finished = False
    try:
        with ThreadPoolExecutor(WORKERS) as pool:
            yield from _in_order(pool, replies())
        finished = True
    finally:
        if not finished or failed:
            process.kill()
        sender.join()
        errors = process.stderr.read().decode(errors="replace").strip()
        process.wait()
        process.stdout.close()
        process.stderr.close()
    if failed:
        raise failed[0]
    if process.returncode != 0:
        raise RuntimeError(f"sojourn-engine logparse failed (exit {process.returncode}): {errors or 'no message'}")


def _ahead(items: Iterator[pl.DataFrame]) -> Iterator[pl.DataFrame]:
    """``items``, the next one made on a thread while the caller writes this one."""
    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(next, items, None)
        while (item := future.result()) is not None:
            future = pool.submit(next, items, None)
            yield item


def _paths(paths) -> list[Path]:
    return [Path(paths)] if isinstance(paths, (str, os.PathLike)) else [Path(p) for p in paths]


def import_chunks(kind: str, paths, seed: int = 0, log_format: str | None = None, keep_outliers: bool = False,
                  progress: Progress | None = None) -> tuple[ImportReport, Iterator[pl.DataFrame]]:
    """Read every file (pass 1) and return the report and the trace's rows in time order
    (pass 2, lazily: consume the iterator, then the report's per-file import counts are
    final). ``kind``: ``clf`` (access logs, any ``log_format``) or ``wc98``."""
    layout = logformat.layout(log_format) if kind == "clf" else None
    if kind == "wc98" and log_format is not None:
        raise ValueError("a log format applies to access logs (clf), not to WC98 binary records")
    paths = _paths(paths)
    report = ImportReport(source=", ".join(str(p) for p in paths), kept_outliers=keep_outliers)
    report.files = [FileCounts(str(p)) for p in paths]
    temporary = tempfile.TemporaryDirectory(prefix="sojourn-import-")
    stage = _Stage(Path(temporary.name))
    total_bytes = sum(p.stat().st_size for p in paths)
    read = [0]

    def done(count: int) -> None:
        read[0] += count
        if progress:
            progress("read", read[0], total_bytes)

    try:
        command = _engine_command(layout) if layout is not None else None
        if command is not None:
            for counts, staged in _engine_staged(command, paths, layout, report, stage, done):
                stage.add(staged, counts, report)
            report.entries = sum(counts.entries for counts in report.files)
        else:
            with ThreadPoolExecutor(WORKERS) as pool:
                for index, (path, counts) in enumerate(zip(paths, report.files)):
                    for staged in _in_order(pool, _jobs(path, index, layout, counts, report, stage, done)):
                        stage.add(staged, counts, report)
                    report.entries += counts.entries
        if not stage.blocks:
            raise ValueError(f"{report.summary()}; nothing usable to import")

        seconds, lines = stage.histogram()
        low, high = _kept_range(seconds, lines, report)
        _name_outliers(stage, report.files, report)
        if not keep_outliers:
            seconds, lines = seconds[low:high + 1], lines[low:high + 1]
        report.span_s = float(seconds[-1] - seconds[0])
        if len(seconds) > 1:
            gaps = np.diff(seconds)
            at = int(np.argmax(gaps))
            report.largest_gap_s, report.largest_gap_at_s = float(gaps[at]), float(seconds[at])
        report.imported = int(lines.sum())
        report.columns = [c for c in (RESPONSE, UPSTREAM) if c in stage.columns]
        # Files in time order (then by name): a line's key, hence its place in its second,
        # does not depend on the order the files were named in.
        given = list(report.files)
        report.files.sort(key=lambda c: (c.first_s is None, c.first_s or 0.0, c.path))
        rank = np.array([next(i for i, f in enumerate(report.files) if f is c) for c in given])
    except BaseException:
        temporary.cleanup()
        raise

    def chunks() -> Iterator[pl.DataFrame]:
        try:
            yield from _ahead(_sorted_chunks(stage, given, rank, seconds, lines, seed,
                                             layout.resolution_s if layout else 1.0, progress))
        finally:
            temporary.cleanup()

    return report, chunks()


def _import(kind: str, paths, seed: int, log_format: str | None, keep_outliers: bool) -> tuple[pd.DataFrame, ImportReport]:
    report, chunks = import_chunks(kind, paths, seed=seed, log_format=log_format, keep_outliers=keep_outliers)
    return pl.concat(list(chunks)).to_pandas(), report


def import_clf(paths, seed: int = 0, log_format: str | None = None, keep_outliers: bool = False) -> tuple[pd.DataFrame, ImportReport]:
    """Import access logs (Common/Combined by default, else ``log_format``) as a trace in memory."""
    return _import("clf", paths, seed, log_format, keep_outliers)


def import_wc98(paths, seed: int = 0, keep_outliers: bool = False) -> tuple[pd.DataFrame, ImportReport]:
    """Import World Cup 98 binary logs (plain or gzip) as a trace in memory."""
    return _import("wc98", paths, seed, None, keep_outliers)


IMPORTERS = {"clf": import_clf, "wc98": import_wc98}
