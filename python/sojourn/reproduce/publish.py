"""Stages 1 and 2 of a reproduction: run an entry, then publish what its numbers come from.

Publishing copies only small files (the per-request records stay under results/), writes
the report's figures as PNG with their captions (no absolute path in them), and replaces the
published directory atomically (a temporary directory renamed into place), so the doc never
reads half an entry. The doc reads the runs' wall time from their status.json; meta.json's
``wall_s`` is the time this stage took to run and publish (a resumed run's is short), which
the doc uses only for commands.
"""

from __future__ import annotations

import heapq
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

from sojourn.analysis.sweeps import swept_users
from sojourn.reproduce import REPO, SHARED, Entry, Paper
from sojourn.reproduce.concurrency import measured_concurrency
from sojourn.reproduce.doc import figure_run, relative_paths
from sojourn.runner import layout
from sojourn.runner.spec import changed_reps, changed_runs, load_spec
from sojourn.runner.experiment import NOT_STARTED

# Per repetition: the files summary numbers come from (no per-request records; the kernel
# counters' time series is small and holds the measured reasons, e.g. SYN_RECV build-up).
REP_FILES = ("run.json", "status.json", "summary.json", "bands.json", "load_summary.json", "counters.csv",
             "fidelity.json", "attempts.json", "host.json", SHARED)


def results_root(results: Path, paper: Paper, quick: bool) -> Path:
    return Path(results) / "reproduce" / (paper.tag + ("-quick" if quick else ""))


# Per repetition besides its load: testbed, server, drain and analysis (259-261 s a repetition
# of the 225-s baseline trace, bench/concurrency, 25 Nov 2026).
REPETITION_OVERHEAD_S = 35.0


def at_once(experiment, concurrency: int | None, most: int | None = None) -> int:
    """Testbeds at once for ``experiment``: one for CPU-bound runs, which cannot share the
    machine unnoticed (sojourn.runner.fidelity); else ``concurrency``, or the measured count,
    at most ``most`` (an experiment seen to need fewer than its kind of testbed: Entry)."""
    from sojourn.runner.fidelity import may_share_the_machine

    if not all(may_share_the_machine(run.config) for run in experiment.runs):
        return 1
    if concurrency:
        return concurrency
    measured = measured_concurrency(experiment)
    return min(measured, most) if most else measured


def estimated_seconds(experiment, testbeds: int, done: frozenset = frozenset()) -> float:
    """Wall time of the experiment's repetitions run ``testbeds`` at once, from their load
    lengths, less those in ``done`` ((run, rep) pairs, rep as its directory names it): each
    repetition, in the runner's order (repetition-major), starts on the first testbed free,
    so six 15-minute repetitions five at once take 30 minutes, not 18."""
    from sojourn.runner.plan import load_seconds

    lengths = {run.name: load_seconds(run.config) + _drain_seconds(run.config) + REPETITION_OVERHEAD_S
               for run in experiment.runs}
    free_at = [0.0] * max(testbeds, 1)
    for rep in range(experiment.repetitions):
        for run in experiment.runs:
            if (run.name, str(rep)) not in done:
                heapq.heapreplace(free_at, free_at[0] + lengths[run.name])
    return max(free_at)


def _drain_seconds(config: dict) -> float:
    """How long a repetition goes on after its load: under persistent overload (rho above 1,
    no profile) the backlog drains until the clients' timeout, or collect.drain_s if that is
    shorter (the generator's --drain ends the run then); otherwise the last responses end
    within seconds."""
    workload = config["workload"]
    overloaded = workload["mode"] == "open" and not workload["profile"] and workload["rho"] > 1
    return min(workload["timeout_s"], config["collect"]["drain_s"]) if overloaded else 0.0


# run_entry's status when every complete repetition came from the publication: nothing to publish.
NOTHING_NEW = 3
# Written into a repetition restored from its publication (per-request records not kept).
RESTORED = "restored.json"


