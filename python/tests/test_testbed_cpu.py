"""A CPU quota on the server under test (server.cpu_quota, sojourn.testbed.cpu): the server
alone is throttled, every summary states the quota and how often it held the server, and
the cgroup is gone after the run."""

from __future__ import annotations

import json
import os

import pytest

from host_noise import HOST_NOISE_UNJUDGED
from sojourn.runner.experiment import run_experiment
from sojourn.runner.spec import load_spec
from sojourn.testbed import cpu

pytestmark = [pytest.mark.netns, pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces and cgroups")]

SPEC = """\
name = "quota"
[server]
kind = "sojourn"
[network]
link_mbps = 1000
[workload]
mode = "closed"
users = 40
duration_s = 4
model = "specweb99"
seed = 2
[collect]
""" + HOST_NOISE_UNJUDGED + """\
drain_s = 5
interval_s = 0.5
[variants.free]
[variants.quota]
server.cpu_quota = 0.05
[variants.quota-20ms]
server.cpu_quota = 0.05
server.cpu_period_ms = 20
"""


def test_a_quota_throttles_the_server_and_every_summary_says_so(tmp_path):
    path = tmp_path / "quota.toml"
    path.write_text(SPEC)
    outcome = run_experiment(load_spec(path), tmp_path / "results", prefix="sjcq")
    assert outcome.complete, outcome.reasons()
    summaries = {run: json.loads((tmp_path / "results" / "quota" / run / "0" / "summary.json").read_text())
                 for run in ("free", "quota", "quota-20ms")}
    held = summaries["quota"]["server_cpu"]
    assert held["cpus"] == 0.05 and held["throttled_periods"] > 0 and held["throttled_s"] > 0
    assert "server_cpu" not in summaries["free"]
    # A twentieth of a CPU serves far fewer requests than the free server does.
    assert summaries["quota"]["throughput_rps"] < 0.5 * summaries["free"]["throughput_rps"]
    versions = json.loads((tmp_path / "results" / "quota" / "quota" / "0" / "versions.json").read_text())
    assert versions["testbed"]["server_cpu"]["cpus"] == 0.05
    # The same share over a fifth of the period: five times the periods over a like run.
    short = summaries["quota-20ms"]["server_cpu"]
    assert short["cpus"] == 0.05 and short["throttled_periods"] > 3 * held["throttled_periods"]
    short_versions = json.loads((tmp_path / "results" / "quota" / "quota-20ms" / "0" / "versions.json").read_text())
    assert (short_versions["testbed"]["server_cpu"]["period_us"], versions["testbed"]["server_cpu"]["period_us"]) \
        == (20_000, 100_000)
    root, _ = cpu.controller_root()
    assert not (root / cpu.CGROUP_NAME.format(prefix="sjcq")).exists()


def test_an_impossible_quota_is_refused_naming_it():
    with pytest.raises(cpu.CpuQuotaError, match="quota 0.001"):
        cpu.ServerCpu("sjcz", 0.001)
    # cpu.max takes at least 1 ms of CPU per period: 0.05 of 10 ms is half of that.
    with pytest.raises(cpu.CpuQuotaError, match=r"quota 0.05 over a 10 ms period.*here 0.5 ms"):
        cpu.ServerCpu("sjcz", 0.05, period_ms=10)


def cpus_allowed(pid: int | str) -> str:
    status = dict(line.split(":\t", 1) for line in open(f"/proc/{pid}/status").read().splitlines())
    return status["Cpus_allowed_list"]


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs a CPU to keep the server on and others")
def test_a_cpuset_keeps_the_server_on_its_cores_and_goes_with_the_testbed():
    from sojourn.testbed import Testbed, TestbedConfig

    last = str(max(os.sched_getaffinity(0)))
    with Testbed(TestbedConfig(prefix="sjcs", server_cpuset=last)) as tb:
        server = tb.popen(tb.server_ns, ["sleep", "30"], preexec_fn=tb.server_preexec())
        assert cpus_allowed(server.pid) == last
        other = tb.popen(tb.server_ns, ["sleep", "30"])  # the server side's other processes: any CPU
        assert cpus_allowed(other.pid) == cpus_allowed("self")
        path = tb.describe()["server_cpuset"]["cgroup"]
    assert not os.path.exists(path)


def test_an_impossible_cpuset_is_refused_naming_it():
    beyond = max(os.sched_getaffinity(0)) + 1
    with pytest.raises(cpu.CpuQuotaError, match=rf"server cpuset: CPU list '{beyond}'.*offers CPUs"):
        cpu.ServerCpuset("sjcz", str(beyond))
