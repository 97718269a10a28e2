"""Running a whole experiment: every run × repetition, resuming what is complete.

Guarantees: ``results/<name>/spec.toml`` is the spec that produced the results (a rerun
with a different spec into the same directory is refused unless ``fresh``);
repetitions whose status is ``complete`` are kept (resume), any other repetition
directory is removed and run again; ``fresh`` removes all previous results first.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from sojourn.runner import layout
from sojourn.runner.execute import Progress, run_repetition
from sojourn.runner.inputs import prepare_inputs, session_inputs
from sojourn.runner.spec import Experiment


class ResultsConflict(RuntimeError):
    """The results directory holds results of a different spec."""


@dataclass
class Outcome:
    directory: Path
    states: dict[tuple[str, int], str] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return all(state == "complete" for state in self.states.values())


def point_inputs(run, directory: Path):
    """The inputs (trace, docroot) of one run, made under ``directory/inputs`` (shared by
    runs with the same workload; deterministic from the spec's seed)."""
    if run.config["workload"]["mode"] == "sessions":
        return session_inputs(run.config["workload"], directory / "inputs")
    return prepare_inputs(run.config["workload"], run.config["network"]["link_mbps"] * 1e6, directory / "inputs")


@dataclass(frozen=True)
class Point:
    """One repetition of one run still to be done."""

    index: int  # 1-based position among all the experiment's repetitions
    run_index: int
    run: object  # sojourn.runner.spec.Run
    rep: int
    directory: Path


def run_experiment(experiment: Experiment, results: Path, prefix: str = "sjrun", fresh: bool = False,
                   on_event: Callable[[str, dict], None] = lambda kind, data: None,
                   ray_address: str | None = None) -> Outcome:
    """Runs what is missing of ``experiment`` into ``results/<name>/``.

    ``on_event(kind, data)`` is told ``repetition`` (run, rep, index, total, skipped) and
    ``progress`` (a :class:`Progress`) so a display can follow. With ``ray_address``
    ("auto", "local" or host:port) the missing repetitions run as tasks on a Ray cluster
    (sojourn.runner.ray_sweep) and their results land here exactly as a local run's."""
    directory = layout.experiment_dir(results, experiment.name)
    spec_text = experiment.text or (experiment.path.read_text() if experiment.path else "")
    saved = directory / "spec.toml"
    if fresh and directory.exists():
        shutil.rmtree(directory)
    if saved.is_file() and saved.read_text() != spec_text:
        # Only finished results pin the spec: after a run that completed nothing (a bad
        # value, a missing program) the corrected spec simply takes its place.
        if any(layout.is_complete(path.parent) for path in directory.glob("*/*/status.json")):
            raise ResultsConflict(f"{directory} holds results of a different version of the spec; "
                                  "use --fresh to replace them or another results directory")
    directory.mkdir(parents=True, exist_ok=True)
    layout.write_text(saved, spec_text)
    outcome = Outcome(directory)
    total = len(experiment.runs) * experiment.repetitions
    todo: list[Point] = []
    index = 0
    for run_index, run in enumerate(experiment.runs):
        for rep in range(experiment.repetitions):
            index += 1
            rep_directory = layout.rep_dir(results, experiment.name, run.name, rep)
            if layout.is_complete(rep_directory):
                outcome.states[(run.name, rep)] = "complete"
                on_event("repetition", {"run": run.name, "rep": rep, "index": index, "total": total, "skipped": True})
                continue
            todo.append(Point(index, run_index, run, rep, rep_directory))
    if ray_address is not None:
        from sojourn.runner.ray_sweep import run_points
        run_points(todo, experiment, directory, spec_text, prefix, ray_address, outcome, on_event)
        return outcome
    for point in todo:
        run, rep, rep_directory = point.run, point.rep, point.directory
        start_point(point, spec_text, on_event)
        on_event("repetition", {"run": run.name, "rep": rep, "index": point.index, "total": total, "skipped": False})
        on_event("progress", Progress(phase="inputs"))
        started = time.monotonic()
        try:
            inputs = point_inputs(run, directory)
        except BaseException as err:
            layout.mark(rep_directory, "partial", f"inputs failed: {type(err).__name__}: {err}")
            raise
        try:
            state = run_repetition(run, rep, rep_directory, inputs, prefix,
                                   on_progress=lambda p: on_event("progress", p), index=point.run_index)
        except KeyboardInterrupt:
            outcome.states[(run.name, rep)] = "partial"
            raise
        outcome.states[(run.name, rep)] = state
        on_event("done", {"run": run.name, "rep": rep, "state": state, "wall_s": time.monotonic() - started})
    return outcome


def start_point(point: Point, spec_text: str, on_event: Callable[[str, dict], None]) -> None:
    """Clears what an earlier attempt left of the point's directory (saying so when a run
    that died left it "running") and writes its spec."""
    if point.directory.exists():
        status = layout.read_status(point.directory)
        if status.get("state") == "running":
            # A run that died (SIGKILL, power) left it: say so, then run it again.
            on_event("stale", {"run": point.run.name, "rep": point.rep, "pid": status.get("pid"),
                               "started": status.get("started")})
        shutil.rmtree(point.directory)
    point.directory.mkdir(parents=True)
    (point.directory / "spec.toml").write_text(spec_text)  # each result carries its spec
