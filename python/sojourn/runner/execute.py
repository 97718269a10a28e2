"""Running one repetition of one run: testbed up, server, counters, load generator,
tear down, summary.

Guarantees: every process started here is stopped and the testbed's namespaces are
removed on every exit path (normal, exception, Ctrl-C/SIGTERM: the testbed turns the
signal into KeyboardInterrupt); the repetition directory ends with ``status.json``
``complete`` only if the load generator finished on its own with exit status 0, else
``partial`` with the reason, and in both cases with whatever records were written and a
``summary.json`` computed from them.
"""

from __future__ import annotations

import csv
import json
import os
import platform
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

import pandas as pd

from sojourn import analysis, servers
from sojourn.analysis.results import server_metric_means, summarize_repetition
from sojourn.engine import engine_path
from sojourn.runner import fidelity, layout, load_parts
from sojourn.runner.derived import write_derived
from sojourn.runner import session_workload
from sojourn.runner.inputs import Inputs, poisson_from_catalogue, set_page_cache
from sojourn.runner.loadfile import LoadFile
from sojourn.runner.plan import RunPlan, load_seconds
from sojourn.runner.spec import Run
from sojourn.testbed.counters import machine_ticks_now
from sojourn.testbed.uplink import uplink_stats


@dataclass
class Progress:
    """What the live display shows about the repetition in progress."""

    phase: str = "starting"
    elapsed_s: float = 0.0
    expected_s: float = 0.0
    requests_per_s: float = 0.0
    in_flight: int = 0
    errors: int = 0
    completed: int = 0


def versions(run: Run, engine: Path) -> dict:
    def first_line(argv):
        try:
            out = subprocess.run(argv, capture_output=True, text=True, timeout=10)
            return (out.stdout or out.stderr).strip().splitlines()[0]
        except (OSError, IndexError, subprocess.TimeoutExpired):
            return "unknown"
    repo = Path(__file__).resolve().parents[3]
    return {
        "sojourn_engine": first_line([str(engine), "--version"]),
        "server": servers.version(run.config["server"]["kind"]),
        "git": first_line(["git", "-C", str(repo), "describe", "--always", "--dirty"]),
        "kernel": platform.release(),
        "host": platform.node(),
        "python": platform.python_version(),
        "pandas": pd.__version__,
    }


def _interval_progress(paths: list[Path], progress: Progress) -> None:
    """Updates ``progress`` from the load generators' intervals.csv (one row per second,
    docs/formats.md): the last rows' rates and in-flight counts, errors summed."""
    rate = in_flight = errors = completed = 0.0
    for path in paths:
        try:
            lines = path.read_text(errors="replace").splitlines()
        except OSError:
            continue
        if len(lines) < 2:
            continue
        header = next(csv.reader(lines[:1]))
        # The file is being written: a last line cut mid-row has fewer fields and is left out.
        rows = [dict(zip(header, fields)) for fields in csv.reader(lines[1:]) if len(fields) == len(header)]
        if not rows:
            continue
        number = lambda row, key: float(row.get(key) or 0)  # noqa: E731
        rate += number(rows[-1], "completed")
        in_flight += number(rows[-1], "in_flight")
        errors += sum(number(row, "errors") for row in rows)
        completed += sum(number(row, "completed") for row in rows)
    progress.requests_per_s, progress.in_flight = rate, int(in_flight)
    progress.errors, progress.completed = int(errors), int(completed)


# How long a load generator sent SIGINT has to write its files before it is killed.
INTERRUPT_GRACE_S = 15.0


def _interrupt(load_proc: subprocess.Popen, grace_s: float = INTERRUPT_GRACE_S) -> None:
    if load_proc.poll() is None:
        load_proc.send_signal(signal.SIGINT)
        try:
            load_proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            load_proc.kill()
            load_proc.wait()


