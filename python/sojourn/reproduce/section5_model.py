"""003 §5 in virtual time: the stage pool's own dispatcher without the server.

    python -m sojourn.reproduce.section5_model --out DIR [--quick]

For each §5 spec in SPECS, every DWFS run of it (one per user count) is replayed by
``sojourn-engine stages`` (crates/stages/src/study.rs): one CPU, the spec's stage costs (exact,
as the stage worker burns them), its class timeouts (user u in class u mod 3, as the testbed
binds user u to class address u mod 3), Fig. 5's transitions with its exit probability,
its users thinking an exponential ``think_s``, each session aborted by a request that misses its
bound (or, as the testbed's clients, only by one slower than their delay bound), through the
same ``Dispatcher`` the server runs (crates/sched/src/dispatch.rs), once in each way of sharing
the CPU (SERVICES; one of them adds to each request the CPU the server's front end spent on
one, measured where it ran on a core of its own, FRONT_END_RUNS, once that is published) and
each of DWFS's orders within a stage (STAGE_ORDERS: earliest deadline first, the server's
default, and the other readings of 003 §5.2's "the shorter timeout ..., the higher is its
priority"; the server takes any of them as ``server.stages.stage_order``). What is
left out is everything else of the testbed: HTTP, sockets, the front end's threads, the clocks
of a loaded two-core machine. Where the model's drop rates agree with the testbed's, the policy
alone sets them; where they part, the server does.

Writes ``model.csv``: one row per (experiment, users, service, stage order, seed, class) with the requests completed
within their bound, those that timed out (dropped early, refused by a waiting room, expired
or late), those of them late (finished past the bound), and the summed response time of those
completed, each seed run for the spec's duration; ``summary.json``: per experiment and run, the
seeds and each class's drop rate over them (the dispatcher's drops: timed out, not late), in
the order the spec's server ran (``drop_rate``) and in each order (``drop_rate_by_stage_order``),
each class's share finished late (``late_rate_by_stage_order``) and mean response
(``response_mean_s_by_stage_order``) in each order, one request at a time as the server's worker
serves; and the same three per way of sharing the CPU (``by_service``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pandas as pd

from sojourn.engine import engine_path
from sojourn.reproduce import REPO, command_args
from sojourn.runner.spec import STAGE_ORDERS

# The §5 specs whose stage costs are read as CPU demand at k = 1, 10, 20, 40 with think time,
# and at k = 20 without (sojourn.reproduce.paper003.DEMAND_RUNS; not its -continue, whose
# sessions go on after a failed request, which the model's sessions do not).
SPECS = {"section5": "experiments/003/section5.toml", "section5-demand": "experiments/003/section5-demand.toml",
         "section5-demand20": "experiments/003/section5-demand20.toml",
         "section5-demand40": "experiments/003/section5-demand40.toml",
         "section5-demand20-nothink": "experiments/003/section5-demand20-nothink.toml"}
SEEDS = {"full": range(1, 11), "quick": range(1, 4)}

class Service(NamedTuple):
    """How the model serves the requests DWFS dispatched: ``threads`` at once sharing the CPU,
    refilled only when all are done (``ready_queue``) or each when free; ``patient``: a session
    goes on after a late response within the client's delay bound, as the testbed's clients
    take one (``sojourn-engine stages --session-bound``), instead of ending at the missed bound;
    ``front_end``: each request costs the CPU the server's front end spent on one besides its
    stage's cost (:func:`front_end_cost_s`)."""
    threads: int
    ready_queue: bool = False
    patient: bool = False
    front_end: bool = False


# The ways of serving, by name. "one": one at a time, as the server's single stage worker
# serves; "threads-4": four threads each taking the next request when free, as four stage workers
# on one CPU would, and "threads-4-patient" with the testbed's clients; "ready-queue-N": 003
# §5.1's Apache, whose DWFS module refilled a ready queue "when the ready queue is empty" and
# whose worker threads served it sharing the CPU, its size not given (the weights were "the
# number of requests from the queues to be dispatched to the ready queue").
SERVICES = {"one": Service(1), "threads-4": Service(4), "threads-4-patient": Service(4, patient=True),
            "threads-4-patient-front-end": Service(4, patient=True, front_end=True),
            "ready-queue-4": Service(4, True), "ready-queue-8": Service(8, True), "ready-queue-16": Service(16, True)}

# Where the front end's cost is measured: four stage workers on a core of their own, nothing
# throttling them, the whole server on that core (its front end too), at 60 clients.
FRONT_END_RUNS = REPO / "docs" / "reproduction" / "003" / "section5-demand-workers-onecore"


def front_end_cost_s(published: Path) -> float | None:
    """The server's CPU per request outside its stages' work (accepting, parsing, dispatching,
    writing), the mean over the published repetitions of (process CPU, counters.csv server_cpu
    over the run, less the stages' CPU, summary.json's session anatomy cpu_s) / requests; None
    while no repetition has both."""
    costs = []
    for path in sorted(Path(published).glob("*/*/summary.json")):
        sessions = json.loads(path.read_text()).get("sessions") or {}
        stages = [part.get("cpu_s") for part in sessions.get("anatomy") or []]
        requests = (sessions.get("overall") or {}).get("requests")
        counters = path.parent / "counters.csv"
        if not stages or None in stages or not requests or not counters.is_file():
            continue
        frame = pd.read_csv(counters, usecols=["t_s", "server_cpu"])
        process = float((frame["server_cpu"] * frame["t_s"].diff().fillna(0)).sum())
        costs.append((process - sum(stages)) / requests)
    return sum(costs) / len(costs) if costs else None


