"""What the runner derives from a finished repetition's records (result format 2,
sojourn.analysis.results): the CSVs as Parquet and the ideal PS/SRPT schedules of its
requests, which start the simulator; kept here so analysis and the report only read."""

from __future__ import annotations

import json
from pathlib import Path

from sojourn.analysis.records import read_intervals, read_records, requests, to_stored
from sojourn.analysis.results import FORMAT_FILE, FORMAT_VERSION, PARQUET_COMPRESSION


def write_derived(directory: str | Path, link_bps: float, timestamps: bool = True) -> list[str]:
    """At the end of a repetition: records and intervals as Parquet beside their CSV,
    the ideal PS/SRPT schedules of its requests (``ideal.parquet``, so the report only
    reads), and ``format.json``. Returns notes on what could not be written (e.g. no
    engine for the ideal schedules); the CSVs stay the primary copy."""
    directory = Path(directory)
    notes = []
    records_csv = directory / "records.csv"
    if records_csv.is_file() and records_csv.stat().st_size > 0:
        records = read_records(records_csv)
        to_stored(records).to_parquet(directory / "records.parquet", compression=PARQUET_COMPRESSION, index=False)
        reqs = requests(records)
        if reqs["completed"].any():
            try:
                from sojourn.theory import bounds

                frame = bounds.ideal(reqs[["request_id", "scheduled_s", "expected_size", "bytes"]],
                                     link_bps=bounds.body_rate_bps(link_bps, timestamps), policies=("ps", "srpt"))
                frame.to_parquet(directory / "ideal.parquet", compression=PARQUET_COMPRESSION, index=False)
            except Exception as err:  # noqa: BLE001 - the ideal is a reference; its absence is noted, not fatal
                notes.append(f"ideal schedules not stored: {err}")
    intervals_csv = directory / "intervals.csv"
    if intervals_csv.is_file() and intervals_csv.stat().st_size > 0:
        read_intervals(intervals_csv).to_parquet(directory / "intervals.parquet", compression=PARQUET_COMPRESSION,
                                                 index=False)
    (directory / FORMAT_FILE).write_text(json.dumps({"version": FORMAT_VERSION}) + "\n")
    return notes
