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
from sojourn.reproduce.publish import at_once, has_unpublished, progress, run_resuming
from sojourn.runner.spec import load_spec


def run_and_publish(console: Console, name: str, results: Path, quick: bool = False, concurrency: int | None = None,
                    stop_at: float | None = None, prefix: str = "sjovl", published: Path = PUBLISHED,
                    doc_path: Path = DOC) -> int:
    """Runs what is missing of the overload-control experiment ``name``, then publishes it
    and rebuilds the doc when a repetition ran; returns the outcome's status (0 when every
    repetition is complete, STOPPED_AT_DEADLINE when --stop-after left some, LEFT_INVALID when the
    fidelity guard left some invalid, 1 when some failed: each one's status.json says why), 2 when
    the runner refused."""
    experiment = load_spec(REPO / experiment_named(name).spec, quick=quick)
    destination = published / experiment.name
    if _without_runner_files(destination):
        # Published before publications kept what resuming needs: running would replace them.
        console.print(f"{name}: {destination} holds repetitions published without their runner files, which this "
                      "command cannot resume from and would replace; move them aside to run the experiment again",
                      style="red", markup=False, highlight=False)
        return 2
    outcome, status = run_resuming(console, name, experiment, results, destination, quick, prefix, concurrency,
                                   stop_at)
    if outcome is None:
        return status
    if has_unpublished(outcome.directory):
        console.print(f"published {publish(outcome.directory, published)}", markup=False, highlight=False)
        doc.build(published, doc_path)
        console.print(f"wrote {doc_path}", markup=False, highlight=False)
    return outcome.status


def plan(quick: bool = False, published: Path = PUBLISHED) -> list[str]:
    """A line per experiment: its runs and repetitions, the testbeds it runs at once, what is
    published of it (resumable) and the hours left, as ``sojourn reproduce --list`` says."""
    lines = []
    for entry in EXPERIMENTS:
        experiment = load_spec(REPO / entry.spec, quick=quick)
        destination = published / experiment.name
        numbers = _without_runner_files(destination)
        older = f" ({numbers} repetition(s) published without runner files: `run` refuses to replace them)" \
            if numbers else ""
        lines.append(f"{entry.name:30} {progress(experiment, destination, quick, at_once(experiment, None))}{older}")
    return lines


def _without_runner_files(destination: Path) -> int:
    """The repetitions ``destination`` holds from before publications kept what resuming
    needs (no meta.json, only each repetition's numbers): ``run`` cannot resume from them."""
    if (destination / "meta.json").is_file():
        return 0
    return len(list(destination.glob("*/[0-9]*.json")))
