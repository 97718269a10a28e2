"""Importing real logs as traces: Common/Combined Log Format and World Cup 98 binary.

Guarantees:

- Bad input is never fatal: every line or record that cannot be used is skipped and
  counted in the returned :class:`ImportReport` (with the first few line/record numbers
  and the reason), and the rest is imported. Only an input with *no* usable entry is an
  error.
- Logs have 1-second timestamps; each request is placed uniformly at random within its
  second, deterministically by ``seed`` (same log and seed, same trace), then the trace
  is sorted by time (stable) and starts at 0.
- ``size`` is the object's size: the largest body size logged for that path with
  status 200 (or with any status if it never had a 200), so trace and docroot agree on
  one size per path; the logged ``status`` and per-line ``logged_size`` are kept as
  extra columns. Query strings are dropped from paths. ``client`` numbers the distinct
  hosts (CLF) or client IDs (WC98) in order of first appearance.
- gzip-compressed input is recognized by its magic bytes; a truncated gzip stream is
  imported up to where it breaks and reported.
"""

from __future__ import annotations

import os
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from .io import validate_trace

GZIP_MAGIC = b"\x1f\x8b"
EXAMPLES = 5


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

    def skip(self, mask: np.ndarray, reason: str, label: str, numbers: np.ndarray) -> None:
        count = int(mask.sum())
        if not count:
            return
        self.skipped += count
        self.reasons[reason] = self.reasons.get(reason, 0) + count
        for number in numbers[mask][: max(0, EXAMPLES - len(self.examples))]:
            self.examples.append(f"{label} {int(number)}: {reason}")

    def summary(self) -> str:
        text = f"{self.source}: {self.imported} of {self.entries} entries imported, {self.skipped} skipped"
        if self.reasons:
            text += " (" + ", ".join(f"{n} {r}" for r, n in self.reasons.items()) + ")"
        if self.methods and set(self.methods) != {"GET"}:
            text += "; methods " + ", ".join(f"{m} {n}" for m, n in sorted(self.methods.items())) + " (all replayed as GET)"
        if self.truncated:
            text += "; input truncated"
        return text


def read_bytes(path: str | os.PathLike) -> tuple[bytes, bool]:
    """The file's bytes, gunzipped if it is gzip (all members); and whether the
    compressed stream ended early."""
    data = Path(path).read_bytes()
    if not data.startswith(GZIP_MAGIC):
        return data, False
    out = []
    while data:
        decompressor = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        try:
            out.append(decompressor.decompress(data))
        except zlib.error:
            return b"".join(out), True
        if not decompressor.eof:
            return b"".join(out), True
        data = decompressor.unused_data
    return b"".join(out), False


# Common Log Format, optionally followed by the Combined fields and a service time:
# host ident authuser [date] "request" status bytes ["referer" "user-agent" [micros]]
# (quoted fields may hold backslash escapes, as Apache writes them; our server's log,
# crates/server/src/access_log.rs, appends the microseconds like Apache's %D).
QUOTED = r'"(?:[^"\\]|\\.)*"'
CLF = (
    r'^(?P<host>\S+) \S+ \S+ \[(?P<time>[^\]]+)\] "(?P<request>(?:[^"\\]|\\.)*)" '
    rf"(?P<status>\d{{3}}) (?P<bytes>\d+|-)(?: {QUOTED} {QUOTED}(?: \d+)?)?\s*$"
)
# "METHOD target [HTTP/x.y]"; an absolute-form target keeps only its path, and the
# query is dropped (a docroot file has one content per path; replay is of static objects).
REQUEST = r"^(?P<method>[A-Z]+) (?:[a-zA-Z][a-zA-Z0-9+.-]*://[^/\s]*)?(?P<path>/[^\s?#]*)[^\s]*(?: HTTP/\d\.\d)?$"


def _percent_encode_escapes(paths: pa.Array) -> pa.Array:
    """CLF-escaped and CSV-structural characters of logged paths, percent-encoded."""
    for raw, encoded in (('\\"', "%22"), ("\\\\", "%5C"), ('"', "%22"), (",", "%2C")):
        paths = pc.replace_substring(paths, raw, encoded)
    return paths


def _spread(seconds: np.ndarray, seed: int) -> np.ndarray:
    """Place each 1-second timestamp uniformly within its second, by seed."""
    rng = np.random.default_rng(seed)
    return seconds + rng.random(len(seconds))


def _finish(frame: pd.DataFrame, report: ImportReport, source: str) -> pd.DataFrame:
    if frame.empty:
        raise ValueError(f"{report.summary()}; nothing usable to import")
    frame = frame.sort_values("arrival_s", kind="stable").reset_index(drop=True)
    frame["arrival_s"] -= frame["arrival_s"].iloc[0]
    ok = frame["status"] == 200
    best_ok = frame["logged_size"].where(ok).groupby(frame["path"]).transform("max")
    best_any = frame.groupby("path")["logged_size"].transform("max")
    frame["size"] = best_ok.fillna(best_any).astype(np.uint64)
    frame["client"] = pd.factorize(frame["client"])[0].astype(np.uint32)
    report.imported = len(frame)
    trace = frame[["arrival_s", "client", "path", "size", "status", "logged_size"]]
    validate_trace(trace, source=source)
    return trace


def _sources(paths: list[str | os.PathLike] | str | os.PathLike) -> tuple[ImportReport, list[tuple[str | os.PathLike, bytes]]]:
    """The import report for ``paths`` (one file or a list, concatenated in order) and each
    file's bytes, the report noting any compressed stream that ended early."""
    paths = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    report = ImportReport(source=", ".join(str(p) for p in paths))
    contents = []
    for path in paths:
        data, truncated = read_bytes(path)
        report.truncated |= truncated
        contents.append((path, data))
    return report, contents


