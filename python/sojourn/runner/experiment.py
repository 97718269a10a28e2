"""Running a whole experiment: every run × repetition, resuming what is complete.

Guarantees: ``results/<name>/spec.toml`` is the spec that produced the results (a rerun
with a different spec into the same directory is refused unless ``fresh``);
repetitions whose status is ``complete`` are kept (resume), any other repetition
directory is removed and run again; ``fresh`` removes all previous results first.
"""

from __future__ import annotations

import concurrent.futures
import functools
import math
import multiprocessing
import os
import shutil
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from sojourn.runner import fidelity, layout, ray_sweep
from sojourn.runner.points import NOT_STARTED, Point, point_inputs, run_point, task_prefix, too_late
from sojourn.runner.spec import Experiment, changed_runs


class ResultsConflict(RuntimeError):
    """The results directory holds results of a different spec."""


@dataclass
class Outcome:
    directory: Path
    states: dict[tuple[str, int], str] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return all(state == "complete" for state in self.states.values())

    @property
    def status(self) -> int:
        """The exit status this outcome gives a command: 0 when every repetition is complete,
        STOPPED_AT_DEADLINE when the only ones missing were not started (--stop-after),
        LEFT_INVALID when some are invalid after their redos and none failed, 1 when any is
        partial (:func:`combined_status` orders them)."""
        codes = ({"complete": 0, NOT_STARTED: STOPPED_AT_DEADLINE, "invalid": LEFT_INVALID}.get(state, 1)
                 for state in self.states.values())
        return functools.reduce(combined_status, codes, 0)

    def reasons(self) -> dict[tuple[str, int], str]:
        """Why each repetition that is not complete is not (its status's reason)."""
        return {(run, rep): layout.read_status(self.directory / run / str(rep)).get("reason", state)
                for (run, rep), state in self.states.items() if state != "complete"}


def run_experiment(experiment: Experiment, results: Path, prefix: str = "sjrun", fresh: bool = False,
                   on_event: Callable[[str, dict], None] = lambda kind, data: None,
                   ray_address: str | None = None, concurrency: int = 1, stop_at: float | None = None) -> Outcome:
    """Runs what is missing of ``experiment`` into ``results/<name>/``.

    ``on_event(kind, data)`` is told ``repetition`` (run, rep, index, total, skipped) and
    ``progress`` (a :class:`Progress`) so a display can follow. With ``ray_address``
    ("auto", "local" or host:port) the missing repetitions run as tasks on a Ray cluster
    (sojourn.runner.ray_sweep) and their results land here exactly as a local run's. With
    ``concurrency`` N > 1, N testbeds run at once on this machine, each in namespaces of its
    own prefix; the fidelity guard (sojourn.runner.fidelity) marks any repetition they
    disturbed invalid, and it is redone. With ``stop_at`` (a time.time() instant) no
    repetition starts after it, nor a fidelity redo: those left are told as ``not started``
    and stay missing or invalid (a later run does them), so a campaign longer than a session
    ends on time, whole."""
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1, got {concurrency}")
    directory = layout.experiment_dir(results, experiment.name)
    spec_text = experiment.text or (experiment.path.read_text() if experiment.path else "")
    saved = directory / "spec.toml"
    if fresh and directory.exists():
        shutil.rmtree(directory)
    if saved.is_file() and saved.read_text() != spec_text:
        # Only finished results pin the spec, and only those whose run the new text changes:
        # after a run that completed nothing (a bad value, a missing program) the corrected
        # spec simply takes its place, and a spec given a new variant keeps what the others ran.
        changed = changed_runs(directory, experiment)
        if changed:
            raise ResultsConflict(f"{directory} holds results of a different version of the spec ({changed[0]} ran "
                                  "with another configuration, or its run is gone); use --fresh to replace them or "
                                  "another results directory")
    directory.mkdir(parents=True, exist_ok=True)
    layout.write_text(saved, spec_text)
    outcome = Outcome(directory)
    total = len(experiment.runs) * experiment.repetitions
    todo: list[Point] = []
    index = 0
    # Repetition-major: every run gets its first repetition before any gets its second, so a
    # campaign cut short by --stop-after (or by the session's end) leaves every run measured.
    for rep in range(experiment.repetitions):
        for run_index, run in enumerate(experiment.runs):
            index += 1
            rep_directory = layout.rep_dir(results, experiment.name, run.name, rep)
            if layout.is_complete(rep_directory):
                outcome.states[(run.name, rep)] = "complete"
                on_event("repetition", {"run": run.name, "rep": rep, "index": index, "total": total, "skipped": True})
                continue
            todo.append(Point(index, run_index, run, rep, rep_directory))
    if ray_address is not None:
        ray_sweep.run_points(todo, experiment, directory, spec_text, prefix, ray_address, outcome, on_event)
        return outcome
    if concurrency > 1 and len(todo) > 1:
        _run_concurrently(todo, directory, spec_text, prefix, concurrency, total, outcome, on_event, stop_at)
        return outcome
    for point in todo:
        if too_late(stop_at):
            _not_started(point, outcome, on_event)
            continue
        on_event("repetition", {"run": point.run.name, "rep": point.rep, "index": point.index, "total": total,
                                "skipped": False})
        started = time.monotonic()
        try:
            state = run_point(point, directory, spec_text, prefix, on_event, stop_at)
        except KeyboardInterrupt:
            outcome.states[(point.run.name, point.rep)] = "partial"
            raise
        outcome.states[(point.run.name, point.rep)] = state
        on_event("done", {"run": point.run.name, "rep": point.rep, "state": state, "wall_s": time.monotonic() - started})
    return outcome


