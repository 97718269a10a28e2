"""sojourn-engine sim vs simpy on the same M/G/1 model, one core each (bench/sim/run.sh).

M/G/1 with exponential sizes at rho 0.9 under SRPT and PS. Speeds are jobs per CPU
second (what one dedicated core delivers, steady on a shared machine), wall-clock rates
are kept in the JSON too. For sojourn-engine the figure is the simulation core (jobs
through the event loop; `--timing`) and, by wall clock, the whole process (generation,
simulation, summary); for simpy the whole model run. Both models' mean response times are
printed beside the closed form, to show they are the same model. Writes bench/out/sim.json.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))

from sojourn.engine import engine_path  # noqa: E402
from sojourn.theory.formulas import Exponential, Srpt  # noqa: E402

RHO = 0.9


def pinned(command: list[str]) -> list[str]:
    """Runs on one core (CPU 0) when taskset is available."""
    return (["taskset", "-c", "0"] if shutil.which("taskset") else []) + command


def engine(policy: str, jobs: int, sizes: list[str]) -> dict:
    started = time.perf_counter()
    result = subprocess.run(pinned([str(engine_path()), "sim", *sizes, "--rho", str(RHO), "--jobs", str(jobs),
                                    "--link", "8", "--policy", policy, "--size-bins", "0", "--timing"]),
                            check=True, capture_output=True, text=True)
    wall = time.perf_counter() - started
    timing = re.search(r"([0-9.]+) jobs/s; [0-9.]+ s of CPU: ([0-9.]+) jobs per CPU second", result.stderr)
    return {"jobs": jobs, "core_jobs_per_s": float(timing.group(1)), "core_jobs_per_cpu_s": float(timing.group(2)),
            "process_jobs_per_s": jobs / wall,
            "mean_response": json.loads(result.stdout)["mean_response_s"]}


def simpy_run(policy: str, jobs: int) -> dict:
    result = subprocess.run(pinned([sys.executable, str(Path(__file__).with_name("mg1_simpy.py")), "--policy", policy,
                                    "--rho", str(RHO), "--jobs", str(jobs)]), check=True, capture_output=True, text=True)
    return json.loads(result.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=10_000_000, help="jobs per sojourn-engine run")
    parser.add_argument("--simpy-jobs", type=int, default=100_000, help="jobs per simpy SRPT run (PS gets a fifth)")
    args = parser.parse_args()
    exp = Exponential(1.0)
    theory = {"srpt": Srpt(exp, RHO).mean_response(), "ps": exp.mean / (1 - RHO)}
    rows = {}
    for policy in ("srpt", "ps"):
        ours = engine(policy, args.jobs, ["--sizes", "exp", "--mean", "1"])
        heavy = engine(policy, args.jobs, ["--sizes", "bpareto", "--alpha", "1.1", "--mean", "3000"])
        peer = simpy_run(policy, args.simpy_jobs if policy == "srpt" else args.simpy_jobs // 5)
        rows[policy] = {"sojourn_exp": ours, "sojourn_bpareto_1.1": heavy, "simpy_exp": peer,
                        "theory_mean_response": theory[policy],
                        "ratio_per_cpu_s": ours["core_jobs_per_cpu_s"] / peer["jobs_per_cpu_s"]}
        print(f"{policy:4s}  sojourn-engine sim: {ours['core_jobs_per_cpu_s'] / 1e6:6.2f} M jobs/CPU-s "
              f"(BP 1.1: {heavy['core_jobs_per_cpu_s'] / 1e6:.2f} M; wall: core {ours['core_jobs_per_s'] / 1e6:.2f} M/s, "
              f"whole process {ours['process_jobs_per_s'] / 1e6:.2f} M/s)  |  simpy: {peer['jobs_per_cpu_s'] / 1e3:7.1f} k jobs/CPU-s  |  "
              f"ratio {rows[policy]['ratio_per_cpu_s']:,.0f}x  |  mean response {ours['mean_response']:.3f} / "
              f"{peer['mean_response']:.3f} (theory {theory[policy]:.3f})")
    out = ROOT / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    (out / "sim.json").write_text(json.dumps(rows, indent=2) + "\n")
    print(f"wrote {out / 'sim.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