def published_reps(experiment, published: Path, quick: bool) -> list[Path]:
    """The complete repetitions published in ``published`` at the same scale whose run the
    spec still configures alike (the same text, or :func:`sojourn.runner.spec.changed_reps`
    leaves them out), their directories run/rep: what a campaign need not run again. A run
    whose configuration changed is run again; the others keep what they measured."""
    published = Path(published)
    if not (published / "spec.toml").is_file() or not _published_at(published, quick):
        return []
    changed = set(changed_reps(published, experiment))
    return [status.parent for status in sorted(published.glob("*/*/status.json"))
            if layout.is_complete(status.parent) and status.parent not in changed]


def _published_at(directory: Path, quick: bool) -> bool:
    """Whether ``directory`` holds a publication (its meta.json) at the scale ``quick`` says."""
    try:
        return json.loads((directory / "meta.json").read_text()).get("scale") == ("quick" if quick else "full")
    except (OSError, json.JSONDecodeError):
        return False


def shared_reps(experiment, published: Path, quick: bool) -> dict[tuple[str, str], Path]:
    """Repetitions another experiment beside ``published`` (of the same paper) published at
    the same scale from a run configured as one of ``experiment``'s runs
    (:func:`sojourn.runner.spec.configured_alike` on the configuration its run.json says it ran
    with: the same set-up, workload, seed and length, so the same trace), keyed by (run, rep)
    of ``experiment``: measured once, they count in both (000's RTT x loss grid holds the
    points of rtt, loss and rtt-loss; the rtt and loss sweeps' first points are mtu's 1500
    bytes). Only repetitions measured there, not ones it took from a third (one hop, so each
    names where it ran); where several experiments hold one, the first by name."""
    from sojourn.runner.spec import configured_alike

    published = Path(published)
    if not published.parent.is_dir():
        return {}
    wanted = experiment.configs_as_run()
    found: dict[tuple[str, str], Path] = {}
    for other in sorted(path for path in published.parent.iterdir() if path.is_dir() and path != published):
        if not _published_at(other, quick):
            continue
        for status in sorted(other.glob("*/*/status.json")):
            rep = status.parent
            if (rep / SHARED).is_file() or not layout.is_complete(rep) or not rep.name.isdigit() \
                    or int(rep.name) >= experiment.repetitions:
                continue
            try:
                ran = json.loads((rep / "run.json").read_text()).get("config")
            except (OSError, json.JSONDecodeError):
                continue
            for name, config in wanted.items():
                if (name, rep.name) not in found and ran is not None and configured_alike(config, ran):
                    found[(name, rep.name)] = rep
    return found


def _done(experiment, published: Path, quick: bool, share: bool) -> tuple[frozenset, frozenset]:
    """(run, rep) of the repetitions published, and with ``share`` of the others those
    shared_reps finds: one pass over the paper's publications."""
    own = frozenset((path.parent.name, path.name) for path in published_reps(experiment, published, quick))
    if not share:
        return own, frozenset()
    return own, frozenset(shared_reps(experiment, published, quick)) - own


def remaining_seconds(experiment, published: Path, quick: bool, testbeds: int, share: bool = False) -> float:
    """:func:`estimated_seconds` of the repetitions not yet published (nor, with ``share``,
    published by another experiment: :func:`shared_reps`)."""
    own, shared = _done(experiment, published, quick, share)
    return estimated_seconds(experiment, testbeds, own | shared)