# How often a running repetition is judged (fidelity.Watch): often enough to stop one whose
# verdict is certain within seconds, rarely enough that reading counters.csv costs nothing.
WATCH_EVERY_S = 5.0


def _follow_load(procs: list[subprocess.Popen], directories: list[Path], progress: Progress,
                 on_progress: Callable[[Progress], None], limit_s: float,
                 watch: fidelity.Watch | None = None) -> tuple[str, str]:
    """Waits for the load generators, updating ``progress`` (summed over their
    intervals.csv); stops them (SIGINT) after ``limit_s``, or as soon as ``watch`` finds the
    repetition invalid whatever comes next. Returns the repetition's (state, reason)."""
    started = time.monotonic()
    judged = started
    progress.phase = "load"
    while any(proc.poll() is None for proc in procs):
        time.sleep(0.5)
        progress.elapsed_s = time.monotonic() - started
        _interval_progress([directory / "intervals.csv" for directory in directories], progress)
        on_progress(progress)
        if watch is not None and time.monotonic() - judged >= WATCH_EVERY_S:
            judged = time.monotonic()
            certain = watch.violations()
            if certain:
                for proc in procs:
                    _interrupt(proc)
                return "invalid", (f"fidelity: {'; '.join(certain)} (certain {progress.elapsed_s:.0f} s into "
                                   "the load, which was stopped)")
        if progress.elapsed_s > limit_s:
            for proc in procs:
                _interrupt(proc)
            return "partial", (f"load generator still running {limit_s:.0f} s after it started "
                               "(trace length + max(collect.drain_s, workload.timeout_s) + 10 s); stopped")
    failed = [proc.returncode for proc in procs if proc.returncode != 0]
    if not failed:
        return "complete", ""
    return "partial", f"load generator exited with status {failed[0]} (see load.log)"


def _exit_words(returncode: int) -> str:
    if returncode < 0:
        return f"killed by {signal.Signals(-returncode).name}"
    return f"exit status {returncode}"


def _died_during_load(peer, tb) -> str:
    """Names the server or emulator that ended before the load did: such a repetition's
    records are whole but measure a dead process, so it is not complete."""
    dead = []
    if peer.process is not None and peer.process.poll() is not None:
        dead.append(f"the server under test ({peer.config.kind}) ended during the run "
                    f"({_exit_words(peer.process.returncode)})")
    if tb.emulator and tb.emulator.proc and tb.emulator.proc.poll() is not None:
        dead.append(f"the WAN emulator ended during the run ({_exit_words(tb.emulator.proc.returncode)})")
    return "; ".join(dead)


# The most the end of a repetition may take, from its load's end to the guard's verdict: the
# server's counters fetched (5 s at most), the uplink read, server and namespaces stopped.
TEARDOWN_S = 60.0


def _longest_load_s(workload: dict, limit_s: float) -> float:
    """A bound on how long a repetition's load may last: its capacity levels' limits, and the
    load's own (``limit_s``) after them unless the run is the capacity probe alone, each with
    the grace a generator stopped at its limit has to end (at a load fraction ``limit_s``
    counts the levels' length too: counted twice, in the run's favour)."""
    levels = len(workload["levels"]) if workload["mode"] == "capacity" or workload["load_fraction"] else 0
    levels += workload["levels_until_fall"]
    last = 0.0 if workload["mode"] == "capacity" else limit_s + INTERRUPT_GRACE_S
    return levels * (_level_limit_s(workload) + INTERRUPT_GRACE_S) + last


