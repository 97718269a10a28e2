"""Soak and fault runs (docs/reliability.md): `make soak`, or one part:

    .venv/bin/python bench/soak/run.py overload [--seconds 600]   # rho 2, sojourn fair and srpt
    .venv/bin/python bench/soak/run.py integrity [--seconds S]    # 15% loss, bodies verified
    .venv/bin/python bench/soak/run.py slow [--seconds 60]        # 5,000 slow clients + normal traffic
    .venv/bin/python bench/soak/run.py kill                        # kill -9 server / emulator / sojourn run

Each part runs real processes in the testbed (root), writes its results under
bench/out/soak/<part>/ and prints the figures docs/reliability.md quotes. Runs are
bounded in time and only talk to the testbed's own namespaces.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from sojourn import analysis
from sojourn.engine import engine_path
from sojourn.runner.experiment import run_experiment
from sojourn.runner.spec import validate
from sojourn.testbed import Testbed, TestbedConfig, WanGroup, sysnet

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "bench" / "out" / "soak"


def run_spec(raw: dict, results: Path, prefix: str):
    experiment = validate(raw)
    return run_experiment(experiment, results, prefix=prefix, fresh=True)


def states(outcome) -> dict:
    """Each repetition's end state, keyed "run/repetition" (JSON keys are strings)."""
    return {f"{run}/{rep}": state for (run, rep), state in outcome.states.items()}


def rss_curve(counters: pd.DataFrame) -> dict:
    rss = counters["server_rss_bytes"].to_numpy(dtype=float) / 2**20
    minute = max(1, int(60 / max(counters["t_s"].diff().median(), 1e-3)))
    return {"rss_mib_first_minute_max": float(rss[:minute].max()), "rss_mib_last_minute_max": float(rss[-minute:].max()),
            "rss_mib_max": float(rss.max()), "rss_mib_median": float(np.median(rss)),
            "rss_mib_every_minute": [round(float(x), 1) for x in rss[::minute]]}


def overload(seconds: float) -> dict:
    """Persistent overload rho = 2 on the 10 Mbit/s testbed: no crash, memory bounded,
    link used, every request accounted for."""
    figures = {}
    for policy, extra in (("fair", {}), ("srpt", {"kernel_bands": True})):
        raw = {"name": f"soak-overload-{policy}", "server": {"kind": "sojourn", "policy": policy, **extra},
               "network": {"link_mbps": 10, "bands": "1K,2K,5K,50K" if extra else ""},
               "workload": {"model": "wc98", "rho": 2.0, "duration_s": seconds, "clients": 200, "seed": 9,
                            "timeout_s": 60.0},
               "collect": {"drain_s": 30.0}}
        started = time.monotonic()
        outcome = run_spec(raw, OUT / "overload", prefix=f"sjso{policy[0]}")
        rep = outcome.directory / "run" / "0"
        counters = pd.read_csv(rep / "counters.csv")
        during = counters[counters["t_s"] <= seconds]
        sent = during["uplink_tx_bytes"].iloc[-1] - during["uplink_tx_bytes"].iloc[0]
        span = during["t_s"].iloc[-1] - during["t_s"].iloc[0]
        trace_requests = json.loads((rep / "run.json").read_text())["inputs"]["requests"]
        reqs = analysis.requests(analysis.read_records(rep / "records.csv"))  # raises unless one final each
        log = (rep / "server-stdio.log").read_text(errors="replace") if (rep / "server-stdio.log").is_file() else ""
        figures[policy] = {
            "state": states(outcome), "wall_s": round(time.monotonic() - started),
            "link_use_during_overload": round(sent * 8 / span / 10e6, 4),
            "requests_scheduled": trace_requests, "requests_recorded": int(len(reqs)),
            "outcomes": reqs["outcome"].value_counts().to_dict(),
            "server_panicked": "panicked" in log, **rss_curve(counters)}
        print(policy, json.dumps(figures[policy]), flush=True)
    return figures


# Seconds of load per loss model that verify at least 10^6 responses each here: bursty
# (two-state) loss stalls connections for longer, so it needs more time (measured 2026-11-24:
# 617,548 responses in 500 s two-state, 1,048,215 Bernoulli).
INTEGRITY_SECONDS = {"two-state": 900.0, "bernoulli": 500.0}


