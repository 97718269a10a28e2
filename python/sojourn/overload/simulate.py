"""The simulator beside each run: ``sojourn-engine sim`` (crates/sim, the server's own
scheduler and admission code, without TCP, packets or a SYN queue) replays the run's trace
with the run's write quantum, write concurrency, NOTSENT_LOWAT (passed by two segments, as
Linux does: :func:`kernel_overshoot`) and admission policy, and the
same numbers as :mod:`sojourn.overload.derive` are taken from its records, each request ended
as the testbed's run would have ended it (:func:`as_the_testbed_ends`). Where the testbed
and the model agree (a swing in refusals, a share refused), the policy alone explains it;
where they part, something the model has not does, and the doc measures one such part: the
testbed's time spent opening connections (handshake %), which the model's requests, arriving
connected, do not spend.

The simulated link carries bodies only, so it runs at the body rate the run offered divided by
its load: with load counted on the wire (000 §2.3, ``workload.load_basis = "wire"``) that is
what the bodies get of the uplink, e.g. 8.75 Mbit/s of the 10. The kernel's priority bands
(SRPT's ``kernel_bands``) are not simulated; with a few write slots the application's order
decides what reaches them (experiments/overload-control/persistent.toml). The stage pool
(003's DWFS) has no model here: such runs get none.
"""

from __future__ import annotations

import json
import math
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from sojourn.analysis.records import read_records, requests as request_table
from sojourn.analysis.results import open_repetition
from sojourn.engine import engine_path
from sojourn.overload.derive import _finite, censor_horizon, request_numbers, scheduler, stop_s
from sojourn.runner.plan import admission_arg
from sojourn.theory.bounds import segment_payload


def body_rate_bps(periods: list[dict]) -> float:
    """Body bits per second a load of 1 is, from the trace's periods (their bytes over their
    length and achieved load; the median over the periods that carry load)."""
    rates = [float(p["bytes"]) * 8 / (float(p["end_s"]) - float(p["start_s"])) / float(p["achieved_rho"])
             for p in periods if float(p.get("achieved_rho") or 0) > 0 and float(p["end_s"]) > float(p["start_s"])]
    if not rates:
        raise ValueError("the trace's periods carry no load: no body rate for the simulated link")
    return float(np.median(rates))


def kernel_overshoot(network: dict) -> int:
    """Bytes a write passes TCP_NOTSENT_LOWAT by on the testbed's kernel: ``tcp_sendmsg``
    checks the mark only before it opens a new segment buffer, which it then fills, at least
    ``tcp_min_tso_segs`` (2) segments of the MSS (:func:`segment_payload`). The MTU is the client groups' (the smallest, where they differ;
    1500 without groups). Measured: with it the model's write-slot holds are the testbed's
    (docs/simulator.md, "--kernel-overshoot")."""
    mtu = min((group["mtu"] for group in network.get("groups") or []), default=1500)
    return 2 * segment_payload(bool(network["tcp"]["timestamps"]), mtu)


def sim_args(config: dict, periods: list[dict]) -> list[str] | None:
    """``sojourn-engine sim`` options for a run's config (the trace apart); None when the
    run's server has no model (a stage pool)."""
    server = config["server"]
    if server.get("stages"):
        return None
    args = ["--link", f"{body_rate_bps(periods):.0f}", "--policy", server["policy"], "--quantum", server["quantum"]]
    if server.get("write_concurrency"):
        args += ["--write-concurrency", str(server["write_concurrency"])]
    if server.get("write_concurrency_from"):
        args += ["--write-concurrency-from", server["write_concurrency_from"]]
    if server.get("notsent_lowat"):
        args += ["--kernel-buffer", server["notsent_lowat"], "--kernel-overshoot", str(kernel_overshoot(config["network"]))]
    admission = admission_arg(server, config["network"])
    if admission:
        args += ["--admission", admission]
    return args