def restore_published(experiment, published: Path, results: Path, quick: bool, share: bool = False) -> int:
    """Puts the complete repetitions published in ``published`` (same spec text, same
    scale) back under ``results/<experiment>/`` where that repetition is not complete,
    without their per-request records, so the runner keeps them and a campaign goes on
    where the last checkout's stopped (results/ is not kept between checkouts,
    docs/reproduction/ is); with ``share`` also those another experiment published of a run
    configured alike (:func:`shared_reps`), each marked shared.json and published with this
    experiment. Returns how many it put back."""
    own = {(source.parent.name, source.name): source for source in published_reps(experiment, published, quick)}
    shared = {key: source for key, source in shared_reps(experiment, published, quick).items()
              if key not in own} if share else {}
    if not own and not shared:
        return 0
    directory = layout.experiment_dir(results, experiment.name)
    saved = directory / "spec.toml"
    if saved.is_file() and changed_runs(directory, experiment):
        return 0
    restored = 0
    for (run, rep), source in {**own, **shared}.items():
        target = directory / run / rep
        if layout.is_complete(target):
            continue
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(source, target)
        origin = relative_paths(str(source.resolve()))
        if (run, rep) in shared:
            # Named as this experiment's run (the tables find a repetition by its run.json), the
            # configuration kept as it ran. Not marked restored: new to this publication, so it publishes.
            index, this = next((i, r) for i, r in enumerate(experiment.runs) if r.name == run)
            info = json.loads((target / "run.json").read_text())
            info.update(this.identity(index))
            layout.write_json(target / "run.json", info)
            (target / SHARED).write_text(json.dumps({"experiment": source.parent.parent.name, "run": source.parent.name,
                                                     "repetition": int(source.name), "from": origin}) + "\n")
        else:
            (target / RESTORED).write_text(json.dumps({"from": origin}) + "\n")
        restored += 1
    if restored:
        layout.write_text(saved, experiment.text)
    return restored


class SetAside(NamedTuple):
    """Where :func:`set_aside_other_version` moved results, and the runs it moved."""
    directory: Path
    runs: list[str]


def set_aside_other_version(directory: Path, experiment) -> SetAside | None:
    """Moves aside what ``directory`` holds of the runs ``experiment``'s spec now configures
    otherwise (a run whose complete repetitions ran with another configuration, or that the
    spec no longer has: ``changed_reps``), every repetition of such a run, with the spec they
    ran from, so those runs run afresh, the others keep what they measured, and nothing is
    lost: returns where they went, ``<directory>.before-<time>``, and the runs; None when
    nothing changed."""
    saved = directory / "spec.toml"
    if not saved.is_file():
        return None
    runs = sorted({rep.parent.name for rep in changed_reps(directory, experiment)})
    if not runs:
        return None
    stamp = time.strftime("%Y%m%dT%H%M%S", time.localtime(saved.stat().st_mtime))
    target = directory.with_name(f"{directory.name}.before-{stamp}")
    attempt = 1
    while target.exists():  # an earlier set-aside of the same version: never merged into
        attempt += 1
        target = directory.with_name(f"{directory.name}.before-{stamp}-{attempt}")
    target.mkdir(parents=True)
    shutil.copy2(saved, target / "spec.toml")
    for run in runs:
        os.replace(directory / run, target / run)
    return SetAside(target, runs)


def has_unpublished(directory: Path) -> bool:
    """Whether a complete repetition under ``directory`` was run here, not restored."""
    return any(layout.is_complete(status.parent) and not (status.parent / RESTORED).is_file()
               for status in Path(directory).glob("*/*/status.json"))


def progress(experiment, published: Path | None, quick: bool, testbeds: int, share: bool = False) -> str:
    """``N runs x R, about H h at T at once; published D of M, X h to go`` (without the
    publication's part when ``published`` is None; with ``share``, how many of the rest
    another experiment published, :func:`shared_reps`): what ``--list`` says of an
    experiment, and what a campaign says before it runs one."""
    size = (f"{len(experiment.runs)} runs x {experiment.repetitions}, about "
            f"{estimated_seconds(experiment, testbeds) / 3600:.1f} h at {testbeds} at once")
    if published is None:
        return size
    own, shared = _done(experiment, published, quick, share)
    also = f" (and {len(shared)} shared with other experiments)" if shared else ""
    return (f"{size}; published {len(own)} of {len(experiment.runs) * experiment.repetitions}{also}, "
            f"{estimated_seconds(experiment, testbeds, own | shared) / 3600:.1f} h to go")


