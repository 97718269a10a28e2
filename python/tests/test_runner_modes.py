"""`sojourn run` in closed and capacity modes (002 §3.3, §4.4; 004 §4.2), end to end in the
testbed: user equivalents with one request outstanding each, paths drawn as often as the
catalogue requests them, and a capacity found on a server whose limit is known (the
10 Mbit/s uplink carrying 100 KB responses)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from host_noise import HOST_NOISE_UNJUDGED
from sojourn import analysis
from sojourn.analysis.results import server_metric_totals
from sojourn.runner.experiment import run_experiment
from sojourn.runner.inputs import set_page_cache
from sojourn.runner.spec import SpecError, load_spec, validate

SIZE = 100_000
# Body bytes per second of a 10 Mbit/s HTB link: full 1448-byte segments in 1514-byte frames.
LINK_BODY_BPS = 10e6 * 1448 / 1514


def write_spec(tmp_path: Path, name: str, workload: str) -> Path:
    # Two objects, /a requested three times as often as /b: closed users must follow that.
    (tmp_path / "trace.csv").write_text("arrival_s,client,path,size\n"
                                        + "".join(f"{i},0,{'/b' if i % 4 == 3 else '/a'},{SIZE}\n" for i in range(40)))
    spec = tmp_path / f"{name}.toml"
    spec.write_text(f'name = "{name}"\n[network]\nlink_mbps = 10\n[workload]\ntrace = "trace.csv"\nclients = 8\n'
                    f'{workload}\n[collect]\ndrain_s = 5\n' + HOST_NOISE_UNJUDGED)
    return spec


def test_modes_are_validated():
    base = {"name": "m", "workload": {"mode": "capacity", "levels": [1, 4]}}
    assert validate(base).runs[0].config["workload"]["levels"] == [1, 4]
    with pytest.raises(SpecError, match=r"server\.cpu_period_ms = 10\.0 is the period of server\.cpu_quota"):
        validate({"name": "m", "server": {"cpu_period_ms": 10.0}})
    for workload, message in (({"mode": "capacity"}, r"capacity mode needs a list of user counts"),
                              ({"mode": "capacity", "levels": [0]}, r"workload\.levels = \[0\]"),
                              ({"mode": "capacity", "levels": [2], "warmup_s": 10.0}, r"warmup_s = 10\.0 must be below"),
                              ({"mode": "closed", "profile": "W1"}, r"workload\.profile shapes open-loop arrivals"),
                              ({"mode": "capacity", "levels": [2], "start_spread_s": 3.0},
                               r"start_spread_s = 3\.0 must be at most workload\.warmup_s = 2\.0"),
                              ({"mode": "closed", "duration_s": 5.0, "start_spread_s": 5.0},
                               r"start_spread_s = 5\.0 must be below workload\.duration_s"),
                              ({"rho": 0.5, "start_spread_s": 1.0}, r"start_spread_s staggers closed users"),
                              ({"rho": 0.5, "levels": [2]}, r"workload\.levels is for workload\.mode = 'capacity'"),
                              ({"load_fraction": 0.5, "levels": [2], "levels_until_fall": 1},
                               r"workload\.levels_until_fall is for workload\.mode = 'capacity'")):
        with pytest.raises(SpecError, match=message):
            validate({"name": "m", "workload": workload})




@pytest.mark.netns
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")
def test_closed_users_keep_one_request_outstanding_and_follow_popularity(tmp_path):
    spec = write_spec(tmp_path, "closed", 'mode = "closed"\nusers = 4\nduration_s = 6.0\npersistent = 5')
    outcome = run_experiment(load_spec(spec), tmp_path / "results", prefix="sjmc")
    assert outcome.complete, outcome.reasons()
    rep = tmp_path / "results" / "closed" / "run" / "0"
    records = analysis.read_records(rep / "records.csv")
    # Never more than 4 requests outstanding: at any request's dispatch, at most 3 others were in flight.
    starts, ends = records["dispatch_s"].to_numpy(), records["last_byte_s"].to_numpy()
    assert max(((starts <= t) & (ends > t)).sum() for t in starts) <= 4
    assert records["client"].nunique() == 4
    counts = Counter(records["path"])
    assert counts["/a"] > 1.5 * counts["/b"] > 0  # drawn 3:1 as in the catalogue
    # Persistent connections: 5 requests per connection (000 Table 2 (E), 001 §3).
    assert records.groupby("conn_id").size().max() == 5
    summary = json.loads((rep / "summary.json").read_text())
    # Every request completed but the one each user had outstanding when the run ended.
    assert summary["completed"] >= summary["requests"] - 4
    assert summary["outcomes"]["interrupted"] <= 4


@pytest.mark.netns
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")
def test_capacity_of_a_link_limited_server_within_10_percent(tmp_path):
    """002 §4.4 on a server whose limit is known (the uplink): the listed level, then up to
    two doublings while the newest level sustained the most (a lone level always has: at
    least one doubling runs), one records file each."""
    spec = write_spec(tmp_path, "cap", 'mode = "capacity"\nlevels = [1]\nlevels_until_fall = 2\nlevel_s = 5.0\n'
                      'warmup_s = 1.5')
    outcome = run_experiment(load_spec(spec), tmp_path / "results", prefix="sjmp")
    assert outcome.complete, outcome.reasons()
    rep = tmp_path / "results" / "cap" / "run" / "0"
    capacity = json.loads((rep / "capacity.json").read_text())
    users = [level["users"] for level in capacity["levels"]]
    assert users in ([1, 2], [1, 2, 4])
    assert len(users) == 3 or not capacity["capacity_at_last_level"], capacity
    for count in users:
        assert (rep / f"level-{count}" / "records.csv").is_file()
    # The uplink allows LINK_BODY_BPS / 8 bytes of bodies per second (heads are ~0.2% more).
    expected = LINK_BODY_BPS / 8 / SIZE
    assert capacity["capacity_rps"] == pytest.approx(expected, rel=0.10)
    assert max(level["throughput_rps"] for level in capacity["levels"]) == capacity["capacity_rps"]
    # The server's CPU seconds per second of each level (002 Figs. 10, 12) agree with the
    # kernel counters' sampled over the run (a link-limited server: a few ms a second).
    cpu = [level["server_cpu"] for level in capacity["levels"]]
    sampled = pd.read_csv(rep / "counters.csv")["server_cpu"].iloc[1:].mean()
    assert sum(cpu) > 0 and all(abs(c - sampled) < 0.02 for c in cpu), (cpu, sampled)
    summary = json.loads((rep / "summary.json").read_text())
    assert summary["capacity_rps"] == capacity["capacity_rps"]
    table = pd.DataFrame(summary["levels"])
    assert list(table["users"]) == users


def test_a_levels_server_means_are_those_between_its_two_snapshots(tmp_path):
    """A level's server means (001 §6.1's events per wait) come from its histograms at the end
    of its warm-up subtracted from those a second before its end; none without both."""
    from sojourn.runner.execute import LEVEL_END_METRICS, LEVEL_WARM_METRICS, _level_server_means

    def histogram(total: float, waits: int) -> str:
        return ("# TYPE sojourn_epoll_ready_events histogram\n"
                f"sojourn_epoll_ready_events_sum {total}\nsojourn_epoll_ready_events_count {waits}\n")

    assert _level_server_means(tmp_path) == {}
    (tmp_path / LEVEL_WARM_METRICS).write_text(histogram(2_000, 1_000))  # the ramp: 2 events a wait
    assert _level_server_means(tmp_path) == {}
    (tmp_path / LEVEL_END_METRICS).write_text(histogram(2_000 + 550 * 100, 1_100))  # then 550 a wait
    assert _level_server_means(tmp_path) == {"server": {"events_per_wait_mean": 550.0}}


def test_poisson_from_catalogue_keeps_popularity_and_rate():
    from sojourn.runner.inputs import poisson_from_catalogue

    catalogue = pd.DataFrame({"path": ["/a"] * 3 + ["/b"], "size": [10, 10, 10, 20]})
    trace = poisson_from_catalogue(catalogue, rate=200.0, duration_s=20.0, clients=5, seed=1)
    assert len(trace) == pytest.approx(4000, rel=0.1)
    assert trace["arrival_s"].is_monotonic_increasing and trace["arrival_s"].max() == pytest.approx(20, rel=0.05)
    assert (trace["path"] == "/a").mean() == pytest.approx(0.75, abs=0.03)
    assert set(trace["client"]) == set(range(5))
    assert list(trace.loc[trace["path"] == "/b", "size"].unique()) == [20]


@pytest.mark.netns
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")
def test_load_fraction_measures_capacity_then_offers_that_fraction(tmp_path):
    spec = write_spec(tmp_path, "frac", 'load_fraction = 0.5\nlevels = [8]\nlevel_s = 4.0\nwarmup_s = 1.0\n'
                                        'duration_s = 6.0')
    outcome = run_experiment(load_spec(spec), tmp_path / "results", prefix="sjmf")
    assert outcome.complete, outcome.reasons()
    rep = tmp_path / "results" / "frac" / "run" / "0"
    offered = json.loads((rep / "offered.json").read_text())
    capacity = json.loads((rep / "capacity.json").read_text())["capacity_rps"]
    assert offered["capacity_rps"] == capacity and offered["rate_rps"] == pytest.approx(0.5 * capacity)
    summary = json.loads((rep / "summary.json").read_text())
    # Half the link-limited capacity is offered and served, within Poisson noise of a short run.
    assert summary["throughput_rps"] == pytest.approx(0.5 * capacity, rel=0.35)
    assert summary["offered"]["load_fraction"] == 0.5
    # The server's counters at the end of the probe set the load level's own apart: fewer
    # responses than the whole run's, yet some.
    probe = (rep / "server_metrics_probe.txt").read_text()
    assert 0 < server_metric_totals(probe)["server_responses"] < summary["server_responses"]
    assert summary["after_probe"]["events_per_wait_mean"] > 0
    # The probe's level has its own server means, from the end of its warm-up to a second
    # before its end (001 §6.1's saturated batches, without the ramp and the drain).
    (level,) = summary["levels"]
    assert (rep / "level-8" / "server_metrics_warm.txt").is_file() and level["server"]["events_per_wait_mean"] > 0


def test_page_cache_states_evict_and_warm_the_docroot(tmp_path):
    """``cold`` evicts a docroot from the page cache and ``warm`` brings it back (a docroot
    made in an earlier session is on disk only); fincore(1) reads the kernel's residency
    (mincore)."""
    fincore = shutil.which("fincore")
    if fincore is None:
        pytest.skip("fincore (util-linux) is not installed")
    docroot = tmp_path / "docroot"
    (docroot / "o").mkdir(parents=True)
    sizes = {"o/a.bin": 3 << 20, "o/b.bin": 1, "c.bin": 70_000}
    for name, size in sizes.items():
        path = docroot / name
        path.write_bytes(os.urandom(size))
        with open(path, "rb") as f:
            os.fsync(f.fileno())  # clean pages, which DONTNEED may drop

    def resident() -> int:
        out = subprocess.run([fincore, "--bytes", "--noheadings", "--output", "RES", *map(str, docroot.rglob("*.bin"))],
                             capture_output=True, text=True, check=True).stdout
        return sum(int(line) for line in out.split())

    total = sum(sizes.values())
    assert resident() >= total  # just written
    cold = set_page_cache(docroot, "cold")
    assert (cold["state"], cold["files"], cold["bytes"]) == ("cold", 3, total)
    assert resident() < total // 2
    warm = set_page_cache(docroot, "warm")
    assert (warm["state"], warm["files"], warm["bytes"]) == ("warm", 3, total) and warm["seconds"] >= 0
    assert resident() >= total  # whole pages: at least the files' bytes
    with pytest.raises(ValueError, match="'lukewarm'"):
        set_page_cache(docroot, "lukewarm")
