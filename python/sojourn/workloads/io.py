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

Reading uses pyarrow's CSV reader, writing polars' CSV writer: millions of rows take about a second.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
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
    _check(pl.from_pandas(df[list(REQUIRED_COLUMNS)]), source)


def _missing(columns: list[str], source: str) -> None:
    raise TraceFormatError(
        f"{source}: missing required column(s) {', '.join(columns)}; a trace needs "
        f"{', '.join(REQUIRED_COLUMNS)} (docs/formats.md)"
    )


def _check(frame: pl.DataFrame, source: str, first_row: int = 1, before: float = 0.0) -> None:
    """Check the required columns of ``frame``, whose first row is data row ``first_row``
    and follows a row at ``before`` seconds."""
    arrival = frame["arrival_s"].cast(pl.Float64).fill_null(np.nan).to_numpy()
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
    paths = frame["path"].cast(pl.String)
    bad = np.flatnonzero((~paths.str.starts_with("/") | paths.str.contains("[, \t\r\n]")).fill_null(True).to_numpy())
    if bad.size:
        raise _bad(first_row + int(bad[0]), "path", paths[int(bad[0])], source)
    for column in ("client", "size"):
        if frame[column].dtype.is_unsigned_integer():  # whole and non-negative by type (an importer's chunks)
            bad = np.flatnonzero(frame[column].is_null().to_numpy())
        else:
            values = frame[column].cast(pl.Float64, strict=False).fill_null(np.nan).to_numpy()
            bad = np.flatnonzero(~np.isfinite(values) | (values < 0) | (values != np.floor(values)))
        if bad.size:
            raise _bad(first_row + int(bad[0]), column, frame[column][int(bad[0])], source)


# The trace columns' types for polars (the writer's side of REQUIRED/OPTIONAL_COLUMNS).
_POLARS_TYPES = {name: pl.from_arrow(pa.array([], type=dtype)).dtype
                 for name, dtype in {**REQUIRED_COLUMNS, **OPTIONAL_COLUMNS}.items()}


class TraceWriter:
    """A trace CSV written a chunk at a time (each a pandas or polars DataFrame or a
    pyarrow Table, in time order), checked as it goes, under a temporary name renamed by
    :meth:`close`; leaving the ``with`` block by an error removes it, so a reader never
    sees half a trace."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.rows = 0
        self._last = 0.0
        self._columns: list[str] | None = None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._tmp = self.path.with_name(self.path.name + ".partial")
        self._sink = open(self._tmp, "wb")

    def write(self, chunk: pd.DataFrame | pl.DataFrame | pa.Table) -> None:
        if isinstance(chunk, pd.DataFrame):
            chunk = pl.from_pandas(chunk)
        elif isinstance(chunk, pa.Table):
            chunk = pl.from_arrow(chunk)
        missing = [c for c in REQUIRED_COLUMNS if c not in chunk.columns]
        if missing:
            _missing(missing, str(self.path))
        if not len(chunk):
            return
        _check(chunk, str(self.path), first_row=self.rows + 1, before=self._last)
        # Required columns first, then the optional ones present, then any others.
        order = [c for c in _POLARS_TYPES if c in chunk.columns] + [c for c in chunk.columns if c not in _POLARS_TYPES]
        frame = chunk.select(pl.col(c).cast(_POLARS_TYPES[c]) if c in _POLARS_TYPES else pl.col(c) for c in order)
        if self._columns is not None and frame.columns != self._columns:
            raise TraceFormatError(f"{self.path}: a chunk has columns {frame.columns}, the trace {self._columns}")
        # Six decimals: arrival_s in microseconds; RFC 4180 quotes only a field that needs it
        # (a path may hold a quote; commas and whitespace are refused above).
        frame.write_csv(self._sink, include_header=self._columns is None, float_precision=6, quote_style="necessary")
        self._columns = frame.columns
        self.rows += len(frame)
        self._last = float(frame["arrival_s"][-1])

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
