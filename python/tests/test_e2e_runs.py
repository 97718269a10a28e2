"""End to end: `sojourn run` on the real testbed, server and load generator, for
sojourn fair and srpt (kernel bands), nginx and apache2; then interrupt and resume.
Each run is a few seconds of trace at rho 0.5 on a 10 Mbit/s uplink."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import pytest

from host_noise import HOST_NOISE_UNJUDGED
from sojourn import analysis
from sojourn.runner.experiment import run_experiment
from sojourn.runner.spec import load_spec

pytestmark = [pytest.mark.netns, pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")]

SPEC = """\
name = "{name}"
[server]
{server}
[network]
link_mbps = 10
{network}
[workload]
rho = 0.5
duration_s = {duration}
clients = 20
seed = 3
[collect]
""" + HOST_NOISE_UNJUDGED + """\
drain_s = 15
interval_s = 0.5
"""


@pytest.fixture
def results_root():
    """Results in a world-traversable directory: apache2's workers (www-data) read the docroot there."""
    root = Path(tempfile.mkdtemp(prefix="sjrn-e2e-", dir="/tmp"))
    os.chmod(root, 0o755)
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def write_spec(tmp_path: Path, name: str, server: str, network: str = "", duration: float = 4, extra: str = "") -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(SPEC.format(name=name, server=server, network=network, duration=duration) + extra)
    return path


def check_repetition(directory: Path, trace_requests: int) -> dict:
    status = json.loads((directory / "status.json").read_text())
    assert status["state"] == "complete", status
    records = analysis.read_records(directory / "records.csv")
    reqs = analysis.requests(records)  # raises unless exactly one final attempt per request
    assert len(reqs) == trace_requests
    assert (reqs["outcome"] == "ok").all(), reqs["outcome"].value_counts().to_dict()
    assert (reqs["bytes"] == reqs["expected_size"]).all()
    summary = json.loads((directory / "summary.json").read_text())
    assert summary["requests"] == trace_requests and summary["completed"] == trace_requests
    assert summary["response_mean"] == pytest.approx(reqs["response_s"].mean())
    assert 0 < summary["response_mean"] < 5
    # Offered rho 0.5 of a 10 Mbit/s link: the bodies alone use about half of it.
    assert 0.3 < summary["body_utilization"] < 0.8
    counters = pd.read_csv(directory / "counters.csv")
    assert len(counters) >= 4 and counters["uplink_tx_bytes"].iloc[-1] > 0
    versions = json.loads((directory / "versions.json").read_text())
    assert versions["kernel"] and versions["testbed"]["qdisc"]
    assert (directory / "load_summary.json").is_file()
    assert (directory / "spec.toml").read_text() == (directory.parents[1] / "spec.toml").read_text()
    return summary


SERVERS = {
    "sojourn-fair": ('kind = "sojourn"\npolicy = "fair"', ""),
    "sojourn-srpt": ('kind = "sojourn"\npolicy = "srpt"\nkernel_bands = true', 'bands = "1K,2K,5K,50K"'),
    "nginx": ('kind = "nginx"\naccess_log = true', ""),
    "apache2": ('kind = "apache2"\naccess_log = true', ""),
}


@pytest.mark.parametrize("label", list(SERVERS))
def test_run_one_server(label, tmp_path, results_root):
    server, network = SERVERS[label]
    spec = write_spec(tmp_path, label, server, network)
    experiment = load_spec(spec)
    outcome = run_experiment(experiment, results_root, prefix=f"sjrn{list(SERVERS).index(label)}")
    assert outcome.complete, outcome.reasons()
    directory = outcome.directory / "run" / "0"
    inputs = json.loads((directory / "run.json").read_text())["inputs"]
    check_repetition(directory, inputs["requests"])
    if "access_log" in server:
        lines = (directory / "access.log").read_text().splitlines()
        # One line per request of the load generator (besides the readiness probe and the status scrape).
        assert sum('"sojourn-load"' in line for line in lines) == inputs["requests"]
    # The server's own counters: Prometheus text, stub_status or mod_status.
    metrics = (directory / "server_metrics.txt").read_text()
    marker = {"nginx": "Active connections", "apache2": "Total Accesses"}.get(label, "# TYPE")
    assert marker in metrics, metrics[:300]
    if label == "sojourn-srpt":
        # Kernel bands (000 §3): responses moved through several strict-priority bands.
        bands = pd.read_json(directory / "bands.json", lines=True)
        assert (bands.dropna(subset=["band"])["sent_bytes"] > 10_000).sum() >= 3, bands


