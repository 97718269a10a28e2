"""Reading and writing traces (``trace.csv``, docs/formats.md "Trace").

Guarantees:

- :func:`write_trace` (and :class:`TraceWriter`, a chunk at a time) writes the required
  columns first (``arrival_s, client, path, size``), then the optional ones present
  (``session``, ``class``) and any extra columns (e.g. ``status``, ``logged_size``,
  ``response_s`` from importers), with ``arrival_s`` as a decimal with exactly six
  fractional digits (microseconds). The file is written to a temporary name and
  renamed, so a reader never sees half a trace.
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
        _missing(missing, source)
    _check(pa.Table.from_pandas(df[list(REQUIRED_COLUMNS)], preserve_index=False), source)


def _missing(columns: list[str], source: str) -> None:
    raise TraceFormatError(
        f"{source}: missing required column(s) {', '.join(columns)}; a trace needs "
        f"{', '.join(REQUIRED_COLUMNS)} (docs/formats.md)"
    )


def _check(table: pa.Table, source: str, first_row: int = 1, before: float = 0.0) -> None:
    """Check the required columns of ``table``, whose first row is data row ``first_row``
    and follows a row at ``before`` seconds."""
    arrival = table["arrival_s"].to_numpy().astype(np.float64)
    bad = np.flatnonzero(~np.isfinite(arrival) | (arrival < 0))
    if bad.size:
        raise _bad(first_row + int(bad[0]), "arrival_s", float(arrival[bad[0]]), source)
    decreasing = np.flatnonzero(np.diff(arrival, prepend=before) < 0)
    if decreasing.size:
        row = int(decreasing[0])
        earlier = float(arrival[row - 1]) if row else before
        raise TraceFormatError(
            f"{source}: data row {first_row + row}, column 'arrival_s': {float(arrival[row])!r} is earlier "
            f"than the row before ({earlier!r}); arrival times must be non-decreasing"
        )
    paths = table["path"].cast(pa.string())
    ok = pc.and_(pc.starts_with(paths, "/"), pc.invert(pc.match_substring_regex(paths, "[, \t\r\n]")))
    ok = pc.fill_null(ok, False).to_numpy(zero_copy_only=False)
    bad = np.flatnonzero(~ok)
    if bad.size:
        raise _bad(first_row + int(bad[0]), "path", paths[int(bad[0])].as_py(), source)
    for column in ("client", "size"):
        values = table[column].to_numpy()
        if values.dtype.kind in "fi":
            bad = np.flatnonzero(~np.isfinite(values.astype(np.float64)) | (values < 0) | (values != np.floor(values)))
            if bad.size:
                raise _bad(first_row + int(bad[0]), column, values[bad[0]], source)


class TraceWriter:
    """A trace CSV written a chunk at a time (each a DataFrame or pyarrow Table, in time
    order), checked as it goes, under a temporary name renamed by :meth:`close`; leaving
    the ``with`` block by an error removes it, so a reader never sees half a trace."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.rows = 0
        self._last = 0.0
        self._columns: list[str] | None = None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._tmp = self.path.with_name(self.path.name + ".partial")
        self._sink = pa.OSFile(str(self._tmp), "wb")

    def write(self, chunk: pd.DataFrame | pa.Table) -> None:
        if isinstance(chunk, pd.DataFrame):
            missing = [c for c in REQUIRED_COLUMNS if c not in chunk.columns]
            if missing:
                _missing(missing, str(self.path))
            chunk = pa.Table.from_pandas(chunk, preserve_index=False)
        missing = [c for c in REQUIRED_COLUMNS if c not in chunk.column_names]
        if missing:
            _missing(missing, str(self.path))
        if not len(chunk):
            return
        _check(chunk, str(self.path), first_row=self.rows + 1, before=self._last)
        table = _formatted(chunk)
        if self._columns is None:
            self._columns = table.column_names
            # The header is written here, unquoted (pyarrow only learnt to leave it unquoted in 23).
            self._sink.write((",".join(self._columns) + "\n").encode())
        elif table.column_names != self._columns:
            raise TraceFormatError(f"{self.path}: a chunk has columns {table.column_names}, the trace {self._columns}")
        # RFC 4180: a field with a quote (a path may hold one; commas and whitespace are
        # refused above) is quoted, its quotes doubled. pyarrow's "needed" quotes every
        # string, so the plain style is kept for the usual chunk that has no quote.
        quoted = pc.any(pc.match_substring(table["path"], '"')).as_py()
        options = pacsv.WriteOptions(include_header=False, quoting_style="needed" if quoted else "none")
        pacsv.write_csv(table, self._sink, write_options=options)
        self.rows += len(chunk)
        self._last = float(pc.max(chunk["arrival_s"]).as_py())

    def close(self) -> Path:
        if self._columns is None:
            raise TraceFormatError(f"{self.path}: no rows to write")
        self._sink.close()
        os.replace(self._tmp, self.path)
        return self.path

    def discard(self) -> None:
        self._sink.close()
        self._tmp.unlink(missing_ok=True)

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, kind, error, trace) -> None:
        if kind is None:
            self.close()
        else:
            self.discard()


def _formatted(table: pa.Table) -> pa.Table:
    """The columns as written: required, then optional, then any others; ``arrival_s`` with
    exactly six decimals."""
    arrival = table["arrival_s"].to_numpy().astype(np.float64)
    micros = np.rint(arrival * 1e6).astype(np.int64)
    seconds = pa.array(micros // 1_000_000).cast(pa.string())
    fraction = pc.utf8_lpad(pa.array(micros % 1_000_000).cast(pa.string()), width=6, padding="0")
    columns = {"arrival_s": pc.binary_join_element_wise(seconds, fraction, ".")}
    for name, dtype in {**REQUIRED_COLUMNS, **OPTIONAL_COLUMNS}.items():
        if name in table.column_names and name != "arrival_s":
            columns[name] = table[name].cast(dtype)
    for name in table.column_names:
        if name not in columns:
            columns[name] = table[name]
    return pa.table(columns)


def write_trace(df: pd.DataFrame, path: str | os.PathLike) -> Path:
    """Validate ``df`` and write it as a trace CSV (atomically); return the path."""
    with TraceWriter(path) as writer:
        writer.write(df)
    return writer.path


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
