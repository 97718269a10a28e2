"""Measured against ideal SRPT, per run of an experiment (docs/analysis.md):

    .venv/bin/python bench/ideal/against_ideal.py results/srpt-ideal [--policy srpt]

For each repetition of each run: the measured / ideal mean response time per size bin (000 §3
cutoffs) and where the excess lies (decompose.against_ideal), from the saved records and
ideal.parquet only; for runs with several repetitions, the ratio over all requests in each and
its mean and range. Writes bench/out/<experiment>-against-ideal.json.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from each_run import print_spread, repetitions, write_out
from sojourn.analysis.decompose import against_ideal


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", type=Path, help="an experiment's results directory")
    parser.add_argument("--policy", default="srpt", choices=["srpt", "ps"], help="ideal schedule to compare with")
    args = parser.parse_args()
    out, overall = {}, {}
    for rep, key in repetitions(args.results):
        table = against_ideal(rep.requests(), rep.ideal(), policy=args.policy)
        out[key] = table.to_dict(orient="records")
        overall.setdefault(rep.run, []).append(float(table.loc[table["size_bin"] == "all", "ratio"].iloc[0]))
        print(f"\n{key}: measured / ideal {args.policy}")
        print(table[["size_bin", "requests", "measured_mean_s", "ideal_mean_s", "ratio", "handshake_excess_share",
                     "to_first_byte_excess_share", "transfer_excess_share"]].to_string(index=False, float_format="%.4g"))
    print()
    spread = print_spread(f"measured / ideal {args.policy} over all requests", overall)
    if spread:
        out["repetitions"] = spread
    write_out(args.results, "against-ideal", out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