# The exit status of a command whose --stop-after left repetitions not started and nothing
# failed: sysexits.h's EX_TEMPFAIL ("the user is invited to retry the operation later"), so a
# campaign tells a deadline that came from a failure (scripts/campaign.sh does).
STOPPED_AT_DEADLINE = 75
# The exit status of a command that left repetitions invalid after their redos, the fidelity
# guard having found every attempt disturbed by the machine (host steal, a build beside it),
# and nothing failed: like a stop at the deadline, the next run does them; unlike it, a
# campaign learns that the machine, not the clock, held them back.
LEFT_INVALID = 3
# Statuses that are not failures, the one that outweighs the other last.
_NOT_FAILURES = (0, STOPPED_AT_DEADLINE, LEFT_INVALID)


def combined_status(first: int, second: int) -> int:
    """Two exit statuses as one command's: a failure outweighs repetitions left invalid,
    which outweigh a stop at the deadline, which outweighs success."""
    failures = [code for code in (first, second) if code not in _NOT_FAILURES]
    return failures[0] if failures else max(first, second, key=_NOT_FAILURES.index)


def _not_started(point: Point, outcome: Outcome, on_event: Callable[[str, dict], None]) -> None:
    outcome.states[(point.run.name, point.rep)] = NOT_STARTED
    on_event("done", {"run": point.run.name, "rep": point.rep, "state": NOT_STARTED, "wall_s": math.nan})


# Set in a pool worker whose repetition was interrupted: the experiment is being stopped,
# and the points already handed to this worker must not start.
_worker_stopping = False


def _pool_point(point: Point, directory: Path, spec_text: str, prefix: str,
                stop_at: float | None) -> tuple[str, float]:
    """A pool worker: one point with a namespace prefix of its own, returning its state and
    how long it ran (not how long it waited for a worker); a point whose turn comes after
    ``stop_at``, or after this worker was interrupted, is not started. Between points
    Ctrl-C is left to the driver; during one the testbed turns SIGINT and SIGTERM into
    KeyboardInterrupt and removes what it made."""
    global _worker_stopping
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if _worker_stopping or too_late(stop_at):
        return NOT_STARTED, math.nan  # no time to tell
    started = time.monotonic()
    try:
        return (run_point(point, directory, spec_text, task_prefix(prefix, point.index), stop_at=stop_at),
                time.monotonic() - started)
    except KeyboardInterrupt:
        _worker_stopping = True
        return "partial", time.monotonic() - started


def _stop_workers() -> None:
    """SIGTERM every pool worker still alive: each one's testbed stops its processes and
    removes its namespaces, and the worker starts no further point."""
    for worker in multiprocessing.active_children():
        try:
            os.kill(worker.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt(signal.Signals(signum).name)


def _run_concurrently(todo: list[Point], directory: Path, spec_text: str, prefix: str, concurrency: int, total: int,
                      outcome: Outcome, on_event: Callable[[str, dict], None], stop_at: float | None) -> None:
    """``todo`` on ``concurrency`` worker processes, each point in its own namespaces.
    Inputs are made here first, so workers never make the same inputs at once."""
    for point in todo:
        if not fidelity.may_share_the_machine(point.run.config):
            raise ValueError(f"run {point.run.name} is CPU-bound (or sets collect.fidelity.cpu_idle_min = 0, or "
                             "collect.docroot_cache = \"cold\"): the guard cannot tell its disturbance from its load, "
                             "so run it with --concurrency 1")
    for point in todo:
        point_inputs(point.run, directory)
    context = multiprocessing.get_context("spawn")
    # SIGINT and SIGTERM stop the driver and with it its workers (none is orphaned), as the
    # testbed does for one repetition, also where SIGINT came in ignored (a shell's
    # background job).
    previous = {sig: signal.signal(sig, _raise_interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        with concurrent.futures.ProcessPoolExecutor(max_workers=concurrency, mp_context=context) as pool:
            _drive(pool, todo, directory, spec_text, prefix, total, outcome, on_event, stop_at)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _drive(pool, todo: list[Point], directory: Path, spec_text: str, prefix: str, total: int, outcome: Outcome,
           on_event: Callable[[str, dict], None], stop_at: float | None) -> None:
    """Hands ``todo`` to ``pool`` and records each point's state as it ends; on Ctrl-C or
    SIGTERM cancels what has not started and stops the workers."""
    futures = {}
    # The submissions are inside the try: a signal that comes while workers are being
    # spawned must cancel too, or the pool's shutdown would run every queued point.
    try:
        for point in todo:
            futures[pool.submit(_pool_point, point, directory, spec_text, prefix, stop_at)] = point
            on_event("repetition", {"run": point.run.name, "rep": point.rep, "index": point.index, "total": total,
                                    "skipped": False})
        for future in concurrent.futures.as_completed(futures):
            point = futures[future]
            try:
                state, wall_s = future.result()
            except Exception as err:  # noqa: BLE001 - the repetition's status.json holds the reason
                print(f"sojourn run: {point.run.name} repetition {point.rep}: {type(err).__name__}: {err}",
                      file=sys.stderr)
                state, wall_s = layout.read_status(point.directory).get("state", "partial"), math.nan
            outcome.states[(point.run.name, point.rep)] = state
            on_event("done", {"run": point.run.name, "rep": point.rep, "state": state, "wall_s": wall_s})
    except KeyboardInterrupt:
        pool.shutdown(wait=False, cancel_futures=True)
        _stop_workers()
        raise
