"""``sojourn run SPEC``: validate, run what is missing, report, print the summary table."""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from sojourn.argtypes import number, positive_int
from sojourn.runner import layout
from sojourn.runner.execute import Progress
from sojourn.runner.experiment import LEFT_INVALID, NOT_STARTED, STOPPED_AT_DEADLINE
from sojourn.runner.spec import SpecError, load_spec

REPO = Path(__file__).resolve().parents[3]


def register(parser: argparse.ArgumentParser) -> None:
    parser.description = ("Run an experiment spec end to end: build what is missing, generate trace and docroot, "
                          "bring the testbed up, run server and load generator for every run and repetition, "
                          "write results/<name>/<run>/<rep>/, build results/<name>/report.html and print the "
                          "summary table. Completed repetitions are kept (resume); partial ones are redone. "
                          "Needs root (network namespaces).")
    parser.add_argument("spec", type=Path, help="experiment spec (TOML), e.g. experiments/demo.toml")
    parser.add_argument("--results", type=Path, default=REPO / "results", help="results root (default: %(default)s)")
    parser.add_argument("--prefix", default="sjrun",
                        help="testbed namespace/interface prefix, 2-8 lowercase letters/digits (default: %(default)s)")
    parser.add_argument("--fresh", action="store_true", help="delete previous results of this experiment first")
    parser.add_argument("--check", action="store_true", help="only validate the spec and list its runs")
    parser.add_argument("--quick", action="store_true",
                        help="run at the spec's [quick] scale (results/<name>-quick/); a spec without [quick] runs as is")
    parser.add_argument("--runs", type=lambda text: [name for name in text.split(",") if name], metavar="NAME[,NAME...]",
                        help="run only these runs of the spec (its variants/sweep points, as --check lists them); "
                             "with a spec whose base is another, e.g. more repetitions of a few of its runs")
    parser.add_argument("--no-report", action="store_true", help="do not build report.html at the end")
    parser.add_argument("--ray", nargs="?", const="auto", metavar="ADDRESS",
                        help="run the repetitions as tasks on a Ray cluster, one testbed per node (nodes need the "
                             "resource sojourn_testbed = 1): ADDRESS host:port, 'auto' (default: the running "
                             "cluster) or 'local' (start a one-node cluster here); results land as for a local run")
    parser.add_argument("--concurrency", type=positive_int, default=1, metavar="N",
                        help="run N testbeds at once on this machine, each in namespaces of its own; a repetition "
                             "that the fidelity guard finds disturbed (generator lag, emulator delay error, uplink "
                             "rate, CPU idle and steal: collect.fidelity) is marked invalid and redone "
                             "(default: %(default)s; docs/experiments.md gives the measured safe count)")
    add_stop_after(parser)
    parser.set_defaults(func=main)


def add_stop_after(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stop-after", type=number(at_least=0, what="minutes"), metavar="MINUTES",
                        help="start no repetition later than MINUTES from now; those left are not started (the next "
                             "invocation runs them), so a campaign that must end by a given time ends whole; exit "
                             f"status {STOPPED_AT_DEADLINE} (sysexits' EX_TEMPFAIL) when it left some and none failed "
                             f"({LEFT_INVALID} when some are left invalid by the fidelity guard, 1 when one failed)")


def stop_time(minutes: float | None) -> float | None:
    """The time.time() instant ``--stop-after MINUTES`` names, None without it."""
    return None if minutes is None else time.time() + minutes * 60


def stopped_line(outcome) -> str:
    """What a command stopped by --stop-after tells: how many repetitions it left."""
    left = sum(state == NOT_STARTED for state in outcome.states.values())
    return (f"{left} repetition(s) not started before --stop-after's deadline; run the command again to resume "
            f"(exit status {STOPPED_AT_DEADLINE})")


def invalid_line(outcome) -> str:
    """What a command that left repetitions invalid after their redos tells."""
    left = sum(state == "invalid" for state in outcome.states.values())
    return (f"{left} repetition(s) left invalid: the fidelity guard found every attempt disturbed by the machine "
            f"(attempts.json in each says how); run the command again to redo them (exit status {LEFT_INVALID})")


