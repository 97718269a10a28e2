"""Stage 1 and 2 in one command, resumable across checkouts:
``python -m sojourn.overload run NAME`` puts back under results/ what docs/overload-control/
already holds of the experiment (same spec text, same scale), runs only the repetitions
missing, as many testbeds at once as the guard measured safe for its kind of run, then
publishes and writes the doc. A campaign longer than one sitting goes on with the same
command; ``--stop-after`` ends one whole, its last repetitions published."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from sojourn.overload import DOC, EXPERIMENTS, PUBLISHED, REPO, doc, experiment_named
from sojourn.overload.publish import publish
from sojourn.reproduce.publish import (at_once, has_unpublished, published_reps, remaining_seconds, restore_published,
                                       set_aside_other_version)
from sojourn.runner import layout
from sojourn.runner.cli import run_with_progress
from sojourn.runner.spec import load_spec


def run_and_publish(console: Console, name: str, results: Path, quick: bool = False, concurrency: int | None = None,
                    stop_at: float | None = None, prefix: str = "sjovl", published: Path = PUBLISHED,
                    doc_path: Path = DOC) -> int:
    """Runs what is missing of the overload-control experiment ``name``, then publishes it
    and rebuilds the doc when a repetition ran; returns 0 when every repetition is complete,
    1 when some are still to run (or failed: each one's status.json says why), 2 when the
    runner refused."""
    experiment = load_spec(REPO / experiment_named(name).spec, quick=quick)
    directory = layout.experiment_dir(results, experiment.name)
    aside = set_aside_other_version(directory, experiment.text)
    if aside:
        console.print(f"{name}: its spec changed since the results in {directory} ran; they are kept in {aside.name} "
                      "and this version runs afresh", markup=False, highlight=False)
    destination = published / experiment.name
    restored = restore_published(experiment, destination, results, quick)
    if not restored and any(destination.glob("*/[0-9]*.json")) and not (destination / "meta.json").is_file():
        # Published before publications kept what resuming needs: running would replace them.
        console.print(f"{name}: {destination} holds repetitions published without their runner files, which this "
                      "command cannot resume from and would replace; move them aside to run the experiment again",
                      style="red", markup=False, highlight=False)
        return 2
    testbeds = at_once(experiment, concurrency)
    console.print(f"{name}: {restored} repetition(s) restored from {destination}; {testbeds} testbed(s) at once, about "
                  f"{remaining_seconds(experiment, destination, quick, testbeds) / 3600:.1f} h to go",
                  markup=False, highlight=False)
    outcome, status = run_with_progress(console, experiment, results, prefix, concurrency=testbeds, stop_at=stop_at)
    if outcome is None:
        return status
    if has_unpublished(outcome.directory):
        console.print(f"published {publish(outcome.directory, published)}", markup=False, highlight=False)
        doc.build(published, doc_path)
        console.print(f"wrote {doc_path}", markup=False, highlight=False)
    return 0 if outcome.complete else 1


def plan(quick: bool = False, published: Path = PUBLISHED) -> list[str]:
    """A line per experiment: its runs and repetitions, the testbeds it runs at once, what is
    published of it (resumable) and the hours left, as ``sojourn reproduce --list`` says."""
    lines = []
    for entry in EXPERIMENTS:
        experiment = load_spec(REPO / entry.spec, quick=quick)
        testbeds = at_once(experiment, None)
        destination = published / experiment.name
        done = len(published_reps(experiment, destination, quick))
        numbers = len(list(destination.glob("*/[0-9]*.json")))
        older = f" ({numbers} published without runner files: `run` refuses to replace them)" \
            if numbers and not (destination / "meta.json").is_file() else ""
        lines.append(f"{entry.name:30} {len(experiment.runs)} runs x {experiment.repetitions}, {testbeds} at once; "
                     f"published {done} of {len(experiment.runs) * experiment.repetitions}{older}, "
                     f"{remaining_seconds(experiment, destination, quick, testbeds) / 3600:.1f} h to go")
    return lines
