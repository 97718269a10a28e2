"""Stages 1 and 2 of a reproduction: run an entry, then publish what its numbers come from.

Publishing copies only small files (the per-request records stay under results/), writes
the report's figures as PNG with their captions (no absolute path in them), and replaces the
published directory atomically (a temporary directory renamed into place), so the doc never
reads half an entry. The doc reads the runs' wall time from their status.json; meta.json's
``wall_s`` is the time this stage took to run and publish (a resumed run's is short), which
the doc uses only for commands.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from sojourn.reproduce import DOCS, REPO, Entry, Paper
from sojourn.reproduce.doc import relative_paths

# Per repetition: the files summary numbers come from (no per-request records; the kernel
# counters' time series is small and holds the measured reasons, e.g. SYN_RECV build-up).
REP_FILES = ("run.json", "status.json", "summary.json", "bands.json", "load_summary.json", "counters.csv",
             "fidelity.json", "attempts.json")


def results_root(results: Path, paper: Paper, quick: bool) -> Path:
    return Path(results) / "reproduce" / (paper.tag + ("-quick" if quick else ""))


def measured_concurrency(experiment) -> int:
    """The most testbeds at once measured to change nothing (bench/concurrency: every
    count up to it kept the solo means and the guard's bounds) for the kind of testbed the
    experiment's runs use, with the WAN emulator or without; 1 where nothing was measured."""
    emulator = any(run.plan.testbed.uses_emulator for run in experiment.runs)
    path = DOCS / "concurrency" / ("000-concurrency-rtt.json" if emulator else "000-concurrency.json")
    try:
        return max(1, int(json.loads(path.read_text())["largest_safe"]))
    except (OSError, KeyError, TypeError, ValueError):
        return 1


def run_entry(console, paper: Paper, entry: Entry, results: Path, quick: bool, prefix: str,
              concurrency: int | None = None) -> tuple[Path | None, int]:
    """Runs what is missing of ``entry`` (``concurrency`` testbeds at once where its runs
    allow it; None: :func:`measured_concurrency`); returns (its result directory, 0) or
    (None, status)."""
    root = results_root(results, paper, quick)
    if entry.spec:
        from sojourn.runner.cli import run_with_progress
        from sojourn.runner.spec import load_spec

        from sojourn.runner.fidelity import may_share_the_machine

        experiment = load_spec(REPO / entry.spec, quick=quick)
        # CPU-bound runs cannot share the machine unnoticed (sojourn.runner.fidelity).
        if not all(may_share_the_machine(run.config) for run in experiment.runs):
            concurrency = 1
        elif concurrency is None:
            concurrency = measured_concurrency(experiment)
            console.print(f"{entry.name}: {concurrency} testbed(s) at once, as measured safe for its testbeds "
                          "(docs/reproduction/concurrency/)", markup=False, highlight=False)
        outcome, status = run_with_progress(console, experiment, root, prefix, concurrency=concurrency)
        if outcome is None:
            return None, status
        return outcome.directory, (0 if outcome.complete else 1)
    out = root / entry.name
    out.mkdir(parents=True, exist_ok=True)
    argv = [part.replace("{out}", str(out)).replace("{python}", sys.executable) for part in entry.command]
    argv = [a for part in argv for a in ((["--quick"] if quick else []) if part == "{quick}" else [part])]
    console.print(f"{entry.name}: {' '.join(argv)}", markup=False, highlight=False)
    done = subprocess.run(argv, cwd=REPO)
    if done.returncode != 0:
        console.print(f"[red]{entry.name}: the command exited with {done.returncode}[/]")
        return None, done.returncode
    return out, 0


def publish(paper: Paper, entry: Entry, source: Path, destination: Path, quick: bool, wall_s: float) -> None:
    """Copies ``source`` (a result directory) into ``destination`` (docs/reproduction/...)."""
    destination = Path(destination)
    staging = destination.with_name(f".{destination.name}.tmp")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        _stage(entry, source, staging)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)  # a failed publish leaves nothing half-made
        raise
    meta = {"paper": paper.tag, "experiment": entry.name, "title": entry.title, "scale": "quick" if quick else "full",
            "spec": entry.spec, "command": list(entry.command), "source": relative_paths(str(Path(source).resolve())),
            "published": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "wall_s": round(wall_s, 1)}
    (staging / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    old = destination.with_name(f".{destination.name}.old")
    shutil.rmtree(old, ignore_errors=True)
    if destination.exists():
        os.replace(destination, old)
    os.replace(staging, destination)
    shutil.rmtree(old, ignore_errors=True)


def _stage(entry: Entry, source: Path, staging: Path) -> None:
    """Copies what ``entry`` publishes from ``source`` into ``staging``."""
    if entry.spec:
        if (source / "spec.toml").is_file():
            shutil.copy2(source / "spec.toml", staging / "spec.toml")
        for run_json in sorted(source.glob("*/*/run.json")):
            rep = run_json.parent
            target = staging / rep.parent.name / rep.name
            target.mkdir(parents=True)
            for name in REP_FILES:
                if (rep / name).is_file():
                    shutil.copy2(rep / name, target / name)
        from sojourn.report.html import build_report
        build_report(source, export_dir=staging)
        index = staging / "figures.json"
        if index.is_file():
            figures = json.loads(index.read_text())
            for figure in figures:
                figure["caption"] = relative_paths(figure["caption"])
            index.write_text(json.dumps(figures, indent=2) + "\n")
    else:
        for pattern in entry.publish:
            for path in sorted(source.glob(pattern)):
                if path.is_file():
                    shutil.copy2(path, staging / path.name)
        figures = [{"file": path.name, "caption": f"{entry.title} ({path.name})"} for path in sorted(staging.glob("*.png"))]
        (staging / "figures.json").write_text(json.dumps(figures, indent=2) + "\n")