def _calm_words(data: dict) -> str:
    """What a wait for the host's steal to calm came to (points.run_point's "calm" event)."""
    steal = f"host steal {data['steal']:.1%} of the last second (calm: at most {data['most']:.1%})"
    waited = f"{data['waited_s'] / 60:.1f} min"
    return {"waiting": f"{steal}: waiting for calm before starting",
            "calm": f"{steal} after {waited}: starting",
            "gave up": f"{steal} still after {waited}: starting anyway (the fidelity guard judges it)",
            "deadline": f"{steal} still at the deadline after {waited}: not started"}[data["verdict"]]


def _progress_line(header: str, progress: Progress, started: float) -> Text:
    remaining = max(progress.expected_s - progress.elapsed_s, 0.0)
    return Text(f"{header} | {progress.phase} | {progress.elapsed_s:.0f}/{progress.expected_s:.0f} s, ~{remaining:.0f} s left"
                f" | {progress.completed} done, {progress.requests_per_s:.0f} req/s | in flight {progress.in_flight}"
                f" | errors {progress.errors}"
                f" | total {time.monotonic() - started:.0f} s", no_wrap=True, overflow="ellipsis")


def print_summary(console: Console, directory: Path, baseline: str, order: list[str]) -> None:
    from sojourn.analysis.results import TABLE_METRICS, load_experiment, run_table

    table = run_table(load_experiment(directory), baseline, order)
    out = Table(title=f"{directory.name}: ratios relative to {table.attrs['baseline']}")
    out.add_column("run", no_wrap=True)
    for label in TABLE_METRICS.values():
        out.add_column(label, justify="right")
    out.add_column("mean ratio", justify="right")
    out.add_column("largest 1% ratio", justify="right")
    for _, row in table.iterrows():
        cells = [row["run"] + (" (partial)" if row["partial"] else "")]
        for metric in TABLE_METRICS:
            value = row[metric]
            cells.append("—" if value != value else (f"{value:.0f}" if metric in ("incomplete", "syn_drops") else f"{value:.3g}"))
        cells += [f"{row['mean_ratio']:.3f}", f"{row['largest_1pct_ratio']:.3f}"]
        out.add_row(*cells)
    console.print(out)


def print_sessions(console: Console, directory: Path, order: list[str]) -> None:
    """Per run and class, the session measures of 003 §5 (means over repetitions);
    nothing when no run has session data."""
    from sojourn.analysis.results import load_experiment
    from sojourn.report.session_section import MEASURES, class_table, session_summaries

    reps = load_experiment(directory)
    table = class_table(reps, session_summaries(reps), order)
    if table.empty:
        return
    out = Table(title=f"{directory.name}: sessions per class (003 §5)")
    for column in ("run", "class", "requests", "sessions", *MEASURES.values()):
        out.add_column(column, justify="left" if column in ("run", "class") else "right", no_wrap=True)
    for _, row in table.iterrows():
        cells = [row["run"] + (" (partial)" if row["partial"] else ""), row["class"], f"{row['requests']:.0f}",
                 f"{row['sessions']:.0f}"]
        cells += ["—" if row[m] != row[m] else f"{row[m]:.3g}" for m in MEASURES]
        out.add_row(*cells)
    console.print(out)