def as_the_testbed_ends(requests: pd.DataFrame, timeout_s: float, drain_s: float) -> pd.DataFrame:
    """The model's requests ended as the testbed's run would have ended them: a response not
    complete ``timeout_s`` after it was scheduled as a ``timeout``, and one complete only after
    the run stopped, ``drain_s`` after its last request, as ``interrupted`` (000 §4 counts only
    the requests that finished before the final one arrived). Otherwise the model, which runs
    every request out, would count under SRPT the starved large responses the testbed leaves
    outstanding: in the persistent set's SRPT at rho 1.2 (repetition 0), 247 of 152,215 run
    out after the end, and the model's mean is 0.684 s with them, 0.227 s without, against
    the testbed's 0.148 s."""
    end = stop_s(requests, drain_s)
    timed_out = requests["completed"] & (requests["response_s"] > timeout_s)
    cut = requests["completed"] & ~timed_out & (requests["last_byte_s"] > end)
    out = requests.copy()
    out.loc[timed_out, "outcome"] = "timeout"
    out.loc[cut, "outcome"] = "interrupted"
    late = timed_out | cut
    out.loc[late, "completed"] = False
    out.loc[late, ["response_s", "last_byte_s"]] = np.nan
    return out


def first_write_wait_mean(requests: pd.DataFrame, drain_s: float) -> float:
    """The model's counterpart of the server's ``sojourn_first_write_wait_seconds``: the mean
    wait from arrival to the first byte of the requests not refused whose first byte was
    written before the run would have stopped (``drain_s`` after its last request), complete
    or not; in the model a first byte arrives as it is written."""
    end = stop_s(requests, drain_s)
    written = (requests["outcome"] != "refused") & (requests["first_byte_s"] <= end)
    return float((requests.loc[written, "first_byte_s"] - requests.loc[written, "sent_s"]).mean())


def _seconds_until(per_second: list[float], end_s: float) -> float:
    """The sum of a per-second series up to ``end_s``, the second it falls in by its share."""
    whole = int(end_s)
    total = float(sum(per_second[:whole]))
    if whole < len(per_second):
        total += per_second[whole] * (end_s - whole)
    return total


def slot_measures(slots: dict | None, end_s: float) -> dict:
    """The model's counterparts of the testbed's write-slot measures up to ``end_s``, from the
    simulator's ``slots_per_second``: ``slots_full_share``, the share of the run with a
    response ready and every write slot held, and ``write_blocked_mean``, the mean time a
    blocked write held its slot (of those unblocked by then); NaN without a write-slot limit."""
    if slots is None or end_s <= 0:
        return {"slots_full_share": math.nan, "write_blocked_mean": math.nan}
    unblocked = _seconds_until(slots["unblocked"], end_s)
    return {"slots_full_share": _seconds_until(slots["full_s"], end_s) / end_s,
            "write_blocked_mean": _seconds_until(slots["blocked_s"], end_s) / unblocked if unblocked else math.nan}


def simulate(directory: str | Path) -> dict | None:
    """The doc's numbers for the simulator replaying one repetition's trace with its config;
    None for a run without a model."""
    rep = open_repetition(directory)
    args = sim_args(rep.config, rep.periods)
    if args is None:
        return None
    trace = Path(rep.json("run.json")["inputs"]["trace"])
    with tempfile.TemporaryDirectory(prefix="sojourn-sim-") as out:
        subprocess.run([str(engine_path()), "sim", "--trace", str(trace), *args, "--size-bins", "0", "--out", out],
                       check=True, capture_output=True, text=True)
        requests = request_table(read_records(Path(out) / "records.csv"))
        summary = json.loads((Path(out) / "summary.json").read_text())
    config = rep.config
    written = first_write_wait_mean(requests, config["collect"]["drain_s"])
    slots = slot_measures(summary.get("slots_per_second"), stop_s(requests, config["collect"]["drain_s"]))
    requests = as_the_testbed_ends(requests, config["workload"]["timeout_s"], config["collect"]["drain_s"])
    numbers = request_numbers(requests, rep.periods, censor_horizon(config))
    out = {"run": rep.run, "sweep_value": rep.sweep_value, "admission": config["server"].get("admission", ""),
           "scheduler": scheduler(config["server"]), "sim_args": args, **numbers, "first_write_wait_mean": written, **slots}
    return {key: _finite(value) for key, value in out.items()}