def run_repetition(run: Run, rep: int, directory: Path, inputs: Inputs, prefix: str,
                   on_progress: Callable[[Progress], None] = lambda p: None, index: int = 0) -> str:
    """Runs one repetition into ``directory``; returns its final state."""
    from sojourn.testbed import Testbed

    directory.mkdir(parents=True, exist_ok=True)
    layout.mark(directory, "running", pid=os.getpid())
    trace = str(inputs.trace) if run.config["workload"]["mode"] == "open" else ""  # sessions replay no trace
    layout.write_json(directory / "run.json", {**run.identity(index), "repetition": rep, "config": run.config,
                                                "inputs": {"trace": trace, "docroot": str(inputs.docroot),
                                                           "periods": inputs.periods, "duration_s": inputs.duration_s,
                                                           "requests": inputs.requests}})
    engine = engine_path()
    server_cfg, workload, collect = run.config["server"], run.config["workload"], run.config["collect"]
    link_bps = run.config["network"]["link_mbps"] * 1e6
    state, reason = "partial", "did not finish"
    duration_s = load_seconds(run.config, inputs.duration_s)
    progress = Progress(expected_s=duration_s)
    meta = versions(run, engine)
    cpu_start = machine_ticks_now()
    try:
        progress.phase = "testbed"
        on_progress(progress)
        with Testbed(replace(run.plan.testbed, prefix=prefix), workdir=directory / "testbed") as tb:
            meta["testbed"] = tb.describe()
            meta["page_cache"] = set_page_cache(inputs.docroot, collect["docroot_cache"])
            if tb.leftovers:
                meta["leftovers_removed"] = tb.leftovers
                print(f"sojourn run: removed what a run that died (pid {tb.leftovers['owner'].get('pid')}) left with "
                      f"prefix {prefix}: {', '.join(tb.leftovers['removed'])}", file=sys.stderr)
            layout.write_json(directory / "versions.json", meta)
            addrs = [a for group in tb.client_addrs.values() for a in group]
            stages_path = None
            if server_cfg["stages"] or workload["mode"] == "sessions":
                stages = server_cfg["stages"] or {}
                stages_path = session_workload.stages_file(stages, tb.client_addrs, directory / "series.csv",
                                                           directory / "stages.toml")
                class_map = session_workload.class_map(session_workload.effective_classes(stages, tb.client_addrs), addrs)
                layout.write_json(directory / "classes.json", class_map)
            sojourn = run.plan.sojourn and replace(run.plan.sojourn, admin_port=server_cfg["port"] + 1,
                                                   stages=stages_path)
            peer_cfg = servers.ServerConfig(
                kind=server_cfg["kind"], root=inputs.docroot, addr=tb.server_addr, port=server_cfg["port"],
                workers=server_cfg["workers"], netns=tb.server_ns,
                access_log=directory / "access.log" if server_cfg["access_log"] else None,
                max_connections=server_cfg["max_connections"] or None, sojourn=sojourn,
                extra_args=list(server_cfg["args"]), command=list(server_cfg["command"]),
                preexec_fn=tb.server_preexec())
            progress.phase = "server"
            on_progress(progress)
            with servers.Server(peer_cfg, log_dir=directory) as peer:
                tb.start_counters(directory / "counters.csv", interval_s=collect["interval_s"])
                target = f"{tb.server_addr}:{server_cfg['port']}"
                # The last request may take its whole timeout; drain_s may allow longer.
                limit_s = duration_s + max(collect["drain_s"], workload["timeout_s"]) + 10
                watch = fidelity.Watch(run.config, directory / "counters.csv", cpu_start,
                                       _longest_load_s(workload, limit_s) + TEARDOWN_S)
                if workload["mode"] == "capacity":
                    state, reason = _capacity_levels(tb, peer, engine, run.plan.probe, inputs, target, directory,
                                                     workload, addrs, progress, on_progress, run.plan.load_processes,
                                                     watch)
                elif workload["mode"] == "sessions":
                    model = Path(workload["sessions"]["model_file"]) if workload["sessions"]["model_file"] else \
                        session_workload.session_model(server_cfg["stages"] or {}, workload["sessions"],
                                                       directory / "model.toml", class_map,
                                                       session_workload.arrival_profile(workload))
                    run_file = run.plan.load.placed(target, directory, addrs, inputs.trace, model=model)
                    state, reason = _run_load(tb, engine, run_file, progress, on_progress, limit_s, watch=watch)
                elif workload["load_fraction"]:
                    state, reason = _at_load_fraction(tb, peer, engine, run.plan, inputs, target, directory, workload,
                                                      addrs, progress, on_progress, limit_s, watch)
                else:
                    run_file = run.plan.load.placed(target, directory, addrs, inputs.trace)
                    state, reason = _run_load(tb, engine, run_file, progress, on_progress, limit_s,
                                              run.plan.load_processes, watch)
                tb.stop_counters()
                died = _died_during_load(peer, tb)
                if died and state == "complete":
                    state, reason = "partial", died
                _save_server_metrics(tb, peer, directory / "server_metrics.txt")
                # The uplink's qdisc and class statistics after the run (bytes per band).
                end = tb.describe()
                layout.write_json(directory / "network_end.json", {"qdisc": end["qdisc"], "class": end["class"],
                                                                   "emulator": end["emulator"]})
                _save_bands(tb, directory / "bands.json")
                if tb.server_cpu:
                    layout.write_json(directory / "server_cpu.json", tb.server_cpu.stats())
    except KeyboardInterrupt as interrupt:
        if state != "complete":  # the load generator had finished: its records are whole
            reason = f"interrupted ({interrupt or 'Ctrl-C'})"
        raise
    except Exception as err:  # noqa: BLE001 - recorded in status.json, then re-raised
        reason = f"{type(err).__name__}: {err}"
        raise
    finally:
        progress.phase = "analysis"
        on_progress(progress)
        _adopt_load_summary(directory)
        try:
            record = fidelity.assess(directory, run.config, fidelity.cpu_shares(machine_ticks_now().since(cpu_start)))
            if state == "complete" and not record["valid"]:
                state, reason = "invalid", "fidelity: " + "; ".join(record["violations"])
            # The derived files first: the summary reads the ideal schedules among them.
            notes = write_derived(directory, link_bps, timestamps=run.config["network"]["tcp"]["timestamps"])
            if notes:
                (directory / "derived.log").write_text("\n".join(notes) + "\n")
            write_summary(directory, link_bps, run.config["network"]["groups"], record)
        except Exception as err:  # noqa: BLE001 - a broken records file must not hide the run's own error
            state, reason = "partial", f"{reason}; summary failed: {err}".lstrip("; ")
        layout.mark(directory, state, reason)
    return state