def run_with_progress(console: Console, experiment, results: Path, prefix: str, fresh: bool = False,
                      ray_address: str | None = None, concurrency: int = 1, stop_at: float | None = None):
    """Runs what is missing of ``experiment`` under ``results`` with a live progress
    line; returns ``(outcome, 0)``, or ``(None, exit status)`` after printing why it
    stopped. Shared by ``sojourn run`` and ``sojourn reproduce``."""
    from sojourn.servers import ServerError
    from sojourn.runner.experiment import ResultsConflict, run_experiment
    from sojourn.testbed import ConfigError, NetError

    started = time.monotonic()
    header = {"text": ""}
    with Live(console=console, refresh_per_second=4, transient=False) as live:
        def on_event(kind, data):
            if kind == "repetition":
                header["text"] = f"[{data['index']}/{data['total']}] {data['run']} rep {data['rep']}"
                header["point"] = (data["run"], data["rep"])
                if data["skipped"]:
                    live.console.print(f"{header['text']}: complete, kept", markup=False)
            elif kind == "progress":
                live.update(_progress_line(header["text"], data, started))
            elif kind == "stale":
                live.console.print(f"{data['run']} rep {data['rep']}: left 'running' by a run that died (pid "
                                   f"{data['pid']}, started {data['started']}); running it again", markup=False)
            elif kind == "calm":
                live.console.print(f"{data['run']} rep {data['rep']}: {_calm_words(data)}", markup=False)
            elif kind == "invalid":
                then = "running it again" if data["again"] else "not run again here (out of redos or time)"
                live.console.print(f"{data['run']} rep {data['rep']}: invalid ({data['reason']}); {then}",
                                   markup=False)
            elif kind == "done":
                # The header names the last point announced; a point that finishes out of turn (Ray,
                # concurrent workers) or never started (--stop-after) is named by itself.
                ours = header.get("point") == (data["run"], data["rep"])
                label = header["text"] if ours else f"{data['run']} rep {data['rep']}"
                where = f" on {data['node']}" if data.get("node") else ""
                took = f" in {data['wall_s']:.0f} s" if math.isfinite(data["wall_s"]) else ""
                why = ""
                if data["state"] in ("invalid", "partial"):
                    status = layout.read_status(layout.rep_dir(results, experiment.name, data["run"], data["rep"]))
                    why = f" ({status['reason']})" if status.get("reason") else ""
                live.console.print(f"{label}: {data['state']}{took}{where}{why}", markup=False)
        try:
            return run_experiment(experiment, results, prefix=prefix, fresh=fresh, on_event=on_event,
                                  ray_address=ray_address, concurrency=concurrency, stop_at=stop_at), 0
        except ResultsConflict as err:
            console.print(f"sojourn run: {err}", style="red", markup=False, highlight=False)
            return None, 2
        except (ServerError, NetError, ConfigError, OSError, ValueError, RuntimeError, subprocess.CalledProcessError) as err:
            # RuntimeError: e.g. the testbed's counter sampler lost an interface mid-run.
            # The repetition's status.json says partial with this reason; the rest is not run.
            console.print(f"sojourn run: {type(err).__name__}: {err}", style="red", markup=False, highlight=False)
            return None, 1
        except KeyboardInterrupt:
            console.print("[yellow]interrupted: the current repetition is kept as partial; rerun to resume[/]")
            return None, 130


def main(args: argparse.Namespace) -> int:
    # Wide enough for the summary table when the output is not a terminal (make demo | tee).
    console = Console(width=None if sys.stdout.isatty() else 160)
    try:
        experiment = load_spec(args.spec, quick=args.quick)
        if args.runs is not None:
            experiment = experiment.only(args.runs)
    except SpecError as err:
        console.print(f"sojourn run: {err}", style="red", markup=False, highlight=False)
        return 2
    from sojourn.runner.spec import missing_programs

    missing = missing_programs(experiment)
    for notice in experiment.notices:
        console.print(f"sojourn run: note: {notice}", style="yellow", markup=False, highlight=False)
    if args.check:
        for run in experiment.runs:
            console.print(f"{run.name}: {experiment.repetitions} repetition(s)")
    if missing:
        for problem in missing:
            console.print(f"sojourn run: {problem}", style="red", markup=False, highlight=False)
        return 2
    if args.check:
        return 0
    if os.geteuid() != 0:
        console.print("[red]sojourn run needs root (or CAP_NET_ADMIN and CAP_SYS_ADMIN) to create network "
                      "namespaces; run it with sudo[/]")
        return 1
    outcome, status = run_with_progress(console, experiment, args.results, args.prefix, args.fresh, args.ray,
                                        args.concurrency, stop_time(args.stop_after))
    if outcome is None:
        return status
    directory = outcome.directory
    if "complete" in outcome.states.values():  # after --stop-after 0 (or only failures) nothing to sum up
        print_summary(console, directory, experiment.baseline, [run.name for run in experiment.runs])
        print_sessions(console, directory, [run.name for run in experiment.runs])
        if not args.no_report:
            from sojourn.report.html import build_report
            path = build_report(directory, baseline=experiment.baseline)
            console.print(f"report: {path}")
    if outcome.status == STOPPED_AT_DEADLINE:
        console.print(f"[yellow]{stopped_line(outcome)}[/]")
    elif outcome.status == LEFT_INVALID:
        console.print(f"[yellow]{invalid_line(outcome)}[/]")
    elif outcome.status:
        console.print("[yellow]some repetitions are partial, invalid or not started (see status.json in each)[/]")
    return outcome.status
