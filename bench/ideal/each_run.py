"""What the scripts of bench/ideal share: an experiment's repetitions run by run, the
spread of one figure over a run's repetitions, and the JSON they write to
bench/out/<experiment>-<what>.json."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np

import sojourn.results

REPO = Path(__file__).resolve().parents[2]


def repetitions(results: Path):
    """Every repetition, in the spec's order of runs, and its key in the JSON: the run's
    name, with ``/<rep>`` when the run has more than one."""
    reps = sojourn.results.open(results).repetitions
    count = Counter(rep.run for rep in reps)
    return [(rep, rep.run if count[rep.run] == 1 else f"{rep.run}/{rep.rep}") for rep in reps]


def print_spread(what: str, by_run: dict[str, list[float]]) -> dict:
    """Prints, for each run with several repetitions, ``what`` in each and their mean and
    range; returns them for the JSON."""
    out = {}
    for run, values in by_run.items():
        if len(values) > 1:
            out[run] = {"values": values, "mean": float(np.mean(values)), "min": min(values), "max": max(values)}
            print(f"{run}: {what} {', '.join(f'{v:.3g}' for v in values)}; mean {np.mean(values):.3g}, "
                  f"range {min(values):.3g}-{max(values):.3g} ({len(values)} repetitions)")
    return out


def write_out(results: Path, what: str, out: dict) -> Path:
    path = REPO / "bench" / "out" / f"{results.name}-{what}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=2, default=float) + "\n")
    print(f"\n-> {path}")
    return path