def run_resuming(console, label: str, experiment, root: Path, published: Path | None, quick: bool, prefix: str,
                 concurrency: int | None = None, stop_at: float | None = None, fresh: bool = False,
                 most: int | None = None, share: bool = False):
    """Runs what is missing of ``experiment`` under ``root``: sets aside results of another
    version of its spec (:func:`set_aside_other_version`), puts back what ``published``
    holds of it (:func:`restore_published`; None: nothing; with ``share`` also what other
    experiments beside it published of runs configured alike), then runs the rest
    ``concurrency`` testbeds at once where its runs allow it (None: the measured count, at
    most ``most``), starting no repetition after ``stop_at``; ``fresh`` removes its results here first.
    Returns the runner's (outcome, status)."""
    from sojourn.runner.cli import run_with_progress

    aside = set_aside_other_version(layout.experiment_dir(root, experiment.name), experiment)
    if aside:
        console.print(f"{label}: its spec configures {', '.join(aside.runs)} otherwise than when they ran under "
                      f"{relative_paths(str(aside.directory.parent))}; their results are kept in "
                      f"{aside.directory.name} and they run afresh", markup=False, highlight=False)
    restored = restore_published(experiment, published, root, quick, share) if published else 0
    testbeds = at_once(experiment, concurrency, most)
    restored_from = f"{restored} repetition(s) restored from {relative_paths(str(published.parent))}; " if restored else ""
    console.print(f"{label}: {restored_from}{progress(experiment, published, quick, testbeds, share)}", markup=False,
                  highlight=False)
    return run_with_progress(console, experiment, root, prefix, fresh=fresh, concurrency=testbeds, stop_at=stop_at)