def _run_load(tb, engine: Path, run_file: LoadFile, progress: Progress, on_progress, limit_s: float,
              processes: int = 1, watch: fidelity.Watch | None = None) -> tuple[str, str]:
    """Runs the load generator in the client namespace into ``run_file.out`` (its options
    kept there as load.toml) and follows it; with ``processes`` > 1, that many, each with
    its share of the clients in a directory of its own, merged when all have ended
    (sojourn.runner.load_parts)."""
    out = run_file.out
    if processes == 1:
        files = [run_file]
    else:
        files = [replace(run_file, out=load_parts.part_dir(out, index), process_part=f"{index}/{processes}")
                 for index in range(processes)]
    procs = []
    try:
        for part in files:
            part.out.mkdir(parents=True, exist_ok=True)
            argv = [str(engine), "load", "--config", str(part.write(part.out / "load.toml"))]
            with open(part.out / "load.log", "wb") as log:
                procs.append(tb.popen(tb.client_ns, argv, stdout=log, stderr=subprocess.STDOUT))
        return _follow_load(procs, [part.out for part in files], progress, on_progress, limit_s, watch)
    except KeyboardInterrupt:
        # Before teardown: the generator records what is outstanding as
        # 'interrupted' and writes its files on SIGINT (docs/load.md).
        for proc in procs:
            _interrupt(proc)
        raise
    finally:
        # Also after an interruption: a partial repetition keeps its records (a process that
        # never started has none, and its exit status is the repetition's reason).
        if processes > 1 and any((part.out / "records.csv").is_file() for part in files):
            load_parts.merge(engine, [part.out for part in files], out)


