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
import time
from dataclasses import dataclass
from pathlib import Path

from sojourn.runner.layout import write_json

# Keys of the workload section that change the trace or the docroot.
TRACE_KEYS = ("model", "trace", "requests", "duration_s", "profile", "rho", "time_compression", "clients", "seed", "objects",
              "mode", "load_basis", "wire_overhead_bytes", "cycles")
# Closed and capacity modes draw paths from a catalogue: a trace of this many requests
# whose path column carries the model's popularity (Zipf) and sizes.
CATALOGUE_REQUESTS = 20_000


@dataclass
class Inputs:
    trace: Path  # its paths.txt sibling lists the trace's paths (closed and capacity modes)
    docroot: Path
    periods: list[dict]      # per-period target vs achieved rho (empty for an imported trace)
    duration_s: float        # scheduled span of the trace
    requests: int


def set_page_cache(docroot: Path, state: str) -> dict:
    """Brings every file under ``docroot`` into the page cache (``warm``: read once, so the
    server under test serves it from memory, as 000 §2.2 assumes; a docroot made in an
    earlier session is on disk only, and a single-threaded server blocks on each first read)
    or out of it (``cold``: POSIX_FADV_DONTNEED, which drops the clean pages of a file no
    one maps). Returns the files and bytes and the seconds it took (seconds rather than a
    fraction of a second to warm say the docroot was cold)."""
    if state not in ("warm", "cold"):
        raise ValueError(f"page cache state {state!r}: accepted warm, cold")
    files = size = 0
    start = time.monotonic()
    for path in sorted(docroot.rglob("*")):
        if path.is_file():
            with open(path, "rb", buffering=0) as f:
                if state == "cold":
                    os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
                    size += os.fstat(f.fileno()).st_size
                else:
                    while chunk := f.read(1 << 20):
                        size += len(chunk)
            files += 1
    return {"state": state, "files": files, "bytes": size, "seconds": round(time.monotonic() - start, 3)}


def is_catalogue(workload: dict) -> bool:
    """Whether the run's trace is only a catalogue of paths and sizes (closed, capacity and
    load-fraction runs draw from it) rather than the arrivals to replay."""
    return workload["mode"] in ("closed", "capacity") or bool(workload["load_fraction"])


def poisson_from_catalogue(catalogue, rate: float, duration_s: float, clients: int, seed: int):
    """Poisson arrivals at ``rate`` per second for ``duration_s``, each request a row of
    ``catalogue`` (so paths and sizes keep its popularity), spread over ``clients``."""
    import numpy as np
    import pandas as pd

    from sojourn.workloads import models

    rng = np.random.default_rng(seed)
    count = max(1, int(rng.poisson(rate * duration_s)))
    rows = catalogue.iloc[rng.integers(0, len(catalogue), count)].reset_index(drop=True)
    return pd.DataFrame({"arrival_s": models.poisson_arrivals(count, rate, rng),
                         "client": rng.integers(0, clients, count).astype(np.uint32),
                         "path": rows["path"], "size": rows["size"]})


def input_key(workload: dict, link_bps: float, segment_payload: int = 1448) -> str:
    material = {k: workload[k] for k in TRACE_KEYS if k in workload}
    material["catalogue"] = is_catalogue(workload)
    material["link_bps"] = link_bps
    if workload.get("load_basis") == "wire":
        material["segment_payload"] = segment_payload
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:12]


def trace_seconds(workload: dict) -> float:
    """The load's length: ``cycles`` of the profile when set, else ``duration_s``."""
    from sojourn.workloads import shaping

    if workload["profile"] and workload.get("cycles"):
        profile = shaping.profile_by_name(workload["profile"])
        return workload["cycles"] * (profile.low_s + profile.high_s) / workload["time_compression"]
    return workload["duration_s"]


