"""Solo against concurrent testbeds (bench/concurrency/run.sh): for each count of testbeds
run at once, each run's mean response time, SYN drops and incompletes beside the solo
repetitions' 90% intervals, and how many repetitions the fidelity guard passed.

    .venv/bin/python bench/concurrency/compare.py results/concurrency [--json OUT]

A count is *safe* when every run's mean response time lies inside the solo 90% interval
(widened by nothing) and every repetition is complete and valid; the largest safe count
is printed last (and is what docs/experiments.md recommends for --concurrency). Beside the
rule, each run's difference from solo with its Welch 90% interval and p-value (repetitions
of the two sets, unequal variances): a rule on one mean against an interval misjudges a
shift as often as its own noise decides, the difference says how large a shift could be. A count run
more than once (run.sh's `1 2 1`: roots 1, 2, 1-again2) has its sets pooled, so solo sets
before and after a concurrent batch give one interval.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from scipy import stats

from sojourn.analysis.results import load_experiment, summaries
from sojourn.analysis.sweeps import over_repetitions
from sojourn.runner.plan import load_seconds

METRICS = ["response_mean", "response_largest_1pct_mean", "syn_drops", "incomplete"]


def experiment_dir(root: Path) -> Path:
    """The one experiment directory under a count's results root."""
    return next(path for path in root.iterdir() if path.is_dir())


def welch(concurrent: list[float], solo: list[float]) -> dict:
    """The relative difference of the means, concurrent / solo - 1, with its Welch 90%
    interval and two-sided p-value (scipy's t-test with unequal variances)."""
    a, b = np.asarray(concurrent, float), np.asarray(solo, float)
    if len(a) < 2 or len(b) < 2 or b.mean() == 0:  # no interval (JSON's null)
        return {"welch_diff": None, "welch_lo": None, "welch_hi": None, "welch_p": None}
    test = stats.ttest_ind(a, b, equal_var=False)
    interval = test.confidence_interval(0.90)
    return {"welch_diff": a.mean() / b.mean() - 1, "welch_lo": interval.low / b.mean(),
            "welch_hi": interval.high / b.mean(), "welch_p": float(test.pvalue)}


def table(reps: list) -> dict:
    frame = summaries(reps)
    fidelity = [rep.summary.get("fidelity", {}) for rep in reps]
    frame["valid"] = [bool(record.get("valid")) for record in fidelity]
    frame["idle"] = [record.get("values", {}).get("cpu_idle") for record in fidelity]
    # Invalid attempts the guard redid (attempts.json beside each repetition).
    frame["redone"] = [len(json.loads((rep.directory / "attempts.json").read_text()))
                       if (rep.directory / "attempts.json").is_file() else 0 for rep in reps]
    stats = over_repetitions(frame, ["run"], METRICS)
    stats["valid"] = stats["run"].map(frame.groupby("run")["valid"].sum())
    stats["complete"] = stats["run"].map(frame.groupby("run")["state"].apply(lambda s: int((s == "complete").sum())))
    stats["cpu_idle"] = stats["run"].map(frame.groupby("run")["idle"].mean())
    stats["redone"] = stats["run"].map(frame.groupby("run")["redone"].sum())
    stats["values"] = stats["run"].map(frame.groupby("run")["response_mean"].apply(list))
    return {row["run"]: row for row in stats.to_dict("records")}


def interrupted(rep) -> bool:
    return rep.status.get("state") == "partial" and str(rep.status.get("reason", "")).startswith("interrupted")


def _spec_of(experiment: Path) -> str:
    """The spec the results came from, as the repository names it (its name line)."""
    import tomllib

    name = tomllib.loads((experiment / "spec.toml").read_text())["name"]
    paper, _, stem = name.partition("-")
    return f"experiments/{paper}/{stem}.toml"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("root", type=Path, help="results/concurrency (one results root per count: 1, 2, 3, 4)")
    parser.add_argument("--json", type=Path, help="also write the comparison here")
    args = parser.parse_args()
    roots = [path for path in args.root.iterdir() if path.name.split("-again")[0].isdigit()]
    counts = sorted({int(path.name.split("-again")[0]) for path in roots})
    if 1 not in counts:
        raise SystemExit(f"{args.root}/1 (the solo runs) is missing")
    everything = {count: [rep for root in sorted(roots) if int(root.name.split("-again")[0]) == count
                          for rep in load_experiment(experiment_dir(root))] for count in counts}
    # A repetition stopped by the operator (SIGINT) measured nothing either way; any other
    # one not complete (failed, invalid) stays and makes its count unsafe.
    reps = {count: [rep for rep in found if not interrupted(rep)] for count, found in everything.items()}
    left_out = sum(len(everything[count]) - len(reps[count]) for count in counts)
    if left_out:
        print(f"left out {left_out} repetition(s) interrupted by a signal (status.json)")
    tables = {count: table(reps[count]) for count in counts}
    solo = tables[1]
    out, safe = {}, []
    print(f"{'count':>5} {'run':6} {'reps':>4} {'valid':>5} {'idle':>5} {'mean (s)':>9} {'solo 90% interval':>20} "
          f"{'inside':>6} {'vs solo (Welch 90%)':>24} {'p':>5} {'SYN drops':>9} {'incomplete':>10}")
    for count in counts:
        ok = True
        for run, row in tables[count].items():
            low, high = solo[run]["response_mean_lo"], solo[run]["response_mean_hi"]
            inside = bool(low <= row["response_mean"] <= high)
            whole = row["valid"] == row["n"] and row["complete"] == row["n"]
            ok &= (inside or count == 1) and whole
            shift = welch(row["values"], solo[run]["values"]) if count != 1 else {}
            known = shift.get("welch_lo") is not None
            beside = f"{shift['welch_diff']:+.1%} [{shift['welch_lo']:+.1%}, {shift['welch_hi']:+.1%}]" if known else "—"
            p_value = f"{shift['welch_p']:.2f}" if known else "—"
            print(f"{count:>5} {run:6} {row['n']:>4} {row['valid']:>5} {row['cpu_idle']:>5.2f} {row['response_mean']:>9.3f} "
                  f"{f'[{low:.3f}, {high:.3f}]':>20} {'yes' if inside else 'no':>6} {beside:>24} "
                  f"{p_value:>5} {row['syn_drops']:>9.0f} {row['incomplete']:>10.0f}")
            out.setdefault(str(count), {})[run] = {**{k: row[k] for k in ("n", "valid", "complete", "cpu_idle",
                                                                           "redone", "values")},
                                                   **{m: row[m] for m in METRICS}, "solo_lo": low, "solo_hi": high,
                                                   "inside_solo_interval": inside, **shift}
        if ok:
            safe.append(count)
    largest = max((count for count in safe if all(c in safe for c in counts if c <= count)), default=1)
    print(f"largest safe count (every smaller count safe too): {largest}")
    if args.json:
        run = json.loads((reps[1][0].directory / "run.json").read_text())
        # A closed loop's load lasts its duration, not its catalogue trace's span.
        load_s = load_seconds(run["config"], run["inputs"]["duration_s"])
        started = sorted(rep.status.get("started", "") for count in counts for rep in reps[count])
        record = {"spec": _spec_of(experiment_dir(args.root / "1")), "run_length": f"{load_s:.0f} s",
                  "ran_on": f"{started[0][:16]}Z to {started[-1][:16]}Z", "counts": out, "largest_safe": largest}
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(record, indent=2, default=float) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
