"""`sojourn run --ray` on a Ray cluster of two nodes started on this machine
(ray.cluster_utils), each with one `sojourn_testbed`: a tiny spec's four points spread
over both nodes, land where a local run puts them, and a failing point is reported by
name and marked partial, never lost."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from host_noise import HOST_NOISE_BOUNDS
from sojourn.runner.experiment import run_experiment
from sojourn.runner.spec import validate
from sojourn.testbed import sysnet

pytestmark = [pytest.mark.netns, pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")]

SPEC = {"name": "ray-tiny", "repetitions": 2,
        "network": {"link_mbps": 10},
        "workload": {"rho": 0.3, "duration_s": 2.0, "clients": 4, "seed": 3},
        # The host's noise is not what this test checks (test_runner_fidelity tests it).
        "collect": {"drain_s": 2.0, "fidelity": HOST_NOISE_BOUNDS},
        "variants": {"fair": {"server": {"policy": "fair"}}, "srpt": {"server": {"policy": "srpt"}}}}


@pytest.fixture(scope="module")
def cluster():
    ray = pytest.importorskip("ray", reason="Ray is not installed (scripts/setup-venv.sh installs it)")
    from ray.cluster_utils import Cluster

    try:
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "resources": {"sojourn_testbed": 1}})
        cluster.add_node(num_cpus=1, resources={"sojourn_testbed": 1})
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, logging_level="ERROR", log_to_driver=False)
    except Exception as err:  # noqa: BLE001 - the reason is the skip message
        pytest.skip(f"a local Ray cluster could not start: {type(err).__name__}: {err}")
    try:
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()
        for prefix in ("sjray",):
            for ns in sysnet.namespaces_with_prefix(prefix):
                sysnet.remove_prefix(ns.rsplit("-", 1)[0])


def files_of(rep: Path) -> set[str]:
    """The repetition's files, less the record of attempts the fidelity guard redid
    (attempts.json, attempt-N-counters.csv): whether this machine disturbed one is not what
    these tests compare."""
    return {str(p.relative_to(rep)) for p in rep.rglob("*")
            if p.is_file() and p.name != "attempts.json" and not p.name.startswith("attempt-")}


def test_points_spread_over_both_nodes_and_land_as_a_local_run(cluster, tmp_path):
    import ray

    experiment = validate(SPEC)
    outcome = run_experiment(experiment, tmp_path / "ray", prefix="sjray", ray_address=cluster.address)
    assert outcome.complete and len(outcome.states) == 4, (outcome.states, outcome.reasons())
    nodes = {json.loads(p.read_text())["node_id"] for p in (tmp_path / "ray" / "ray-tiny").glob("*/*/ray.json")}
    assert nodes == {n["NodeID"] for n in ray.nodes() if n["Alive"]} and len(nodes) == 2
    # A local run of the same spec writes the same files (ray.json aside), paths pointing here.
    local = run_experiment(validate({**SPEC, "repetitions": 1}), tmp_path / "local", prefix="sjray")
    assert local.complete
    for variant in ("fair", "srpt"):
        remote_rep = tmp_path / "ray" / "ray-tiny" / variant / "0"
        assert files_of(remote_rep) - {"ray.json"} == files_of(tmp_path / "local" / "ray-tiny" / variant / "0")
        run = json.loads((remote_rep / "run.json").read_text())
        assert Path(run["inputs"]["trace"]).is_file() and str(tmp_path / "ray") in run["inputs"]["trace"]
        assert json.loads((remote_rep / "summary.json").read_text())["requests"] > 0
    # Resume: nothing left to do, nothing submitted.
    again = run_experiment(experiment, tmp_path / "ray", prefix="sjray", ray_address=cluster.address)
    assert again.complete and not list((tmp_path / "ray" / "ray-tiny").glob("*/*/.tmp*"))


def test_a_failing_point_is_named_and_partial(cluster, tmp_path, capsys):
    spec = {**SPEC, "repetitions": 1, "server": {"kind": "command", "command": ["/nonexistent/server"]},
            "variants": {}}
    experiment = validate(spec)
    outcome = run_experiment(experiment, tmp_path, prefix="sjray", ray_address=cluster.address)
    assert outcome.states == {("run", 0): "partial"}
    status = json.loads((tmp_path / "ray-tiny" / "run" / "0" / "status.json").read_text())
    assert status["state"] == "partial" and "Ray task failed" in status["reason"]
    assert "sojourn run --ray: run repetition 0: Ray task failed" in capsys.readouterr().err
