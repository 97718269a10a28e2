"""A run's inputs: the trace to replay and the docroot it requests, made with
sojourn.workloads and shared by every run whose workload section is the same.

Guarantee: ``prepare_inputs`` returns a trace file and a docroot that hold every object
of the trace at its exact size (docs/formats.md content rule); inputs already made for
the same workload configuration are reused, never half-made ones (a ``done.json``
marker is written last).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from sojourn.runner.layout import write_json

# Keys of the workload section that change the trace or the docroot.
TRACE_KEYS = ("model", "trace", "requests", "duration_s", "profile", "rho", "time_compression", "clients", "seed", "objects")


@dataclass
class Inputs:
    trace: Path
    docroot: Path
    periods: list[dict]      # per-period target vs achieved rho (empty for an imported trace)
    duration_s: float        # scheduled span of the trace
    requests: int


def input_key(workload: dict, link_bps: float) -> str:
    material = {k: workload[k] for k in TRACE_KEYS}
    material["link_bps"] = link_bps
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:12]


def _make_trace(workload: dict, link_bps: float):
    """The trace DataFrame and its per-period table, from the spec's workload section."""
    from sojourn.workloads import io as trace_io
    from sojourn.workloads import models, shaping

    if workload["trace"]:
        return trace_io.read_trace(workload["trace"]), []
    size_options = {"n_requests": workload["requests"]} if workload["requests"] else {"duration": workload["duration_s"]}
    if workload["objects"]:
        size_options["objects"] = workload["objects"]
    base = models.make_trace(model=workload["model"], rho=workload["rho"] or 1.0, link_bps=link_bps,
                             clients=workload["clients"], seed=workload["seed"], **size_options)
    # 000 §2.3: load is shaped by scaling inter-arrival times, per period for W1-W10.
    profile = workload["profile"] or workload["rho"]
    trace, periods = shaping.shape(base, link_bps=link_bps, profile=profile,
                                   time_compression=workload["time_compression"], seed=workload["seed"])
    if not workload["requests"]:
        trace = trace[trace["arrival_s"] < workload["duration_s"]]
    table = periods.to_dict("records") if hasattr(periods, "to_dict") else list(periods or [])
    return trace, table


def prepare_inputs(workload: dict, link_bps: float, inputs_root: Path) -> Inputs:
    from sojourn.workloads import docroot as docroots
    from sojourn.workloads import io as trace_io

    directory = Path(inputs_root) / input_key(workload, link_bps)
    done = directory / "done.json"
    if done.is_file():
        meta = json.loads(done.read_text())
        return Inputs(directory / "trace.csv", directory / "docroot", meta["periods"], meta["duration_s"], meta["requests"])
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    trace, periods = _make_trace(workload, link_bps)
    if trace.empty:
        raise ValueError(f"the workload {workload} produced an empty trace")
    trace_io.write_trace(trace, directory / "trace.csv")
    docroots.materialize(trace, directory / "docroot", seed=workload["seed"])
    # Servers whose workers drop root (apache2) must be able to read the docroot.
    for path in [directory, directory / "docroot", *[p for p in (directory / "docroot").rglob("*") if p.is_dir()]]:
        os.chmod(path, 0o755)
    meta = {"periods": periods, "duration_s": float(trace["arrival_s"].max()), "requests": int(len(trace)),
            "workload": workload, "link_bps": link_bps}
    write_json(done, meta)
    return Inputs(directory / "trace.csv", directory / "docroot", periods, meta["duration_s"], meta["requests"])