def test_interrupt_then_resume(tmp_path):
    spec = write_spec(tmp_path, "resume", 'kind = "sojourn"', duration=6,
                      extra='[variants.a]\nserver.policy = "fair"\n[variants.b]\nserver.policy = "srpt"\n')
    results = tmp_path / "results"
    command = [sys.executable, "-m", "sojourn.cli", "run", str(spec), "--results", str(results), "--prefix", "sjrn9",
               "--no-report"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        # Wait until run b is under way (its load generator writes intervals), then interrupt.
        deadline = time.monotonic() + 90
        while not (results / "resume" / "b" / "0" / "intervals.csv").is_file():
            assert process.poll() is None, process.stdout.read()
            assert time.monotonic() < deadline, "run b never started"
            time.sleep(0.2)
        time.sleep(1.0)
        process.send_signal(signal.SIGINT)
        output, _ = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 130, output
    status_a = json.loads((results / "resume" / "a" / "0" / "status.json").read_text())
    status_b = json.loads((results / "resume" / "b" / "0" / "status.json").read_text())
    assert status_a["state"] == "complete"
    assert status_b["state"] == "partial" and "interrupted" in status_b["reason"]
    # The partial result is usable: its summary counts what was recorded, interrupted requests included.
    summary_b = json.loads((results / "resume" / "b" / "0" / "summary.json").read_text())
    assert summary_b["requests"] > 0
    # No namespace of this prefix is left behind.
    assert "sjrn9" not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    a_records = (results / "resume" / "a" / "0" / "records.csv").stat().st_mtime_ns
    rerun = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert "a rep 0: complete, kept" in rerun.stdout
    # Run a was kept as it was; run b was redone and is now complete.
    assert (results / "resume" / "a" / "0" / "records.csv").stat().st_mtime_ns == a_records
    assert json.loads((results / "resume" / "b" / "0" / "status.json").read_text())["state"] == "complete"


def test_sweep_through_wan_group_and_report(tmp_path, results_root):
    """A load sweep with a WAN client group: the group's RTT reaches the connections, the
    sweep values reach the runs, and the report has the sweep figures."""
    # The handshake check below measures the group's delay as the connections saw it, to
    # +20 ms; the emulator's 1-ms release guard is test_testbed_net's, and a CI machine busy
    # with the rest of the suite has stalled it past 6 ms on three attempts, so it is not judged here.
    spec = write_spec(tmp_path, "sweep", 'kind = "sojourn"', duration=3,
                      network='[[network.groups]]\nname = "wan"\naddresses = 4\nrtt_ms = 40\n',
                      extra='fidelity.emulator_late_p99_ms = 0\n'  # still in SPEC's [collect]
                            '[sweep]\nparameter = "workload.rho"\nvalues = [0.2, 0.6]\n')
    outcome = run_experiment(load_spec(spec), results_root, prefix="sjrn8")
    assert outcome.complete, outcome.reasons()
    utilization = []
    for rho in (0.2, 0.6):
        directory = outcome.directory / f"rho={rho}" / "0"
        records = analysis.read_records(directory / "records.csv")
        fresh = records.dropna(subset=["connect_start_s", "connect_end_s"])
        handshake = (fresh["connect_end_s"] - fresh["connect_start_s"]).median()
        # The SYN/SYN-ACK round trip crosses the emulator once: 40 ms plus a little.
        assert 0.039 < handshake < 0.060, handshake
        utilization.append(json.loads((directory / "summary.json").read_text())["body_utilization"])
    assert utilization[1] > 2 * utilization[0]
    from sojourn.report.html import build_report
    text = build_report(outcome.directory).read_text()
    assert "Sweep of workload.rho" in text and "Latency profile vs load" in text
