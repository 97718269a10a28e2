"""What the scripts of bench/ideal share: each run's first repetition of an experiment's
results, and the JSON they write to bench/out/<experiment>-<what>.json."""

from __future__ import annotations

import json
from pathlib import Path

import sojourn.results

REPO = Path(__file__).resolve().parents[2]


def first_repetitions(results: Path):
    """The first repetition of each run, in the spec's order."""
    return [rep for rep in sojourn.results.open(results).repetitions if rep.rep == 0]


def write_out(results: Path, what: str, out: dict) -> Path:
    path = REPO / "bench" / "out" / f"{results.name}-{what}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=2, default=float) + "\n")
    print(f"\n-> {path}")
    return path
