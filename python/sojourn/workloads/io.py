"""Reading and writing traces (``trace.csv``, docs/formats.md "Trace").

Guarantees:

- :func:`write_trace` writes the required columns first (``arrival_s, client, path,
  size``), then the optional ones present (``session``, ``class``) and any extra
  columns (e.g. ``status``, ``logged_size`` from importers), with ``arrival_s`` as a
  decimal with exactly six fractional digits (microseconds). The file is written to a
  temporary name and renamed, so a reader never sees half a trace.
- :func:`read_trace` returns the same columns with the documented dtypes, or raises
  :class:`TraceFormatError` naming the first bad row (1-based data row, i.e. the line
  after the header) and column and saying what is accepted.

Both use pyarrow's CSV reader/writer, so millions of rows take about a second.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

REQUIRED_COLUMNS: dict[str, pa.DataType] = {
    "arrival_s": pa.float64(),
    "client": pa.uint32(),
    "path": pa.string(),
    "size": pa.uint64(),
}
OPTIONAL_COLUMNS: dict[str, pa.DataType] = {
    "session": pa.int64(),
    "class": pa.uint8(),
}
ACCEPTED = {
    "arrival_s": "a non-negative decimal number of seconds, non-decreasing down the file",
    "client": "an integer in 0..4294967295",
    "path": "an absolute URL path starting with '/' without ',' or spaces (percent-encode them)",
    "size": "a non-negative integer number of bytes",
    "session": "an integer (-1 or empty: no session)",
    "class": "an integer in 0..255 (empty: 0)",
}


class TraceFormatError(ValueError):
    """A trace file or DataFrame breaks the trace contract of docs/formats.md."""


def _bad(row: int, column: str, value: object, source: str) -> TraceFormatError:
    return TraceFormatError(
        f"{source}: data row {row} (line {row + 1}), column {column!r}: {value!r} is not "
        f"accepted; expected {ACCEPTED.get(column, 'a value of the documented type')}"
    )


def validate_trace(df: pd.DataFrame, source: str = "trace") -> None:
    """Check a trace DataFrame against the contract; raise :class:`TraceFormatError`."""
    missing = [c for c in REQUIRED_COLUMNS if c not in df.columns]
    if missing:
        raise TraceFormatError(
            f"{source}: missing required column(s) {', '.join(missing)}; a trace needs "
            f"{', '.join(REQUIRED_COLUMNS)} (docs/formats.md)"
        )
    arrival = df["arrival_s"].to_numpy(dtype=np.float64)
    bad = np.flatnonzero(~np.isfinite(arrival) | (arrival < 0))
    if bad.size:
        raise _bad(int(bad[0]) + 1, "arrival_s", float(arrival[bad[0]]), source)
    decreasing = np.flatnonzero(np.diff(arrival) < 0)
    if decreasing.size:
        row = int(decreasing[0]) + 1
        raise TraceFormatError(
            f"{source}: data row {row + 1}, column 'arrival_s': {float(arrival[row])!r} is earlier "
            f"than the row before ({float(arrival[row - 1])!r}); arrival times must be non-decreasing"
        )
    paths = pa.array(df["path"], type=pa.string(), from_pandas=True)
    ok = pc.and_(pc.starts_with(paths, "/"), pc.invert(pc.match_substring_regex(paths, "[, \t\r\n]")))
    ok = pc.fill_null(ok, False).to_numpy(zero_copy_only=False)
    bad = np.flatnonzero(~ok)
    if bad.size:
        raise _bad(int(bad[0]) + 1, "path", df["path"].iloc[bad[0]], source)
    for column in ("client", "size"):
        values = df[column].to_numpy()
        if values.dtype.kind == "f" or values.dtype.kind == "i":
            bad = np.flatnonzero(~np.isfinite(values.astype(np.float64)) | (values < 0) | (values != np.floor(values)))
            if bad.size:
                raise _bad(int(bad[0]) + 1, column, values[bad[0]], source)


def write_trace(df: pd.DataFrame, path: str | os.PathLike) -> Path:
    """Validate ``df`` and write it as a trace CSV (atomically); return the path."""
    path = Path(path)
    validate_trace(df, source=str(path))
    micros = np.rint(df["arrival_s"].to_numpy(dtype=np.float64) * 1e6).astype(np.int64)
    seconds = pa.array(micros // 1_000_000).cast(pa.string())
    fraction = pc.utf8_lpad(pa.array(micros % 1_000_000).cast(pa.string()), width=6, padding="0")
    columns = {"arrival_s": pc.binary_join_element_wise(seconds, fraction, ".")}
    for name, dtype in {**REQUIRED_COLUMNS, **OPTIONAL_COLUMNS}.items():
        if name in df.columns and name != "arrival_s":
            columns[name] = pa.array(df[name], from_pandas=True).cast(dtype)
    for name in df.columns:
        if name not in columns:
            columns[name] = pa.array(df[name], from_pandas=True)
    table = pa.table(columns)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".partial")
    with pa.OSFile(str(tmp), "wb") as sink:
        # The header is written here, unquoted (pyarrow only learnt to leave it unquoted in 23).
        sink.write((",".join(table.column_names) + "\n").encode())
        # RFC 4180: a field with a quote (a path may hold one; commas and whitespace are
        # refused above) is quoted, its quotes doubled. pyarrow's "needed" quotes every
        # string, so the plain style is kept for the usual trace that has no quote.
        quoted = pc.any(pc.match_substring(table["path"], '"')).as_py()
        options = pacsv.WriteOptions(include_header=False, quoting_style="needed" if quoted else "none")
        pacsv.write_csv(table, sink, write_options=options)
    os.replace(tmp, path)
    return path


def _first_unparsable(path: Path, column: str, dtype: pa.DataType) -> tuple[int, str]:
    """Row (1-based) and text of the first value in ``column`` that does not convert."""
    table = pacsv.read_csv(
        path,
        convert_options=pacsv.ConvertOptions(column_types={column: pa.string()}, include_columns=[column]),
    )
    values = table.column(column).to_pylist()
    for row, value in enumerate(values, start=1):
        if value in (None, ""):
            continue
        try:
            pa.array([value]).cast(dtype)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return row, value
    return 0, ""


def read_trace(path: str | os.PathLike) -> pd.DataFrame:
    """Read and validate a trace CSV; errors name the row, column and what is accepted."""
    path = Path(path)
    if not path.is_file():
        raise TraceFormatError(f"{path}: no such trace file")
    types = {**REQUIRED_COLUMNS, **OPTIONAL_COLUMNS}
    try:
        table = pacsv.read_csv(
            path,
            convert_options=pacsv.ConvertOptions(column_types=types, strings_can_be_null=False),
        )
    except pa.ArrowInvalid as error:
        message = str(error)
        index = re.search(r"column #(\d+)", message)
        if index:
            names = pacsv.open_csv(path, convert_options=pacsv.ConvertOptions(column_types={})).schema.names
            column = names[int(index.group(1))]
            row, value = _first_unparsable(path, column, types[column])
            if row:
                raise _bad(row, column, value, str(path)) from None
        raise TraceFormatError(f"{path}: not a trace CSV ({message.splitlines()[0]})") from None
    try:
        df = table.to_pandas()
    except UnicodeDecodeError as error:  # a column name that is not UTF-8 (found by fuzzing)
        raise TraceFormatError(f"{path}: not a trace CSV (column names must be UTF-8: {error.reason} at byte "
                               f"{error.start})") from None
    except pa.ArrowInvalid as error:  # a value that is not UTF-8 (found by fuzzing)
        raise TraceFormatError(f"{path}: not a trace CSV (text must be UTF-8: {error})") from None
    for column, fill in (("session", -1), ("class", 0)):
        if column in df.columns and df[column].isna().any():
            df[column] = df[column].fillna(fill).astype(types[column].to_pandas_dtype())
    validate_trace(df, source=str(path))
    return df