def _level_limit_s(workload: dict) -> float:
    """The longest one capacity level may run: its length, a last request's timeout, 10 s."""
    return workload["level_s"] + workload["timeout_s"] + 10


# A level's own server counters, apart from its ramp and drain: the server's /metrics when its
# warm-up ends and this long before its users stop. 001 §6.1 counts the ready events per wait
# of a saturated server; over a whole 30-minute level the ~2300 nearly empty waits of its start
# and drain diluted sojourn's mean to 509 events (001's events, 6 Dec 2026).
LEVEL_WARM_METRICS = "server_metrics_warm.txt"
LEVEL_END_METRICS = "server_metrics_end.txt"
LEVEL_END_LEAD_S = 1.0


def _level_metric_timers(tb, peer: servers.Server, out: Path, workload: dict) -> list[threading.Timer]:
    """Timers, started, that save the server's counters into ``out`` at the end of a level's
    warm-up and :data:`LEVEL_END_LEAD_S` before its end (none for a server without /metrics)."""
    end_s = workload["level_s"] - LEVEL_END_LEAD_S
    if not peer.metrics_url or end_s <= workload["warmup_s"]:
        return []
    timers = [threading.Timer(at, _save_server_metrics, (tb, peer, out / name))
              for at, name in ((workload["warmup_s"], LEVEL_WARM_METRICS), (end_s, LEVEL_END_METRICS))]
    for timer in timers:
        timer.daemon = True
        timer.start()
    return timers


def _level_server_means(out: Path) -> dict:
    """The server's own means over a level after its warm-up (``server``: e.g. events per
    wait, analysis.server_metric_means), when both of its snapshots were taken."""
    warm, end = out / LEVEL_WARM_METRICS, out / LEVEL_END_METRICS
    if not (warm.is_file() and end.is_file()):
        return {}
    means = server_metric_means(end.read_text(), before=warm.read_text())
    return {"server": means} if means else {}


def _capacity_levels(tb, peer: servers.Server, engine: Path, probe: LoadFile, inputs: Inputs, target: str,
                     directory: Path, workload: dict, addrs: list[str], progress: Progress, on_progress,
                     processes: int = 1, watch: fidelity.Watch | None = None) -> tuple[str, str]:
    """002 §4.4: the server loaded by ``workload.levels`` users in turn (same server, one
    level after the other, each in level-<users>/ with its own records), and by up to
    ``workload.levels_until_fall`` doublings (capacity mode) while the newest level sustained the
    most (analysis.next_level); capacity.json holds each level's throughput after its
    warm-up and the capacity, the most sustained, and each level's server means over the same
    span (:func:`_level_server_means`)."""
    levels = []
    while (users := analysis.next_level(levels, workload["levels"], workload["levels_until_fall"])) is not None:
        out = directory / f"level-{users}"
        out.mkdir(exist_ok=True)
        run_file = probe.placed(target, out, addrs, inputs.trace, users=users)
        cpu_before, started = tb.server_cpu_seconds(), time.monotonic()
        timers = _level_metric_timers(tb, peer, out, workload)
        try:
            state, reason = _run_load(tb, engine, run_file, progress, on_progress, _level_limit_s(workload),
                                      processes, watch)
        finally:
            for timer in timers:  # a level that ended early takes no later snapshot
                timer.cancel()
                timer.join()
        cpu_after, took = tb.server_cpu_seconds(), time.monotonic() - started
        _adopt_load_summary(out)
        if state != "complete":
            return state, f"level {users} users: {reason}"
        reqs = analysis.requests(analysis.read_records(out / "records.csv"))
        # The server's CPU seconds per second over the whole level, warm-up included (processes
        # alive at both ends: the server's own, not a CGI's), 002 Figs. 10 and 12.
        cpu = sum(after - cpu_before[pid] for pid, after in cpu_after.items() if pid in cpu_before)
        levels.append({"users": users, **analysis.window_throughput(reqs, workload["warmup_s"], workload["level_s"]),
                       "server_cpu": round(cpu / took, 4), **_level_server_means(out)})
    layout.write_json(directory / "capacity.json", analysis.capacity_of_levels(levels))
    return "complete", ""