def run_entry(console, paper: Paper, entry: Entry, results: Path, quick: bool, prefix: str,
              concurrency: int | None = None, published: Path | None = None,
              stop_at: float | None = None, fresh: bool = False) -> tuple[Path | None, int]:
    """Runs what is missing of ``entry`` (:func:`run_resuming`, after restoring what
    ``published`` holds of it and what the paper's other experiments published of runs
    configured alike, :func:`shared_reps`); returns (its result directory, the outcome's status: 0, 1 when
    some repetitions failed, STOPPED_AT_DEADLINE when only --stop-after left some) or (None,
    status): 1 when none is new because they failed, NOTHING_NEW when every complete one was
    restored (the publication already says it all)."""
    root = results_root(results, paper, quick)
    if entry.spec:
        experiment = load_spec(REPO / entry.spec, quick=quick)
        outcome, status = run_resuming(console, entry.name, experiment, root, published, quick, prefix, concurrency,
                                       stop_at, fresh, entry.most_testbeds, share=True)
        if outcome is None:
            return None, status
        failed = sorted(f"{run} rep {rep}" for (run, rep), state in outcome.states.items()
                        if state not in ("complete", NOT_STARTED))
        if not has_unpublished(outcome.directory):
            if failed:
                # Nothing new, and not because it is published: a failure, not a success.
                console.print(f"[red]{entry.name}: {len(failed)} repetition(s) did not complete ({', '.join(failed)}; "
                              "each one's status.json says why)[/]")
                return None, 1
            return outcome.directory, NOTHING_NEW
        return outcome.directory, outcome.status
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
    undrawn = undrawn_runs(source)
    if entry.spec and undrawn:
        meta["not_in_figures"] = sorted(undrawn)
        _carry_run_figures(destination, staging, undrawn)
    (staging / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    old = destination.with_name(f".{destination.name}.old")
    shutil.rmtree(old, ignore_errors=True)
    if destination.exists():
        os.replace(destination, old)
    os.replace(staging, destination)
    shutil.rmtree(old, ignore_errors=True)


def undrawn_runs(source: Path) -> set[str]:
    """The runs of a result directory its figures cannot draw: every repetition restored from
    an earlier publication, without per-request records (the tables hold them). A capacity
    probe's figures come from its levels in summary.json, which the publication keeps."""
    runs = {path.parent.parent.name for path in Path(source).glob("*/*/run.json")}
    drawn = {path.parent.parent.name for path in Path(source).glob("*/*/records.csv")}
    drawn |= {path.parent.parent.name for path in Path(source).glob("*/*/summary.json")
              if swept_users(json.loads(path.read_text()))}
    return runs - drawn


def redraw_entry(console, paper: Paper, entry: Entry, results: Path, quick: bool,
                 published: Path) -> tuple[Path | None, int]:
    """``--redraw``: puts back under ``results`` what ``published`` holds of ``entry`` and
    returns the directory to publish again, nothing run, so its figures and summaries are those
    of the current code; or (None, 2) after saying why it cannot: the entry runs a command,
    nothing of the current spec is published, or some runs have no per-request records here,
    and redrawing would drop them from the figures of several runs."""
    def refuse(why: str) -> tuple[None, int]:
        console.print(f"{entry.name}: cannot redraw: {why}", style="red", markup=False, highlight=False)
        return None, 2

    if not entry.spec:
        return refuse("it runs a command, whose figures are the command's own; run it again")
    experiment = load_spec(REPO / entry.spec, quick=quick)
    if not published_reps(experiment, published, quick):
        return refuse(f"nothing published under {relative_paths(str(published))} ran with the spec as it is now")
    directory = layout.experiment_dir(results_root(results, paper, quick), experiment.name)
    aside = set_aside_other_version(directory, experiment)
    if aside:
        console.print(f"{entry.name}: results of another version of its spec moved to {aside.directory.name}",
                      markup=False, highlight=False)
    restore_published(experiment, published, directory.parent, quick)
    lost = undrawn_runs(directory)
    if lost:
        return refuse(f"{len(lost)} run(s) have no per-request records here ({', '.join(sorted(lost))}); their "
                      "figures would be lost: redraw where they ran, or run them again")
    for records in sorted(directory.glob("*/*/records.csv")):
        resummarize(records.parent)
    return directory, 0


def resummarize(rep: Path) -> None:
    """Writes a repetition's summary.json afresh from its saved files with the current
    analysis, keeping the fidelity record its run made (the guard judged the run as it ran)."""
    from sojourn.analysis.results import open_repetition
    from sojourn.runner.execute import write_summary

    repetition = open_repetition(rep)
    write_summary(rep, repetition.link_bps, repetition.config.get("network", {}).get("groups"),
                  repetition.summary.get("fidelity"))


def _carry_run_figures(published: Path, staging: Path, undrawn: set[str]) -> None:
    """Keeps the earlier publication's figures of one run each (captions "RUN: ...") for the
    runs restored without per-request records: their repetitions are the ones published, so
    the figure still shows them. Figures of several runs are drawn anew from those at hand."""
    index = published / "figures.json"
    if not index.is_file():
        return
    figures = json.loads((staging / "figures.json").read_text()) if (staging / "figures.json").is_file() else []
    for figure in json.loads(index.read_text()):
        if figure_run(figure["caption"]) in undrawn and (published / figure["file"]).is_file():
            name = f"figure-{len(figures) + 1:02d}.png"
            shutil.copy2(published / figure["file"], staging / name)
            figures.append({"file": name, "caption": figure["caption"]})
    (staging / "figures.json").write_text(json.dumps(figures, indent=2) + "\n")


def _check_named_as_its_directory(run_json: Path) -> None:
    """Refuses a repetition whose run.json names another run than the directory it sits in:
    the tables find a repetition by the run its run.json names, so it would be counted as
    that run (six restored repetitions once carried mtu's names into rtt's publication)."""
    named = json.loads(run_json.read_text()).get("run")
    directory = run_json.parent.parent.name
    if named != directory:
        raise ValueError(f"{relative_paths(str(run_json))} names run {named!r}, not {directory!r}, the run it "
                         "sits in: set its identity (Run.identity) or move it, then publish again")


def _stage(entry: Entry, source: Path, staging: Path) -> None:
    """Copies what ``entry`` publishes from ``source`` into ``staging``."""
    if entry.spec:
        if (source / "spec.toml").is_file():
            shutil.copy2(source / "spec.toml", staging / "spec.toml")
        for run_json in sorted(source.glob("*/*/run.json")):
            rep = run_json.parent
            _check_named_as_its_directory(run_json)
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
