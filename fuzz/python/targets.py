"""Fuzz targets for the parsers of untrusted input on the Python side, run with atheris:

    .venv/bin/python fuzz/python/targets.py spec -max_total_time=900 fuzz/corpus/py-spec
    (targets: spec, clf, wc98, trace; `make fuzz` runs them all)

Each target feeds arbitrary bytes to a reader and allows only the errors that reader
documents for bad input (the message names the bad input); anything else is a crash
that libFuzzer saves as a reproducer (then kept in python/tests/data/fuzz/<target>/ and
replayed by python/tests/test_fuzz_regressions.py, which imports this module without atheris).
"""

from __future__ import annotations

import os
import sys
import tempfile
import tomllib

from sojourn.runner.spec import SpecError, validate
from sojourn.workloads import importers
from sojourn.workloads import io as trace_io

SCRATCH = tempfile.mkdtemp(prefix="sojourn-fuzz-")


def _file(data: bytes) -> str:
    path = os.path.join(SCRATCH, "input")
    with open(path, "wb") as out:
        out.write(data)
    return path


def spec(data: bytes) -> None:
    """A spec file: TOML then the schema; only TOMLDecodeError or SpecError may come out."""
    try:
        raw = tomllib.loads(data.decode("utf-8", errors="replace"))
        validate(raw)
        validate(raw, quick=True)
    except (tomllib.TOMLDecodeError, SpecError):
        pass


def _import_and_round_trip(importer, data: bytes) -> None:
    """Any log imports (bad lines skipped and counted), and the trace it makes is written
    and read back with the same rows: what `sojourn trace import` does."""
    try:
        frame, report = importer(_file(data))
    except ValueError as err:
        if "nothing usable to import" in str(err):  # documented: no line was a log entry
            return
        raise
    assert report.entries >= report.skipped >= 0
    if len(frame):
        written = trace_io.write_trace(frame, os.path.join(SCRATCH, "trace.csv"))
        back = trace_io.read_trace(written)
        assert list(back["path"]) == list(frame["path"]), "a path did not survive the trace file"


def clf(data: bytes) -> None:
    _import_and_round_trip(importers.import_clf, data)


def wc98(data: bytes) -> None:
    _import_and_round_trip(importers.import_wc98, data)


def trace(data: bytes) -> None:
    """A trace.csv: read_trace accepts it or raises TraceFormatError naming the problem."""
    try:
        trace_io.read_trace(_file(data))
    except trace_io.TraceFormatError:
        pass


TARGETS = {"spec": spec, "clf": clf, "wc98": wc98, "trace": trace}


def main() -> None:
    import atheris  # only for fuzzing: the regression tests call the targets without it

    if len(sys.argv) < 2 or sys.argv[1] not in TARGETS:
        sys.exit(f"usage: {sys.argv[0]} {{{','.join(TARGETS)}}} [libFuzzer options] [corpus dir]")
    target = TARGETS[sys.argv.pop(1)]
    atheris.instrument_all()
    atheris.Setup(sys.argv, target)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