def _at_load_fraction(tb, peer: servers.Server, engine: Path, plan: RunPlan, inputs: Inputs, target: str,
                      directory: Path, workload: dict, addrs: list[str], progress: Progress, on_progress,
                      limit_s: float, watch: fidelity.Watch | None = None) -> tuple[str, str]:
    """001 §3.1: measure the server's capacity first (infinite demand at workload.levels,
    capacity.json), then replay Poisson arrivals at load_fraction x capacity drawn from the
    catalogue (trace.csv in the repetition) on the same server. The server's counters at the
    end of the probe (server_metrics_probe.txt) set the load level's own apart from it."""
    from sojourn.workloads import io as trace_io

    state, reason = _capacity_levels(tb, peer, engine, plan.probe, inputs, target, directory, workload, addrs,
                                     progress, on_progress, plan.load_processes, watch)
    if state != "complete":
        return state, f"capacity probe: {reason}"
    capacity = json.loads((directory / "capacity.json").read_text())["capacity_rps"]
    if not capacity or capacity != capacity:
        return "partial", "capacity probe completed no request"
    _save_server_metrics(tb, peer, directory / "server_metrics_probe.txt")
    rate = workload["load_fraction"] * capacity
    trace = poisson_from_catalogue(trace_io.read_trace(inputs.trace), rate, workload["duration_s"],
                                   workload["clients"], workload["seed"])
    trace_io.write_trace(trace, directory / "trace.csv")
    layout.write_json(directory / "offered.json", {"capacity_rps": capacity, "load_fraction": workload["load_fraction"],
                                                   "rate_rps": rate, "requests": len(trace)})
    run_file = plan.load.placed(target, directory, addrs, directory / "trace.csv")
    return _run_load(tb, engine, run_file, progress, on_progress, limit_s, plan.load_processes, watch)


def _save_bands(tb, path: Path) -> None:
    """Per-band sent/dropped/backlog of the uplink (sojourn.testbed.uplink.uplink_stats), one
    JSON object per line, when the run has bands."""
    if tb.config.cutoffs:
        rows = uplink_stats(tb.server_ns, tb.uplink_dev, tb.config.cutoffs)
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def _save_server_metrics(tb, peer: servers.Server, path: Path) -> None:
    """The server's own counters after the load (Prometheus text, stub_status or
    mod_status), fetched inside the server's namespace; nothing when it has none."""
    if not peer.metrics_url:
        return
    answer = tb.run(tb.server_ns, ["curl", "-s", "--max-time", "5", peer.metrics_url], capture_output=True)
    if answer.returncode == 0 and answer.stdout:
        path.write_bytes(answer.stdout)


def write_summary(directory: Path, link_bps: float, groups, fidelity_record: dict | None) -> None:
    """Writes a repetition's summary.json from its saved files, with the fidelity guard's
    record of the run (none for a repetition that predates the guard)."""
    summary = summarize_repetition(directory, link_bps, groups)
    if fidelity_record is not None:
        summary["fidelity"] = fidelity_record
    layout.write_json(directory / "summary.json", summary)


def _adopt_load_summary(directory: Path) -> None:
    """The load generator writes its own summary.json into the directory; keep it as
    load_summary.json so summary.json is the analysis's."""
    theirs = directory / "summary.json"
    if theirs.is_file():
        try:
            data = json.loads(theirs.read_text())
        except json.JSONDecodeError:
            return
        if "link_bps" not in data:  # ours always has link_bps
            theirs.replace(directory / "load_summary.json")
