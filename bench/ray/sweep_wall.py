"""Wall time of one 4-point sweep (2 variants x 2 repetitions, 10 s of load each) run
locally and with `--ray` on a two-node Ray cluster started on this machine
(ray.cluster_utils, one sojourn_testbed per node). Prints the figures docs/experiments.md
quotes; results under bench/out/ray/.

    .venv/bin/python bench/ray/sweep_wall.py
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import ray
from ray.cluster_utils import Cluster

from sojourn.runner.experiment import run_experiment
from sojourn.runner.spec import validate

OUT = Path(__file__).resolve().parents[1] / "out" / "ray"
SPEC = {"name": "ray-sweep", "repetitions": 2, "network": {"link_mbps": 10},
        "workload": {"rho": 0.7, "duration_s": 10.0, "clients": 20, "seed": 5},
        "collect": {"drain_s": 3.0},
        "variants": {"fair": {"server": {"policy": "fair"}}, "srpt": {"server": {"policy": "srpt"}}}}


def timed(label: str, **kwargs) -> float:
    shutil.rmtree(OUT / label, ignore_errors=True)
    started = time.monotonic()
    outcome = run_experiment(validate(SPEC), OUT / label, prefix="sjrw", **kwargs)
    wall = time.monotonic() - started
    assert outcome.complete, outcome.states
    return wall


def main() -> None:
    local = timed("local")
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "resources": {"sojourn_testbed": 1}})
    cluster.add_node(num_cpus=1, resources={"sojourn_testbed": 1})
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, logging_level="ERROR", log_to_driver=False)
    try:
        on_ray = timed("ray", ray_address=cluster.address)
    finally:
        ray.shutdown()
        cluster.shutdown()
    figures = {"points": 4, "load_s_per_point": SPEC["workload"]["duration_s"], "local_wall_s": round(local, 1),
               "ray_two_nodes_wall_s": round(on_ray, 1), "local_over_ray": round(local / on_ray, 2)}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "sweep_wall.json").write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
