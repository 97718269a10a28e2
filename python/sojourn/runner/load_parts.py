"""A run's load from several load generator processes (``workload.load_processes``): each
runs part I of K of the clients (``load --process-part I/K``) into a directory of its own,
with an open-file limit of its own (root cannot raise RLIMIT_NOFILE here, docs/testbed.md
"Open files"), and their files are merged into the run's: records.csv (ids are run-wide),
intervals.csv (summed per second) and the generator's summary.json.

Guarantees: every record of every part is in the merged records.csv once; the merged
summary's counts are the parts' sums, and where a statistic cannot be combined exactly (a
percentile) it is the largest of the parts', an upper bound, as ``percentiles`` says; each
part's own summary is kept under ``processes``.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

# Load summary keys (docs/load.md) summed over the parts, and those whose largest is kept.
SUMMED = ("attempts", "bytes", "connections_opened", "requests", "record_writer_waits", "loop_involuntary_switches",
          "loop_runqueue_wait_s", "throughput_rps")
LARGEST = ("duration_s", "loop_longest_pass_s", "loop_worst_second_runqueue_wait_s", "loop_busy_fraction")
COUNTED = ("outcomes", "attempt_outcomes")
DISTRIBUTIONS = ("lag_s", "response_time_s", "service_time_s", "ttfb_s")


def part_dir(out: Path, index: int) -> Path:
    return out / f"process-{index}"


def merge(parts: list[Path], out: Path) -> None:
    """Writes out/records.csv, out/intervals.csv and out/summary.json from the parts' (whose
    records and intervals then go: the merged files hold them; their options, logs and
    summaries stay)."""
    _concatenate(parts, out, "records.csv")
    _sum_intervals(parts, out / "intervals.csv")
    summaries = [json.loads((part / "summary.json").read_text()) for part in parts if (part / "summary.json").is_file()]
    if summaries:
        (out / "summary.json").write_text(json.dumps(merged_summary(summaries), indent=2) + "\n")
    for part in parts:
        for name in ("records.csv", "intervals.csv"):
            (part / name).unlink(missing_ok=True)


def merged_summary(summaries: list[dict]) -> dict:
    """One load summary from the parts' (see the module's guarantees)."""
    merged = {key: value for key, value in summaries[0].items() if key not in ("process_part",)}
    for key in SUMMED:
        if all(key in s for s in summaries):
            merged[key] = sum(s[key] for s in summaries)
    for key in LARGEST:
        if all(key in s for s in summaries):
            merged[key] = max(s[key] for s in summaries)
    for key in COUNTED:
        counts: dict[str, int] = {}
        for s in summaries:
            for name, count in (s.get(key) or {}).items():
                counts[name] = counts.get(name, 0) + count
        merged[key] = counts
    for key in DISTRIBUTIONS:
        parts = [s[key] for s in summaries if isinstance(s.get(key), dict) and s[key].get("count")]
        if parts:
            merged[key] = _distribution(parts)
    merged["interrupted_by_signal"] = any(s.get("interrupted_by_signal") for s in summaries)
    merged["loop_busy_fraction_per_thread"] = [f for s in summaries for f in s.get("loop_busy_fraction_per_thread", [])]
    merged["warnings"] = list(dict.fromkeys(w for s in summaries for w in s.get("warnings", [])))
    merged["percentiles"] = "the largest of the processes' (an upper bound)"
    merged["processes"] = summaries
    return merged


def _distribution(parts: list[dict]) -> dict:
    count = sum(p["count"] for p in parts)
    out = {"count": count, "mean": sum(p["mean"] * p["count"] for p in parts) / count,
           "min": min(p["min"] for p in parts), "max": max(p["max"] for p in parts)}
    for key in parts[0]:
        if key.startswith("p") and key[1:].replace(".", "").isdigit():
            out[key] = max(p[key] for p in parts if key in p)
    return out


def _concatenate(parts: list[Path], out: Path, name: str) -> None:
    with open(out / name, "w", newline="") as merged:
        header = None
        for part in parts:
            path = part / name
            if not path.is_file():
                continue
            with open(path, newline="") as source:
                first = source.readline()
                if header is None:
                    header = first
                    merged.write(first)
                elif first != header:
                    raise ValueError(f"{path}: header {first.strip()!r} differs from the first part's")
                for line in source:
                    merged.write(line)


def _sum_intervals(parts: list[Path], path: Path) -> None:
    """Per-second rows summed across the parts, row by row (they start together); the time
    column is the longest part's."""
    tables = []
    for part in parts:
        source = part / "intervals.csv"
        if source.is_file() and source.stat().st_size:
            with open(source, newline="") as handle:
                tables.append(list(csv.DictReader(handle)))
    if not tables:
        return
    columns = list(tables[0][0].keys()) if tables[0] else []
    longest = max(tables, key=len)
    with open(path, "w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=columns)
        writer.writeheader()
        for index, row in enumerate(longest):
            summed = {"t_s": row["t_s"]}
            for column in columns[1:]:
                summed[column] = _number(sum(float(t[index][column]) for t in tables if index < len(t)))
            writer.writerow(summed)


def _number(value: float):
    return int(value) if value == int(value) else value