def _make_trace(workload: dict, link_bps: float, segment_payload: int = 1448):
    """The trace DataFrame and its per-period table, from the spec's workload section:
    a model trace long enough for ``duration_s`` (or of ``requests`` requests), shaped
    to the profile or constant rho (000 §2.3: inter-arrival times scaled per period)."""
    from sojourn.workloads import io as trace_io
    from sojourn.workloads import models, shaping

    if workload["trace"]:
        return trace_io.read_trace(workload["trace"]), []
    if is_catalogue(workload):
        options = {"n_objects": workload["objects"]} if workload["objects"] else {}
        count = workload["requests"] or CATALOGUE_REQUESTS
        return models.make_trace(model=workload["model"], n_requests=count, rho=workload["rho"] or 1.0,
                                 link_bps=link_bps, clients=workload["clients"], seed=workload["seed"], **options), []
    load = {"profile": workload["profile"]} if workload["profile"] else {"rho": workload["rho"]}
    mean_rho = shaping.profile_by_name(workload["profile"]).mean_rho if workload["profile"] else workload["rho"]
    mean_size = models.model_by_name(workload["model"]).mean
    options = {"n_objects": workload["objects"]} if workload["objects"] else {}
    if workload["requests"]:
        count, duration = workload["requests"], None
    else:
        duration = trace_seconds(workload)
        # Heavy-tailed sizes make a sample's bytes vary: ask for 50% more than the mean needs.
        count = int(mean_rho * link_bps / 8 * duration / mean_size * 1.5) + 100
    for _attempt in range(4):
        base = models.make_trace(model=workload["model"], n_requests=count, rho=mean_rho, link_bps=link_bps,
                                 clients=workload["clients"], seed=workload["seed"], **options)
        cost = None
        if workload.get("load_basis") == "wire":
            cost = shaping.wire_bytes(base["size"], workload["wire_overhead_bytes"], segment_payload)
        try:
            trace, periods = shaping.shape(base, link_bps=link_bps, time_compression=workload["time_compression"],
                                           seed=workload["seed"], duration_s=duration, cost=cost, **load)
            return trace, periods.to_dict("records")
        except ValueError as err:
            if "longer trace" not in str(err):
                raise
            count *= 2
    raise ValueError(f"could not generate enough requests for {duration} s of {load}")


def prepare_inputs(workload: dict, link_bps: float, inputs_root: Path, segment_payload: int = 1448) -> Inputs:
    from sojourn.workloads import docroot as docroots
    from sojourn.workloads import io as trace_io

    directory = Path(inputs_root) / input_key(workload, link_bps, segment_payload)
    done = directory / "done.json"
    if done.is_file():
        meta = json.loads(done.read_text())
        return Inputs(directory / "trace.csv", directory / "docroot", meta["periods"], meta["duration_s"], meta["requests"])
    # Made in a temporary directory renamed into place when whole: a failure leaves no entry.
    staging = directory.with_name(f".{directory.name}.tmp")
    for leftover in (directory, staging):
        if leftover.exists():
            shutil.rmtree(leftover)
    staging.mkdir(parents=True)
    try:
        trace, periods = _make_trace(workload, link_bps, segment_payload)
        if trace.empty:
            raise ValueError(f"the workload {workload} produced an empty trace")
        trace_io.write_trace(trace, staging / "trace.csv")
        # Closed and capacity modes draw from the trace's paths, each as often as it is requested.
        (staging / "paths.txt").write_text("\n".join(trace["path"]) + "\n")
        docroots.materialize(trace, staging / "docroot", seed=workload["seed"])
        # Servers whose workers drop root (apache2) must be able to read the docroot.
        for path in [staging, staging / "docroot", *[p for p in (staging / "docroot").rglob("*") if p.is_dir()]]:
            os.chmod(path, 0o755)
        meta = {"periods": periods, "duration_s": float(trace["arrival_s"].max()), "requests": int(len(trace)),
                "workload": workload, "link_bps": link_bps}
        write_json(staging / "done.json", meta)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    os.replace(staging, directory)
    return Inputs(directory / "trace.csv", directory / "docroot", periods, meta["duration_s"], meta["requests"])


def session_inputs(workload: dict, inputs_root: Path) -> Inputs:
    """Session mode replays no trace: its requests are /stage/ URLs computed by the
    server, so the docroot is an empty, world-readable directory. With a profile, the
    periods are the profile's over the run (each with its session rate, ``sessions_per_s``),
    so the analysis finds its overloads as in a shaped trace's."""
    from sojourn.workloads import shaping

    docroot = Path(inputs_root) / "sessions-docroot"
    docroot.mkdir(parents=True, exist_ok=True)
    os.chmod(docroot, 0o755)
    duration = trace_seconds(workload)
    periods = []
    if workload["profile"]:
        table = shaping.timeline(shaping.profile_by_name(workload["profile"]), duration, workload["time_compression"])
        table["sessions_per_s"] = table["target_rho"] * workload["sessions"]["rate"]
        periods = table.to_dict("records")
    return Inputs(trace=Path(), docroot=docroot, periods=periods, duration_s=float(duration), requests=0)
