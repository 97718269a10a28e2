"""`sojourn run SPEC --ray [ADDRESS]`: the missing repetitions of an experiment as tasks
on a Ray cluster, one testbed per node at a time.

Each point (run x repetition) is a Ray task that needs one unit of the custom resource
``sojourn_testbed`` (give every node one: ``ray start ... --resources '{"sojourn_testbed": 1}'``),
so a node runs one testbed at a time and measurements never share a machine. The task
builds the run's inputs on its node from the spec (the same seed gives the same trace and
docroot, so nothing large is shipped), runs the repetition with its own namespace prefix
under a temporary directory, and returns the repetition's files as a tar archive; the
driver unpacks them where a local run writes them (paths inside rewritten to the driver's
results directory, whose inputs it also makes), adds ``ray.json`` (node, attempt, wall
time) and records the state. A task that fails is retried once by Ray (``max_retries``); a
point that still fails is marked ``partial`` with the error and named on stderr, never
dropped, and the run exits non-zero as for any incomplete repetition. Resume works as for
local runs: complete repetitions are skipped before anything is submitted.
"""

from __future__ import annotations

import io
import json
import shutil
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Callable

from sojourn.runner import layout
from sojourn.runner.points import Point, point_inputs, run_point, start_point, task_prefix

RESOURCE = "sojourn_testbed"
# Text files of a repetition that may name its node-local directory.
TEXT_SUFFIXES = (".json", ".toml", ".log", ".txt")


def _run_point(run, rep: int, run_index: int, name: str, spec_text: str, prefix: str) -> dict:
    """On a cluster node: one repetition in a temporary results tree, returned packed."""
    import ray

    started = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix="sojourn-ray-"))
    try:
        # The local path's own: an invalid repetition is redone on the node at once.
        point = Point(0, run_index, run, rep, layout.rep_dir(root, name, run.name, rep))
        state = run_point(point, layout.experiment_dir(root, name), spec_text, prefix)
        archive = io.BytesIO()
        with tarfile.open(fileobj=archive, mode="w:gz") as tar:
            tar.add(point.directory, arcname=".")
        context = ray.get_runtime_context()
        return {"state": state, "archive": archive.getvalue(), "root": str(root), "node_id": context.get_node_id(),
                "node_ip": ray.util.get_node_ip_address(), "prefix": prefix, "wall_s": time.monotonic() - started}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _unpack(result: dict, point, results_root: Path) -> None:
    """The returned repetition into ``point.directory``, node paths made local."""
    if point.directory.exists():
        shutil.rmtree(point.directory)
    point.directory.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(result["archive"]), mode="r:gz") as tar:
        tar.extractall(point.directory, filter="data")
    for path in point.directory.rglob("*"):
        if path.is_file() and path.suffix in TEXT_SUFFIXES:
            text = path.read_text(errors="surrogateescape")
            if result["root"] in text:
                path.write_text(text.replace(result["root"], str(results_root)), errors="surrogateescape")
    layout.write_json(point.directory / "ray.json", {k: result[k] for k in ("node_id", "node_ip", "prefix", "wall_s")})


def run_points(points: list[Point], experiment, directory: Path, spec_text: str, prefix: str, address: str, outcome,
               on_event: Callable[[str, dict], None]) -> None:
    """Runs ``points`` on the Ray cluster at ``address`` ("auto", "local" = start one here,
    or host:port) and records each one's state in ``outcome``."""
    try:
        import ray
    except ImportError as err:
        raise RuntimeError("sojourn run --ray needs Ray: pip install 'sojourn[ray]' (scripts/setup-venv.sh installs "
                           "it)") from err
    if not points:
        return
    started_here = not ray.is_initialized()
    if started_here:
        ray.init(address=None if address == "local" else address, resources={RESOURCE: 1} if address == "local" else None,
                 logging_level="ERROR", log_to_driver=False)
    try:
        if not ray.cluster_resources().get(RESOURCE):
            raise RuntimeError(f"the Ray cluster at {address} has no node with the resource {RESOURCE!r}; start each "
                               f"node with --resources '{{\"{RESOURCE}\": 1}}' (one testbed per node)")
        results_root = directory.parent
        task = ray.remote(_run_point).options(resources={RESOURCE: 1}, num_cpus=0, max_retries=1)
        pending = {}
        for point in points:
            start_point(point, spec_text, on_event)
            point_inputs(point.run, directory)  # the driver's copy, where run.json will point
            layout.mark(point.directory, "running", reason=f"submitted to Ray ({address})")
            ref = task.remote(point.run, point.rep, point.run_index, experiment.name, spec_text,
                              task_prefix(prefix, point.index))
            pending[ref] = point
            on_event("repetition", {"run": point.run.name, "rep": point.rep, "index": point.index,
                                    "total": len(experiment.runs) * experiment.repetitions, "skipped": False})
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            point = pending.pop(done[0])
            key = (point.run.name, point.rep)
            try:
                result = ray.get(done[0])
            except Exception as err:  # noqa: BLE001 - a task error names the point, never lost
                reason = f"Ray task failed: {type(err).__name__}: {str(err).strip().splitlines()[-1] if str(err) else ''}"
                layout.mark(point.directory, "partial", reason)
                print(f"sojourn run --ray: {point.run.name} repetition {point.rep}: {reason}", file=sys.stderr)
                outcome.states[key] = "partial"
                on_event("done", {"run": point.run.name, "rep": point.rep, "state": "partial", "wall_s": 0.0})
                continue
            _unpack(result, point, results_root)
            outcome.states[key] = result["state"]
            on_event("done", {"run": point.run.name, "rep": point.rep, "state": result["state"],
                              "wall_s": result["wall_s"], "node": result["node_ip"]})
    finally:
        if started_here:
            ray.shutdown()


def nodes_of(directory: Path) -> dict[str, str]:
    """run/rep -> node id of every repetition that ran on Ray (its ray.json)."""
    return {f"{path.parent.parent.name}/{path.parent.name}": json.loads(path.read_text())["node_id"]
            for path in sorted(directory.glob("*/*/ray.json"))}
