"""The four-queue productivity study of 003 §4.1 (Table 2) and DWFS against every static
weight assignment around the best one, over seeds and client counts.

    python -m sojourn.reproduce.dwfs_study --out DIR [--quick]

Runs ``sojourn-engine stages --json`` (crates/stages/src/study.rs: one CPU, four queues
MM, CO, SR, BR with processing times 0.5, 1, 1.5, 2, timeout 20, 10,000 time units, the
Fig. 5 transitions, closed-loop clients) and writes into DIR:

- ``study.csv``: one row per (clients, seed, policy, weights) with every counter the
  simulator prints (completed, timed out, productivity = completed - timed out, sessions,
  wasted CPU, completions per stage);
- ``table2.csv``: 003 Table 2's seven round-robin assignments at 20 clients, mean over seeds;
- ``summary.json``: per client count, DWFS's productivity and timeouts against the best
  static assignment of the sweep, and which stages that assignment completes;
- ``dwfs-vs-static.png``: productivity against the weight of MM.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd

from sojourn import papers
from sojourn.engine import engine_path
from sojourn.reproduce import command_args

STAGES = tuple(papers.sessions()["stages"])
TABLE2 = tuple(",".join(str(w) for w in weights) for weights in papers.sessions()["table2_weights"])
# Around the best of Table 2, (5,1,1,1): more and less weight on MM, and on each other stage.
SWEEP = tuple(f"{a},1,1,1" for a in (1, 2, 3, 5, 8, 10, 20, 40)) + \
    tuple(f"5,1,{b},1" for b in (2, 3)) + ("5,2,1,1", "5,1,1,2", "8,1,3,1", "8,1,2,1")
SCALES = {"full": {"seeds": (1, 2, 3, 4, 5), "clients": (15, 20, 25)},
          "quick": {"seeds": (1, 2), "clients": (15, 20, 25)}}


def simulate(clients: int, seed: int) -> list[dict]:
    """Every policy of the study at one client count and seed."""
    argv = [str(engine_path()), "stages", "--json", "--clients", str(clients), "--seed", str(seed),
            "--policy", "rr,wfs,dwfs,fifo,edf"]
    for weights in dict.fromkeys(TABLE2 + SWEEP):
        argv += ["--weights", weights]
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    rows = []
    for line in out.splitlines():
        row = json.loads(line)
        by_stage = row.pop("completed_by_stage")
        # One class (every request's timeout 20): its counts are the totals.
        row.pop("completed_by_class"), row.pop("timed_out_by_class")
        rows.append({**row, **{f"completed_{s}": n for s, n in zip(STAGES, by_stage)}})
    return rows


def summarize(study: pd.DataFrame) -> dict:
    """Per client count: DWFS against the best static assignment (rr or wfs) of the sweep."""
    summary = {}
    for clients, group in study.groupby("clients"):
        means = group.groupby(["policy", "weights"]).mean(numeric_only=True)
        dwfs = means.loc[("dwfs", "-")]
        statics = means.loc[["rr", "wfs"]]
        best_key = statics["productivity"].idxmax()
        best = statics.loc[best_key]
        per_seed = group.pivot_table(index="seed", columns=["policy", "weights"], values="productivity")
        best_static_per_seed = per_seed[[c for c in per_seed.columns if c[0] in ("rr", "wfs")]].max(axis=1)
        fewest_timeouts = statics["timed_out"].min()
        completed = best[[f"completed_{s}" for s in STAGES]]
        summary[int(clients)] = {
            "seeds": int(group["seed"].nunique()),
            "dwfs_productivity": float(dwfs["productivity"]),
            "dwfs_timed_out": float(dwfs["timed_out"]),
            "fifo_productivity": float(means.loc[("fifo", "-")]["productivity"]),
            "best_static": f"{best_key[0]} ({best_key[1]})",
            "best_static_productivity": float(best["productivity"]),
            "best_static_timed_out": float(best["timed_out"]),
            "dwfs_over_best_static": float(dwfs["productivity"] / best["productivity"]),
            "seeds_dwfs_at_least_best_static": int((per_seed[("dwfs", "-")] >= best_static_per_seed).sum()),
            "best_table2": str(means.loc["rr"].loc[list(TABLE2)]["productivity"].idxmax()),
            "dwfs_over_best_table2": float(dwfs["productivity"] / means.loc["rr"].loc[list(TABLE2)]["productivity"].max()),
            "dwfs_timed_out_over_fewest_static": float(dwfs["timed_out"] / fewest_timeouts),
            "best_static_mm_share_of_completions": float(completed.iloc[0] / completed.sum()),
            "dwfs_mm_share_of_completions": float(dwfs["completed_MM"] / dwfs[[f"completed_{s}" for s in STAGES]].sum()),
        }
    return summary


def figure(study: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    clients = sorted(study["clients"].unique())
    fig, axes = plt.subplots(1, len(clients), figsize=(4.2 * len(clients), 3.4), sharey=True)
    mm_only = study[study["weights"].str.fullmatch(r"\d+,1,1,1")].copy()
    mm_only["mm_weight"] = mm_only["weights"].str.split(",").str[0].astype(float)
    for ax, n in zip(axes, clients):
        for policy, style in (("rr", "o-"), ("wfs", "s-")):
            line = mm_only[(mm_only["clients"] == n) & (mm_only["policy"] == policy)].groupby("mm_weight")["productivity"].mean()
            ax.plot(line.index, line.values, style, label=f"{policy} (w,1,1,1)")
        for policy, color in (("dwfs", "C3"), ("fifo", "C7")):
            value = study[(study["clients"] == n) & (study["policy"] == policy)]["productivity"].mean()
            ax.axhline(value, color=color, linestyle="--", label=policy)
        ax.set_xscale("log")
        ax.set_title(f"{n} clients")
        ax.set_xlabel("weight of MM")
    axes[0].set_ylabel("productivity (completed - timed out)")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    args = command_args(__doc__, "study.csv, table2.csv, summary.json", "two seeds instead of five", argv)
    scale = SCALES["quick" if args.quick else "full"]
    rows = []
    for clients in scale["clients"]:
        for seed in scale["seeds"]:
            rows.extend(simulate(clients, seed))
    study = pd.DataFrame(rows)
    args.out.mkdir(parents=True, exist_ok=True)
    study.to_csv(args.out / "study.csv", index=False)
    table2 = study[(study["clients"] == 20) & (study["policy"] == "rr") & study["weights"].isin(TABLE2)]
    table2.groupby("weights", sort=False)[["completed", "timed_out", "productivity"]].mean() \
        .reindex(list(TABLE2)).to_csv(args.out / "table2.csv")
    (args.out / "summary.json").write_text(json.dumps(summarize(study), indent=2) + "\n")
    figure(study, args.out / "dwfs-vs-static.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