def import_clf(paths: list[str | os.PathLike] | str | os.PathLike, seed: int = 0) -> tuple[pd.DataFrame, ImportReport]:
    """Import Common or Combined Log Format files (concatenated in the given order)."""
    report, contents = _sources(paths)
    texts = [data.decode("latin-1") for _, data in contents]
    # Arrow's RE2 kernels parse every line in C++: a million lines take seconds.
    lines = pa.array("".join(texts).splitlines(), type=pa.large_string())
    numbers = np.arange(1, len(lines) + 1)
    nonblank = pc.invert(pc.match_substring_regex(lines, r"^\s*$")).to_numpy(zero_copy_only=False)
    lines, numbers = lines.filter(pa.array(nonblank)), numbers[nonblank]
    report.entries = len(lines)

    fields = pc.extract_regex(lines, CLF)
    unparsed = fields.is_null().to_numpy(zero_copy_only=False)
    report.skip(unparsed, "not Common/Combined Log Format", "line", numbers)
    fields, numbers = fields.filter(pa.array(~unparsed)), numbers[~unparsed]

    request = pc.extract_regex(pc.struct_field(fields, "request"), REQUEST)
    bad_request = request.is_null().to_numpy(zero_copy_only=False)
    report.skip(bad_request, "request line without METHOD /path", "line", numbers)
    keep = pa.array(~bad_request)
    fields, request, numbers = fields.filter(keep), request.filter(keep), numbers[~bad_request]

    when = pc.strptime(pc.struct_field(fields, "time"), format="%d/%b/%Y:%H:%M:%S %z", unit="s", error_is_null=True)
    bad_time = when.is_null().to_numpy(zero_copy_only=False)
    report.skip(bad_time, "bad timestamp (expected dd/Mon/yyyy:HH:MM:SS +zzzz)", "line", numbers)
    keep = pa.array(~bad_time)
    fields, request, when, numbers = fields.filter(keep), request.filter(keep), when.filter(keep), numbers[~bad_time]

    # A size no response has (beyond 2^53 bytes, where a double stops counting bytes, or
    # beyond uint64) is a corrupt line, not an error of the import.
    logged = pc.struct_field(fields, "bytes")
    sizes = pc.cast(pc.if_else(pc.equal(logged, "-"), "0", logged), pa.float64())
    bad_size = pc.greater(sizes, float(2**53)).to_numpy(zero_copy_only=False)
    report.skip(bad_size, "response size out of range", "line", numbers)
    keep = pa.array(~bad_size)
    fields, request, when, sizes = fields.filter(keep), request.filter(keep), when.filter(keep), sizes.filter(keep)

    counts = pc.value_counts(pc.struct_field(request, "method")).to_pylist()
    report.methods = {item["values"]: int(item["counts"]) for item in counts}
    epoch = pc.cast(when, pa.int64()).to_numpy().astype(np.float64)
    frame = pd.DataFrame(
        {
            "arrival_s": _spread(epoch - (epoch.min() if len(epoch) else 0.0), seed),
            "client": pc.dictionary_encode(pc.struct_field(fields, "host")).indices.to_numpy(),
            # Apache writes a quote inside the request line as \" (and a backslash as \\):
            # percent-encoded here, as a URL path carries them (RFC 3986 §2.1).
            "path": _percent_encode_escapes(pc.struct_field(request, "path")).to_numpy(zero_copy_only=False),
            "status": pc.cast(pc.struct_field(fields, "status"), pa.uint16()).to_numpy(),
            "logged_size": sizes.to_numpy(zero_copy_only=False).astype(np.uint64),
        }
    )
    return _finish(frame, report, report.source), report


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
# GET, HEAD, POST, PUT, DELETE, TRACE, OPTIONS, CONNECT, other.
WC98_METHODS = 9


def import_wc98(paths: list[str | os.PathLike] | str | os.PathLike, seed: int = 0) -> tuple[pd.DataFrame, ImportReport]:
    """Import World Cup 98 binary logs (plain or gzip), concatenated in order."""
    report, contents = _sources(paths)
    parts = []
    for path, data in contents:
        whole = len(data) - len(data) % WC98_RECORD.itemsize
        if whole != len(data):
            report.truncated = True
            report.skipped += 1
            report.reasons["partial record at end of file"] = report.reasons.get("partial record at end of file", 0) + 1
            report.examples.append(f"{path}: {len(data) - whole} trailing bytes")
            report.entries += 1
        parts.append(np.frombuffer(data[:whole], dtype=WC98_RECORD))
    records = np.concatenate(parts) if parts else np.empty(0, dtype=WC98_RECORD)
    numbers = np.arange(1, len(records) + 1)
    report.entries += len(records)

    status_index = records["status"] & 0x3F
    bad = (status_index >= len(WC98_STATUS)) | (records["method"] >= WC98_METHODS)
    report.skip(bad, "unknown status or method code", "record", numbers)
    records = records[~bad]
    objects, distinct = pd.factorize(records["object"].astype(np.uint32))
    names = np.array([f"/wc98/{int(object_id)}" for object_id in distinct], dtype=object)
    frame = pd.DataFrame(
        {
            "arrival_s": _spread(records["timestamp"].astype(np.float64) - (records["timestamp"].min() if len(records) else 0), seed),
            "client": records["client"].astype(np.uint32),
            "path": names[objects],
            "status": WC98_STATUS[records["status"] & 0x3F],
            "logged_size": records["size"].astype(np.uint64),
        }
    )
    return _finish(frame, report, report.source), report


IMPORTERS = {"clf": import_clf, "wc98": import_wc98}
