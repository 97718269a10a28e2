"""End to end: a tiny session workload through `sojourn run` on the real testbed,
`sojourn-engine serve --stages` and `load sessions`: FIFO and DWFS, three classes by
client address, 3 s of session arrivals each (DWFS with closed-loop users whose requests
carry their class's bound, 003 §5); then the report's sessions section."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

import pandas as pd
import pytest

from host_noise import HOST_NOISE_UNJUDGED
from sojourn.analysis import session_metrics as analysis_sessions
from sojourn.engine import engine_path

pytestmark = [pytest.mark.netns, pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")]

SPEC = """\
name = "sessions-e2e"
[server]
kind = "sojourn"
stages = { policy = "dwfs", series_interval_ms = 250 }
[network]
link_mbps = 100
[[network.groups]]
name = "gold"
[[network.groups]]
name = "silver"
addresses = 2
[[network.groups]]
name = "bronze"
[workload]
mode = "sessions"
duration_s = 3
timeout_s = 5
sessions = { rate = 4 }
[collect]
""" + HOST_NOISE_UNJUDGED + """\
drain_s = 5
interval_s = 0.5
[variants.fifo]
server.stages.policy = "fifo"
[variants.dwfs]
server.stages.stage_order = "class"
workload.sessions.users = 8
workload.sessions.class_bounds = true
"""


@pytest.fixture
def results_root():
    root = Path(tempfile.mkdtemp(prefix="sjss-e2e-", dir="/tmp"))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def run_spec(results_root: Path, text: str, prefix: str, *options: str, timeout: float = 120) -> str:
    """Runs the spec ``text`` with `sojourn run` into ``results_root`` (its results under
    the spec's name); returns what the command printed."""
    spec = results_root / f"{tomllib.loads(text)['name']}.toml"
    spec.write_text(text)
    engine_path()  # builds the engine if needed, before the run's clock starts
    done = subprocess.run([sys.executable, "-m", "sojourn.cli", "run", str(spec), "--results", str(results_root),
                           "--prefix", prefix, *options], capture_output=True, text=True, timeout=timeout)
    # The lines that name why a repetition was not complete come before the tables.
    verdicts = [line for line in done.stdout.splitlines() if ": partial" in line or ": invalid" in line]
    assert done.returncode == 0, "\n".join(verdicts) + "\n" + done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout


def test_sessions_spec_runs_and_reports(results_root):
    assert "sessions per class (003 §5)" in run_spec(results_root, SPEC, "sjss", timeout=150)
    experiment = results_root / "sessions-e2e"
    for run, policy in (("fifo", "fifo"), ("dwfs", "dwfs")):
        rep = experiment / run / "0"
        assert json.loads((rep / "status.json").read_text())["state"] == "complete"
        stages = tomllib.loads((rep / "stages.toml").read_text())
        assert stages["policy"] == policy
        # The server took the order within a stage the spec named (it refuses an unknown one).
        assert stages.get("stage-order") == ("class" if policy == "dwfs" else None)
        classes = json.loads((rep / "classes.json").read_text())
        # Four client addresses, the second group's two are silver (class 1).
        assert classes["class_names"] == ["gold", "silver", "bronze"]
        assert classes["address_classes"] == [0, 1, 1, 2]
        assert [c["networks"] for c in stages["class"]] == [[a] for a in classes["source_addrs"][:1]] + \
            [classes["source_addrs"][1:3], classes["source_addrs"][3:]]
        load_file = tomllib.loads((rep / "load.toml").read_text())
        assert load_file["mode"] == "sessions" and load_file["source-addrs"] == classes["source_addrs"]
        records = pd.read_csv(rep / "records.csv")
        assert records["path"].str.startswith("/stage/").all()
        # The generator records each request's class: that of its client's source address.
        expected = [classes["address_classes"][c % 4] for c in records["client"]]
        assert records["class"].tolist() == expected
        workload = json.loads((rep / "load_summary.json").read_text())["workload"]
        assert workload["class_names"] == ["gold", "silver", "bronze"]
        if run == "dwfs":  # 8 closed-loop users: clients 0-7, no Poisson arrivals
            assert workload["arrivals"] == "users" and set(records["client"]) <= set(range(8))
            gave_up = records[records["outcome"] == "gave_up"]
            bounds = [classes["delay_bounds_s"][c] for c in gave_up["class"]]
            assert ((gave_up["last_byte_s"] - gave_up["scheduled_s"]) < [b + 0.05 for b in bounds]).all()
        else:
            assert workload["arrivals"] == "poisson"
        assert (records["status"] == 200).any()
        # FIFO never drops; DWFS answers the requests its pool dropped with 503, except those
        # whose client gave up at its class bound before the answer came.
        assert set(records["status"].dropna().astype(int)) <= {200, 503}
        series_frame = analysis_sessions.read_series(rep / "series.csv")
        dropped_by_server = int(analysis_sessions.anatomy(series_frame)["dropped"].sum())
        answered_503 = int((records["status"] == 503).sum())
        gave_up = int((records["outcome"] == "gave_up").sum())
        assert answered_503 <= dropped_by_server <= answered_503 + gave_up
        if policy == "fifo":
            assert dropped_by_server == 0 and answered_503 == 0
        series = pd.read_csv(rep / "series.csv")
        assert set(series["stage"]) == {"MM", "CO", "SR", "BR"}
        sessions = json.loads((rep / "summary.json").read_text())["sessions"]
        by_name = {row["name"]: row for row in sessions["classes"]}
        assert set(by_name) <= {"gold", "silver", "bronze"} and by_name
        assert sum(row["requests"] for row in by_name.values()) == sessions["overall"]["requests"]
        assert sum(row["sessions"] for row in by_name.values()) == sessions["overall"]["sessions"]
        assert sessions["overall"]["sessions"] >= 1
        completed = sum(row["completed"] for row in sessions["anatomy"])
        assert completed == int(series.groupby("stage")["completed"].max().sum())
        assert sum(p["completed"] + p["aborted"] for p in sessions["productivity"]) == sessions["overall"]["requests"]
    report = (experiment / "report.html").read_text()
    assert "<h2>Sessions (003 §5)</h2>" in report
    assert "session abort rate" in report and "Figs. 11-12" in report and "Fig. 10" in report


# The first spec with every class on one address, and clients whose every request fails.
ON_FAILURE_SPEC = """\
name = "on-failure-e2e"
[server]
kind = "sojourn"
stages = { policy = "fifo" }
[network]
link_mbps = 100
groups = [{ name = "gold" }, { name = "silver" }, { name = "bronze" }]
[workload]
mode = "sessions"
duration_s = 3
timeout_s = 5
# Every stage costs 5-20 ms of CPU: a 1 ms bound fails every request.
sessions = { users = 3, exit = 0.2, delay_bound_s = 0.001 }
[collect]
""" + HOST_NOISE_UNJUDGED + """\
drain_s = 3
[variants.restart]
workload.sessions.on_failure = "restart"
[variants.continue]
workload.sessions.on_failure = "continue"
"""


def test_a_failed_request_ends_or_continues_its_session_as_the_spec_says(results_root):
    """workload.sessions.on_failure (003 §5 leaves open what its clients did): with restart a
    failed request ends its session and the user starts a new one, so no session gets past its
    first request; with continue the session walks on through its stages."""
    run_spec(results_root, ON_FAILURE_SPEC, "sjof", "--no-report")
    for run in ("restart", "continue"):
        rep = results_root / "on-failure-e2e" / run / "0"
        assert tomllib.loads((rep / "model.toml").read_text())["on-failure"] == run
        records = pd.read_csv(rep / "records.csv")
        assert len(records) > 10 and (records["outcome"] == "gave_up").all(), records["outcome"].value_counts()
        per_session = records.groupby("session").size()
        workload = json.loads((rep / "load_summary.json").read_text())["workload"]
        if run == "restart":
            assert per_session.max() == 1
            assert workload["sessions_aborted"] >= len(per_session) - 3  # the last ones may be cut at the end
            assert workload["session_failures_continued"] == 0
        else:
            assert per_session.max() > 1
            assert workload["sessions_aborted"] == 0 and workload["session_failures_continued"] > 0


# W4 (000 Table 1: 25 s at rho 0.4, 25 s at 1.4) ten times faster, at 20 sessions/s for rho 1:
# 8 sessions/s for 2.5 s, then 28 for 2.5 s, twice. One 1-ms stage keeps the server unloaded.
PROFILE_SPEC = """\
name = "profile-e2e"
[server]
kind = "sojourn"
stages = { policy = "dwfs", stage = [{ name = "A", processing_ms = 1 }] }
[network]
link_mbps = 100
groups = [{ name = "gold" }, { name = "silver" }, { name = "bronze" }]
[workload]
mode = "sessions"
profile = "W4"
time_compression = 10
cycles = 2
timeout_s = 5
sessions = { rate = 20, exit = 0.5 }
[collect]
""" + HOST_NOISE_UNJUDGED + """\
drain_s = 3
"""


def test_session_arrivals_follow_a_load_profiles_periods(results_root):
    """workload.profile in sessions mode: the load generator's Poisson session rate follows
    the profile's periods (each its rho times workload.sessions.rate), and the run's periods
    are the profile's, so the overload analysis finds its steps."""
    from sojourn.workloads.shaping import overload_spans

    run_spec(results_root, PROFILE_SPEC, "sjpf", "--no-report")
    rep = results_root / "profile-e2e" / "run" / "0"
    assert json.loads((rep / "status.json").read_text())["state"] == "complete"
    assert tomllib.loads((rep / "model.toml").read_text())["arrival-profile"] == [
        {"length-s": 2.5, "rate": 8.0}, {"length-s": 2.5, "rate": 28.0}]
    periods = json.loads((rep / "run.json").read_text())["inputs"]["periods"]
    assert [p["target_rho"] for p in periods] == [0.4, 1.4, 0.4, 1.4]
    assert [p["sessions_per_s"] for p in periods] == pytest.approx([8, 28, 8, 28])
    assert overload_spans(periods) == [(2.5, 5.0), (7.5, 10.0)]
    records = pd.read_csv(rep / "records.csv")
    starts = records.groupby("session")["scheduled_s"].min()
    high = ((starts % 5.0) >= 2.5).sum()
    low = len(starts) - high
    # Poisson counts: 40 (sd 6.3) in the low periods, 140 (sd 11.8) in the high ones; a
    # constant rate would put as many sessions in each.
    assert abs(low - 40) < 4 * 40 ** 0.5 and abs(high - 140) < 4 * 140 ** 0.5, (low, high)
    assert starts.max() < 10.0
    workload = json.loads((rep / "load_summary.json").read_text())["workload"]
    assert workload["sessions_started"] == len(starts)
    assert (records["outcome"] == "ok").mean() > 0.95
