"""One point of an experiment (a run's repetition) from its directory to its final state:
the one path every way of running takes (one after another, concurrently on this machine,
or as a Ray task on another node).

Guarantees: :func:`run_point` clears what an earlier attempt left of the point's
directory, makes the run's inputs, runs the repetition, and while the fidelity guard finds
it ``invalid`` runs it again at once (up to ``collect.fidelity.redo`` times), keeping each
invalid attempt's fidelity record in ``attempts.json`` (an earlier invocation's too, so a
repetition redone over several sittings keeps every try); it returns the final state. No
redo starts after the deadline a campaign gave (``stop_at``): the invalid repetition is left
for the next run, which does it whole. Every attempt first waits for the host's steal to calm
(``collect.fidelity.calm_steal_max``), rather than start inside a burst that would void it;
the wait is kept in ``calm.json`` (and each invalid attempt's in its record). Then, with no
testbed of this point's running, the machine's identity and speed are measured into
``host.json`` (:mod:`sojourn.testbed.host`): a CPU-bound run's result depends on them.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from sojourn.runner import fidelity, layout
from sojourn.runner.execute import Progress, run_repetition
from sojourn.runner.inputs import prepare_inputs, session_inputs
from sojourn.runner.spec import Run
from sojourn.testbed import host

# A repetition's invalid attempts (fidelity records), kept beside the attempt that counts.
ATTEMPTS = "attempts.json"
# How long the attempt that counts waited for the host's steal to calm before it started.
CALM = "calm.json"
# The state of a point left undone by a deadline (stop_at); not a directory's state: it has
# none, or an invalid attempt's.
NOT_STARTED = "not started"


def too_late(stop_at: float | None) -> bool:
    """Whether the deadline ``stop_at`` (a time.time() instant, None: none) has passed."""
    return stop_at is not None and time.time() >= stop_at


@dataclass(frozen=True)
class Point:
    """One repetition of one run still to be done."""

    index: int  # 1-based position among all the experiment's repetitions
    run_index: int
    run: Run
    rep: int
    directory: Path


def task_prefix(prefix: str, index: int) -> str:
    """A namespace prefix of its own per point (2-8 lowercase letters/digits)."""
    return f"{prefix[:5]}{index:03d}"[:8]


def point_inputs(run: Run, directory: Path):
    """The inputs (trace, docroot) of one run, made under ``directory/inputs`` (shared by
    runs with the same workload; deterministic from the spec's seed)."""
    if run.config["workload"]["mode"] == "sessions":
        return session_inputs(run.config["workload"], directory / "inputs")
    from sojourn.theory.bounds import segment_payload

    network = run.config["network"]
    return prepare_inputs(run.config["workload"], network["link_mbps"] * 1e6, directory / "inputs",
                          segment_payload(network["tcp"]["timestamps"]))


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


def run_point(point: Point, directory: Path, spec_text: str, prefix: str,
              on_event: Callable[[str, dict], None] = lambda kind, data: None,
              stop_at: float | None = None) -> str:
    """One repetition into ``point.directory`` (inputs under ``directory``), run again at
    once while the fidelity guard finds it ``invalid`` and ``stop_at`` has not passed; returns
    the final state, :data:`NOT_STARTED` for an invalid one the deadline left undone (its
    directory stays invalid, so the next run of the experiment does it)."""
    # Each invalid attempt's kernel and machine counters, kept beside the attempt that counts
    # (attempt-N-counters.csv), so whether the guard's verdict was deserved can be read later;
    # those an earlier invocation left (a deadline stopped it, or its publication was
    # restored) come first, so a repetition's record holds every try it took.
    attempts, counters = earlier_attempts(point.directory)
    settings = point.run.config["collect"]["fidelity"]
    redo = settings["redo"]
    for attempt in range(redo + 1):
        calm = _wait_for_calm(point, settings, on_event, stop_at)
        if not calm.starts:
            break
        machine = host.record()
        start_point(point, spec_text, on_event)
        _keep_attempts(point.directory, attempts, counters)
        layout.write_json(point.directory / CALM, asdict(calm))
        layout.write_json(point.directory / host.FILE, machine)
        on_event("progress", Progress(phase="inputs"))
        try:
            inputs = point_inputs(point.run, directory)
        except BaseException as err:
            layout.mark(point.directory, "partial", f"inputs failed: {type(err).__name__}: {err}")
            raise
        state = run_repetition(point.run, point.rep, point.directory, inputs, prefix,
                               on_progress=lambda p: on_event("progress", p), index=point.run_index)
        if state != "invalid":
            return state
        status = layout.read_status(point.directory)
        attempts.append({"started": status.get("started"), "finished": status.get("finished"),
                         "reason": status.get("reason"), "calm": asdict(calm), "host": machine,
                         "fidelity": json.loads((point.directory / fidelity.FILE).read_text())})
        sampled = point.directory / "counters.csv"
        counters.append(sampled.read_text() if sampled.is_file() else "")
        # A redo after the deadline would run past it by a whole repetition.
        again = attempt < redo and not too_late(stop_at)
        on_event("invalid", {"run": point.run.name, "rep": point.rep, "reason": status.get("reason"),
                             "attempt": len(attempts), "again": again})
        if not again:
            break
    _keep_attempts(point.directory, attempts, counters)
    return NOT_STARTED if attempt < redo or not calm.starts else "invalid"


def _wait_for_calm(point: Point, settings: dict, on_event: Callable[[str, dict], None],
                   stop_at: float | None) -> fidelity.Calm:
    """Waits for the host's steal to calm before an attempt (:func:`fidelity.wait_for_calm`),
    telling ``on_event("calm", ...)`` when a wait begins and how it ended."""
    def event(verdict: str, steal: float | None, waited_s: float) -> None:
        on_event("calm", {"run": point.run.name, "rep": point.rep, "verdict": verdict, "steal": steal,
                          "waited_s": waited_s, "most": settings["calm_steal_max"]})

    waiting = []

    def on_wait(steal: float, waited_s: float) -> None:
        if not waiting:
            event("waiting", steal, waited_s)
            waiting.append(steal)

    calm = fidelity.wait_for_calm(settings, stop_at, on_wait)
    if waiting:
        event(calm.verdict, calm.steal, calm.waited_s)
    return calm


def earlier_attempts(directory: Path) -> tuple[list[dict], list[str]]:
    """The invalid attempts (and their counters, "" where none were sampled) an earlier
    invocation recorded in ``directory``'s attempts.json, the one it left there last among
    them; none for a directory that holds none."""
    path = directory / ATTEMPTS
    if not path.is_file():
        return [], []
    attempts = json.loads(path.read_text())
    counters = [(directory / f"attempt-{number}-counters.csv").read_text()
                if (directory / f"attempt-{number}-counters.csv").is_file() else "" for number in range(len(attempts))]
    return attempts, counters


def _keep_attempts(directory: Path, attempts: list[dict], counters: list[str]) -> None:
    """attempts.json and each invalid attempt's counters (when it sampled any) into the
    repetition's directory, which the next attempt starts afresh."""
    if not attempts:
        return
    layout.write_json(directory / ATTEMPTS, attempts)
    for number, text in enumerate(counters):
        if text:
            (directory / f"attempt-{number}-counters.csv").write_text(text)