def integrity(seconds: float | None) -> dict:
    """Bodies verified byte for byte (the docroot's content rule) under 15% loss, two-state
    and Bernoulli, with many closed-loop users on a 1 Gbit/s uplink."""
    figures = {}
    for model in ("two-state", "bernoulli"):
        seconds_of_load = seconds or INTEGRITY_SECONDS[model]
        raw = {"name": f"soak-integrity-{model}", "server": {"kind": "sojourn"},
               "network": {"link_mbps": 1000, "groups": [{"name": "lossy", "addresses": 8, "loss": 0.15,
                                                          "loss_model": model}]},
               "workload": {"mode": "closed", "model": "wc98", "users": 512, "duration_s": seconds_of_load, "clients": 512,
                            "persistent": 5, "timeout_s": 120.0, "verify": True, "seed": 4},
               "collect": {"drain_s": 5.0}}
        outcome = run_spec(raw, OUT / "integrity", prefix=f"sjsi{model[0]}")
        rep = outcome.directory / "run" / "0"
        records = analysis.read_records(rep / "records.csv")
        outcomes = records["outcome"].value_counts().to_dict()
        errors = records["error"].fillna("")
        figures[model] = {"state": states(outcome), "responses_verified": int(outcomes.get("ok", 0)),
                          # Wrong bytes, in a whole body or in what came of a cut one.
                          "corrupted": int(errors.str.startswith("body differs").sum()),
                          # Closed mid-body with the bytes received right (the server's send timeout).
                          "truncated": int((errors.str.startswith("body ended after")).sum()),
                          "attempt_outcomes": outcomes}
        print(model, json.dumps(figures[model]), flush=True)
    return figures


SLOW_CLIENT = """
import socket, sys, time
target, count, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
host, port = target.rsplit(":", 1)
socks, opened, answered = [], 0, 0
deadline = time.monotonic() + seconds
def fill():
    global opened
    while len(socks) < count and time.monotonic() < deadline:
        try:
            s = socket.create_connection((host, int(port)), timeout=2)
        except OSError:
            return
        s.setblocking(False)
        s.send(b"GET / HTTP/1.1\\r\\nHost: t\\r\\n")
        socks.append(s)
        opened += 1
while time.monotonic() < deadline:
    fill()
    for s in list(socks):
        try:
            s.send(b"X-a: b\\r\\n")  # one header line at a time, never the end of the head
        except OSError:
            socks.remove(s); s.close(); answered += 1
    time.sleep(1.0)
print(opened, answered, len(socks))
"""


