"""Measuring DWFS against FIFO on a live server (003 §5, Tables 3-6, Figs. 9, 13).

``python -m sojourn.plan.measure`` starts ``sojourn-engine serve --stages`` on
127.0.0.1 and drives it with ``sojourn-engine load sessions`` (Poisson session
arrivals walking 003 Fig. 5, plus an exit probability) from three loopback
source addresses, one per priority class (127.0.0.1 gold, .2 silver, .3 bronze,
timeouts 100, 150, 200 ms: 003 §5.2's 10, 15, 20 s scaled by 1/100), once per
dispatch policy and session rate. It prints, and writes as CSV, per policy, rate
and class: mean response time of requests that met their bound, request timeout
rate, drop rate and session abort rate (:mod:`sojourn.analysis.sessions`), plus
the stage anatomy (queueing vs processing) from the pool's series.

This is a loopback measurement on a shared machine (load generator and server on
the same CPUs), not the testbed: use it for the shape of the comparison, not for
absolute figures. The same comparison in the testbed is `sojourn run experiments/dwfs.toml`.
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from sojourn.analysis import sessions
from sojourn import papers
from sojourn.analysis.records import read_records, requests
from sojourn.engine import engine_path

# 003 Fig. 5 (percent) over the stages MM, CO, SR, BR (sojourn/papers.toml).
FIG5 = papers.sessions()["fig5_percent"]
STAGES = papers.sessions()["stages"]
PROCESSING_MS = [t * 10 for t in papers.sessions()["study_service_times"]]  # 003 §4.1's 0.5, 1, 1.5, 2 x 10 ms
# 003 §5.2's timeouts 10, 15, 20 s x 1/100, one loopback address per class.
CLASSES = [(name, timeout * 10, f"127.0.0.{i + 1}")
           for i, (name, timeout) in enumerate(zip(papers.sessions()["class_names"], papers.sessions()["class_timeouts_s"]))]


def stages_toml(policy: str, series: Path, workers: int) -> str:
    lines = [f'policy = "{policy}"', f"workers = {workers}", f'series_csv = "{series}"', "series_interval_ms = 500"]
    for name, ms in zip(STAGES, PROCESSING_MS):
        lines += ["[[stage]]", f'name = "{name}"', f"processing_ms = {ms}"]
    for name, ms, address in CLASSES:
        lines += ["[[class]]", f'name = "{name}"', f"timeout_ms = {ms}", f'networks = ["{address}"]']
    return "\n".join(lines) + "\n"


def session_model_toml(rate: float, exit_probability: float, think_s: float) -> str:
    """docs/formats.md "Session model": Fig. 5 rows scaled by 1 - exit."""
    lines = [f"arrival_rate = {rate}", "delay_bound_s = 1.0", 'start = { MM = 1.0 }',
             f'think_time = {{ distribution = "exponential", mean_s = {think_s} }}' if think_s > 0
             else 'think_time = { distribution = "none" }']
    for name, row in zip(STAGES, FIG5):
        total = sum(row)
        nexts = ", ".join(f"{to} = {p / total * (1 - exit_probability)!r}" for to, p in zip(STAGES, row))
        lines += [f"[states.{name}]", f'paths = ["/stage/{name}/0", "/stage/{name}/1"]',
                  f"next = {{ {nexts}, exit = {exit_probability} }}"]
    return "\n".join(lines) + "\n"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_point(policy: str, rate: float, duration_s: float, out: Path, exit_probability: float = 0.1,
              think_s: float = 0.0, workers: int = 1, seed: int = 1) -> Path:
    """One server + load run into ``out``; returns ``out``."""
    engine = str(engine_path())
    out.mkdir(parents=True, exist_ok=True)
    (out / "root").mkdir(exist_ok=True)
    (out / "stages.toml").write_text(stages_toml(policy, out / "series.csv", workers))
    (out / "model.toml").write_text(session_model_toml(rate, exit_probability, think_s))
    port = free_port()
    with open(out / "serve.log", "wb") as log:
        server = subprocess.Popen([engine, "serve", "--root", str(out / "root"), "--listen", f"127.0.0.1:{port}",
                                   "--threads", "1", "--stages", str(out / "stages.toml")], stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError(f"server did not start; see {out / 'serve.log'}") from None
                time.sleep(0.05)
        with open(out / "load.log", "wb") as log:
            subprocess.run([engine, "load", "sessions", "--target", f"127.0.0.1:{port}", "--out", str(out / "load"),
                            "--model", str(out / "model.toml"), "--duration", str(duration_s), "--timeout", "5",
                            "--source-addrs", ",".join(address for _, _, address in CLASSES), "--quiet",
                            "--seed", str(seed)], stdout=log, stderr=log, check=True)
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    return out


def analyse_point(out: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    bounds = {i: ms / 1000 for i, (_, ms, _) in enumerate(CLASSES)}
    judged = sessions.judge(requests(read_records(out / "load" / "records.csv")), delay_bounds=bounds,
                            address_classes=list(range(len(CLASSES))))
    return sessions.per_class(judged), sessions.anatomy(sessions.read_series(out / "series.csv"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sojourn.plan.measure", description=__doc__.split("\n\n")[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="directory for the runs and results.csv")
    parser.add_argument("--policies", default="fifo,dwfs", help="comma-separated dispatch policies [fifo,dwfs]")
    parser.add_argument("--rates", default="6,9,12", help="comma-separated session arrival rates per second [6,9,12]")
    parser.add_argument("--duration", type=float, default=20.0, help="seconds of session arrivals per run [20]")
    parser.add_argument("--exit", type=float, default=0.1, help="probability a session ends after a request [0.1]")
    parser.add_argument("--think", type=float, default=0.0, help="mean think time in seconds [0]")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    rows, anatomy_rows = [], []
    for rate in [float(r) for r in args.rates.split(",")]:
        for policy in args.policies.split(","):
            out = run_point(policy, rate, args.duration, args.out / f"{policy}-{rate:g}", args.exit, args.think,
                            seed=args.seed)
            table, parts = analyse_point(out)
            table.insert(0, "rate", rate)
            table.insert(0, "policy", policy)
            rows.append(table)
            parts = parts.reset_index()
            parts.insert(0, "rate", rate)
            parts.insert(0, "policy", policy)
            anatomy_rows.append(parts)
    results = pd.concat(rows, ignore_index=True)
    anatomy = pd.concat(anatomy_rows, ignore_index=True)
    results.to_csv(args.out / "results.csv", index=False)
    anatomy.to_csv(args.out / "anatomy.csv", index=False)
    with pd.option_context("display.width", 160, "display.max_columns", 20):
        print(results.to_string(index=False, float_format=lambda v: f"{v:.4f}"))
        print()
        print(anatomy.to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
