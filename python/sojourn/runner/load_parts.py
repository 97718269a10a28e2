"""A run's load from several load generator processes (``workload.load_processes``): each
runs part I of K of the clients (``load --process-part I/K``) into a directory of its own,
with an open-file limit of its own (root cannot raise RLIMIT_NOFILE here, docs/testbed.md
"Open files"), and ``sojourn-engine load merge`` joins their files into the run's:
records.csv (ids are run-wide) in completion order, intervals.csv summed per second, and the
generator's summary.json with exact counts and percentiles, as one process would write them
(each part's own summary stays in its directory and under ``processes``).
"""

from __future__ import annotations

import subprocess
from pathlib import Path


def part_dir(out: Path, index: int) -> Path:
    return out / f"process-{index}"


def merge(engine: Path, parts: list[Path], out: Path) -> None:
    """out/records.csv, out/intervals.csv and out/summary.json from the parts' (whose
    records and intervals then go: the merged files hold them)."""
    done = subprocess.run([str(engine), "load", "merge", "--out", str(out), *map(str, parts)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"sojourn-engine load merge {out}: {done.stderr.strip()}")
