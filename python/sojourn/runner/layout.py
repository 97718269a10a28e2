"""Where results live, and how a repetition says whether it is complete.

``results/<experiment>/`` holds ``spec.toml`` (the spec as run), ``inputs/<key>/`` (trace
and docroot, shared by runs with the same workload) and one directory per run and
repetition: ``<run>/<rep>/`` with

| file | from |
|---|---|
| ``status.json`` | ``{"state": "running" | "complete" | "partial" | "invalid", "reason": ..., "started": ..., "finished": ...}`` |
| ``spec.toml`` | a copy of the experiment's spec as run |
| ``run.json`` | the run's resolved configuration (spec defaults filled in, variant and sweep applied) |
| ``versions.json`` | programs, kernel, host, the testbed's description (qdiscs, sysctls) |
| ``calm.json`` | how long the attempt waited for the host's steal to calm (``sojourn.runner.points``) |
| ``host.json`` | the machine (boot id, processor) and its speed just before the attempt, no testbed running (``sojourn.testbed.host``) |
| ``records.csv``, ``intervals.csv``, ``load_summary.json`` | the load generator (docs/formats.md) |
| ``counters.csv`` | the testbed's kernel counters (docs/testbed.md) |
| ``server_metrics.txt`` | the server's own counters after the load (sojourn /metrics, nginx stub_status, apache2 mod_status) |
| ``server_metrics_probe.txt`` | the same at the end of the capacity probe that precedes a load level (``workload.load_fraction``) |
| ``bands.json`` | per-band sent/dropped/backlog of the uplink (``sojourn.testbed.uplink.uplink_stats``), runs with bands |
| ``network_end.json`` | the uplink's ``tc -s`` qdisc and class statistics after the load (bytes per band) |
| ``summary.json`` | sojourn.analysis over the above |
| ``records.parquet``, ``intervals.parquet``, ``ideal.parquet``, ``format.json`` | written when the repetition finishes (sojourn.runner.derived.write_derived, result format 2): the CSVs as Parquet, the ideal PS/SRPT schedules of its requests; ``derived.log`` says what could not be written |
| ``server-*.log``, ``load.log`` | the programs' own output |

A repetition directory without ``status.json`` state ``complete`` is not trusted: a rerun
replaces it (resume), and the report shows it marked partial.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

STATUS = "status.json"


def experiment_dir(results: Path, name: str) -> Path:
    return Path(results) / name


def rep_dir(results: Path, experiment: str, run: str, rep: int) -> Path:
    return Path(results) / experiment / run / str(rep)


def write_json(path: Path, data) -> None:
    """Writes atomically (temp file + rename), so a reader never sees half a file."""
    write_text(path, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


def write_text(path: Path, text: str) -> None:
    """Writes ``text`` atomically (temp file + rename)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def read_status(directory: Path) -> dict:
    path = Path(directory) / STATUS
    if not path.is_file():
        return {"state": "missing"}
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError:
        return {"state": "partial", "reason": "unreadable status.json"}


def mark(directory: Path, state: str, reason: str = "", **extra) -> None:
    status = read_status(directory) if (Path(directory) / STATUS).is_file() else {}
    status.update({"state": state, "reason": reason, **extra})
    status.setdefault("started", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    if state != "running":
        status["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    write_json(Path(directory) / STATUS, status)


def is_complete(directory: Path) -> bool:
    return read_status(directory).get("state") == "complete"