def slow(seconds: float) -> dict:
    """5,000 slow clients (heads that never end) beside normal traffic: the normal
    requests' p99 and the server's memory."""
    root = OUT / "slow" / "root"
    root.mkdir(parents=True, exist_ok=True)
    (root / "a.bin").write_bytes(bytes(2000))
    engine = str(engine_path())
    out = OUT / "slow" / "load"
    with Testbed(TestbedConfig(prefix="sjss", link_bps=100_000_000, groups=[WanGroup("g0", clients=4)])) as tb:
        server = tb.popen(tb.server_ns, [engine, "serve", "--root", str(root), "--listen", f"{tb.server_addr}:8080",
                                         "--threads", "1", "--max-connections", "20000"], stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        tb.start_counters(OUT / "slow" / "counters.csv", interval_s=1.0)
        slow_clients = tb.popen(tb.client_ns, [sys.executable, "-c", SLOW_CLIENT, f"{tb.server_addr}:8080", "5000",
                                               str(seconds)], stdout=subprocess.PIPE, text=True)
        time.sleep(min(20.0, seconds / 3))  # the slow connections are open before the normal load
        addrs = ",".join(a for group in tb.client_addrs.values() for a in group)
        normal = tb.run(tb.client_ns, [engine, "load", "open", "--target", f"{tb.server_addr}:8080", "--rate", "200",
                                       "--duration", str(seconds / 2), "--path", "/a.bin", "--clients", "50",
                                       "--source-addrs", addrs, "-o", str(out), "--quiet"], capture_output=True, text=True)
        opened, answered, still_open = map(int, slow_clients.communicate(timeout=seconds + 60)[0].split())
        tb.stop_counters()
        alive = server.poll() is None
    summary = json.loads((out / "summary.json").read_text())
    counters = pd.read_csv(OUT / "slow" / "counters.csv")
    figures = {"slow_opened": opened, "slow_closed_by_server": answered, "slow_open_at_end": still_open,
               "normal_requests": summary["requests"], "normal_outcomes": summary["outcomes"],
               "normal_p99_s": summary["response_time_s"]["p99"], "normal_p50_s": summary["response_time_s"]["p50"],
               "server_alive": alive, "peak_established": int(counters["established"].max()), **rss_curve(counters),
               "load_exit": normal.returncode}
    print(json.dumps(figures), flush=True)
    return figures


def _leaks(prefix: str, marker: str) -> dict:
    """What of a run still exists: namespaces and links of its prefix, and processes
    whose command line names its results (server and load generator do)."""
    processes = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline and str(os.getpid()) != pid:
            processes.append(int(pid))
    return {"namespaces": sysnet.namespaces_with_prefix(prefix), "links": sysnet.host_links_with_prefix(prefix),
            "processes": processes}


def kill() -> dict:
    """kill -9 of the server, of the emulator and of `sojourn run` in the middle of a run:
    what each leaves, and that the next run (or testbed down) leaves nothing."""
    figures = {}
    spec = OUT / "kill" / "spec.toml"
    spec.parent.mkdir(parents=True, exist_ok=True)
    spec.write_text('name = "soak-kill"\n[network]\nlink_mbps = 10\n[[network.groups]]\nname = "wan"\naddresses = 4\n'
                    'rtt_ms = 20\n[workload]\nrho = 0.5\nduration_s = 20\nclients = 20\ntimeout_s = 10.0\n'
                    '[collect]\ndrain_s = 5\n')
    results = OUT / "kill" / "results"
    for victim in ("server", "emulator", "sojourn-run"):
        prefix = "sjsk"
        run = subprocess.Popen([sys.executable, "-m", "sojourn.cli", "run", str(spec), "--results", str(results),
                                "--prefix", prefix, "--fresh", "--no-report"], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, start_new_session=True)
        rep = results / "soak-kill" / "run" / "0"
        deadline = time.monotonic() + 90
        while not (rep / "load.toml").is_file() and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(5)
        pids = {ns: sysnet.ns_pids(ns) for ns in sysnet.namespaces_with_prefix(prefix)}
        if victim == "sojourn-run":
            os.kill(run.pid, signal.SIGKILL)
        else:
            word = "serve" if victim == "server" else " wan "
            for pid in (p for ps in pids.values() for p in ps):
                try:
                    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
                except OSError:
                    continue
                if word in f" {cmdline} " and "sojourn-engine" in cmdline:
                    os.kill(pid, signal.SIGKILL)
        try:
            output, _ = run.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(run.pid, signal.SIGKILL)
            output, _ = run.communicate()
        status = json.loads((rep / "status.json").read_text()) if (rep / "status.json").is_file() else {}
        summary = json.loads((rep / "summary.json").read_text()) if (rep / "summary.json").is_file() else {}
        time.sleep(1)
        left = _leaks(prefix, str(results))
        # Recovery as a user meets it: `testbed status` names what is left, and the next
        # `sojourn run` of the spec (no --fresh) cleans up and redoes what did not finish.
        told = subprocess.run([sys.executable, "-m", "sojourn.cli", "testbed", "status", "--prefix", prefix],
                              capture_output=True, text=True).stdout.strip().splitlines()
        rerun = subprocess.run([sys.executable, "-m", "sojourn.cli", "run", str(spec), "--results", str(results),
                                "--prefix", prefix, "--no-report"], capture_output=True, text=True, timeout=300)
        rerun_status = json.loads((rep / "status.json").read_text()) if (rep / "status.json").is_file() else {}
        after = _leaks(prefix, str(results))
        figures[victim] = {"run_exit": run.returncode, "repetition": status.get("state"), "reason": status.get("reason", ""),
                           "outcomes": summary.get("outcomes"), "left_behind": left, "testbed_status_said": told[:3],
                           "rerun_exit": rerun.returncode, "rerun_repetition": rerun_status.get("state"),
                           "rerun_said": [line for line in rerun.stderr.splitlines() if "leftover" in line.lower()
                                          or "removed" in line.lower() or "redo" in line.lower()][:3],
                           "after_recovery": after,
                           "last_output": output.strip().splitlines()[-3:-2]}
        print(victim, json.dumps(figures[victim], default=str), flush=True)
    return figures


PARTS = {"overload": overload, "integrity": integrity, "slow": slow, "kill": kill}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("part", choices=["overload", "integrity", "slow", "kill", "all"])
    parser.add_argument("--seconds", type=float, help="length of the part's load (defaults: overload 600, integrity "
                                                      "900 two-state + 500 Bernoulli, slow 60)")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    parts = ["overload", "integrity", "slow", "kill"] if args.part == "all" else [args.part]
    defaults = {"overload": 600.0, "integrity": None, "slow": 60.0}
    results = {}
    for part in parts:
        results[part] = PARTS[part](args.seconds or defaults[part]) if part in defaults else PARTS[part]()
        (OUT / f"{part}.json").write_text(json.dumps(results[part], indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