def stages_argv(config: dict, seed: int, stage_order: str = STAGE_ORDERS[0], service: str = "one",
                front_end_s: float | None = None) -> list[str]:
    """``sojourn-engine stages`` options for one run's resolved config (seconds throughout);
    a ``front_end`` service adds ``front_end_s`` to every stage's cost."""
    threads, ready_queue, patient, front_end = SERVICES[service]
    if front_end and front_end_s is None:
        raise ValueError(f"service {service} needs the front end's cost per request (front_end_s)")
    extra = front_end_s if front_end else 0.0
    stages, sessions = config["server"]["stages"], config["workload"]["sessions"]
    costs = ",".join(str(stage["processing_ms"] / 1000 + extra) for stage in stages["stage"])
    timeouts = ",".join(str(c["timeout_ms"] / 1000) for c in stages["class"])
    return [str(engine_path()), "stages", "--json", "--policy", stages["policy"], "--deterministic-service",
            "--service-times", costs, "--timeout", timeouts, "--clients", str(sessions["users"]),
            "--session-length", str(1 / sessions["exit"]), "--think-time", str(sessions["think_s"]),
            "--exponential-think", "--duration", str(config["workload"]["duration_s"]), "--seed", str(seed),
            "--stage-order", stage_order, "--threads", str(threads)] + (["--ready-queue"] if ready_queue else []) + (
        ["--session-bound", str(sessions["delay_bound_s"])] if patient else [])


def model_rows(experiment: str, spec: Path, seeds, front_end_s: float | None = None) -> list[dict]:
    """Every replay of ``spec``'s DWFS runs; the ``front_end`` services only with
    ``front_end_s``."""
    from sojourn.runner.spec import load_spec

    services = [name for name, service in SERVICES.items() if front_end_s is not None or not service.front_end]
    rows = []
    for run in load_spec(spec).runs:
        config = run.config
        if config["server"]["stages"]["policy"] != "dwfs":
            continue
        names = [c["name"] for c in config["server"]["stages"]["class"]]
        for service in services:
            for stage_order in STAGE_ORDERS:
                for seed in seeds:
                    rows += _seed_rows(experiment, run.name, config, names, service, stage_order, seed, front_end_s)
    return rows


def _seed_rows(experiment: str, run: str, config: dict, names: list[str], service: str, stage_order: str,
               seed: int, front_end_s: float | None = None) -> list[dict]:
    """One replay's rows, a row per class."""
    argv = stages_argv(config, seed, stage_order, service, front_end_s)
    result = json.loads(subprocess.run(argv, capture_output=True, text=True, check=True).stdout)
    return [{"experiment": experiment, "run": run, "users": config["workload"]["sessions"]["users"],
             "service": service, "front_end_s": front_end_s if SERVICES[service].front_end else 0.0,
             "stage_order": stage_order,
             "server_order": config["server"]["stages"].get("stage_order", STAGE_ORDERS[0]),
             "seed": seed, "class": name, "completed": completed, "timed_out": timed_out, "late": late,
             "drop_rate": (timed_out - late) / max(completed + timed_out, 1), "response_sum_s": response_sum}
            for name, completed, timed_out, late, response_sum in zip(
                names, result["completed_by_class"], result["timed_out_by_class"], result["late_by_class"],
                result["response_sum_by_class"])]


def _by_order(rows: pd.DataFrame) -> dict[str, dict]:
    """Each class's drop rate (timed out, not late), late share and mean response (of the
    requests completed in time) over the seeds, per stage order, by summary key."""
    found = {"drop_rate_by_stage_order": {}, "late_rate_by_stage_order": {}, "response_mean_s_by_stage_order": {}}
    for stage_order, part in rows.groupby("stage_order", sort=False):
        totals = part.groupby("class", sort=False)[["completed", "timed_out", "late", "response_sum_s"]].sum()
        requests = (totals["completed"] + totals["timed_out"]).clip(lower=1)
        found["drop_rate_by_stage_order"][stage_order] = ((totals["timed_out"] - totals["late"]) / requests).to_dict()
        found["late_rate_by_stage_order"][stage_order] = (totals["late"] / requests).to_dict()
        found["response_mean_s_by_stage_order"][stage_order] = {
            name: float(t["response_sum_s"] / t["completed"]) if t["completed"] else None for name, t in totals.iterrows()}
    return found


def summarize(model: pd.DataFrame) -> dict:
    """Per experiment and run: the seeds, and each class's drop rate, late share and mean
    response over them, one request at a time (the server's way) in the server's stage order
    and in each, and per way of sharing the CPU (``by_service``)."""
    summary = {}
    for (experiment, run), group in model.groupby(["experiment", "run"], sort=False):
        services = {service: {**_by_order(rows), "front_end_s": float(rows["front_end_s"].iloc[0])}
                    for service, rows in group.groupby("service", sort=False)}
        summary[f"{experiment}/{run}"] = {
            "seeds": int(group["seed"].nunique()),
            "drop_rate": services["one"]["drop_rate_by_stage_order"][group["server_order"].iloc[0]],
            **services["one"], "by_service": services}
    return summary


def main(argv: list[str] | None = None) -> int:
    args = command_args(__doc__, "model.csv, summary.json", "three seeds instead of ten", argv)
    seeds = SEEDS["quick" if args.quick else "full"]
    front_end_s = front_end_cost_s(FRONT_END_RUNS)
    rows = [row for experiment, spec in SPECS.items()
            for row in model_rows(experiment, REPO / spec, seeds, front_end_s)]
    args.out.mkdir(parents=True, exist_ok=True)
    model = pd.DataFrame(rows)
    model.to_csv(args.out / "model.csv", index=False)
    (args.out / "summary.json").write_text(json.dumps(summarize(model), indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
