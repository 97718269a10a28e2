"""``sojourn theory``: M/G/1 formulas and the figures of 004 §6 and 000 §6.

    sojourn theory response --dist bpareto --alpha 1.1 --mean 3000 --rho 0.9
    sojourn theory fig7 --out results/theory
    sojourn theory fig8 --out results/theory
    sojourn theory transient --out results/theory [--workloads W1,W4] [--duration 1800]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from sojourn.argtypes import number, positive
from sojourn.theory import figures
from sojourn.theory.formulas import BoundedPareto, Exponential, Srpt, Surge, fcfs_response, ps_response

DISTRIBUTIONS = ("exp", "bpareto", "surge")


def distribution(args: argparse.Namespace):
    """The size distribution named by --dist and its parameters."""
    if args.dist == "exp":
        return Exponential(args.mean)
    if args.dist == "bpareto":
        return BoundedPareto(args.k, args.p, args.alpha) if args.k else BoundedPareto.with_mean(args.mean, args.alpha, args.p)
    return Surge()


def response_table(dist, rho: float, percentiles) -> pd.DataFrame:
    """Mean response time and slowdown under PS, FCFS and SRPT at size percentiles."""
    sizes = dist.ppf(np.asarray(percentiles, float))
    srpt = Srpt(dist, rho).response(sizes)
    return pd.DataFrame({
        "percentile": percentiles, "size": sizes,
        "ps_response": ps_response(dist, rho, sizes), "fcfs_response": fcfs_response(dist, rho, sizes),
        "srpt_response": srpt, "srpt_slowdown": srpt / sizes, "ps_slowdown": 1 / (1 - rho),
    })


def _response(args) -> int:
    dist = distribution(args)
    percentiles = [float(p) for p in args.percentiles.split(",")]
    table = response_table(dist, args.rho, percentiles)
    srpt = Srpt(dist, args.rho)
    print(table.to_string(index=False, float_format=lambda v: f"{v:.6g}"))
    print(f"mean size {dist.mean:.6g}; mean response PS {dist.mean / (1 - args.rho):.6g}, "
          f"FCFS {float(fcfs_response(dist, args.rho, dist.mean)):.6g}, SRPT {srpt.mean_response():.6g}; "
          f"mean slowdown SRPT {srpt.mean_slowdown():.6g}, PS {1 / (1 - args.rho):.6g}")
    return 0


def _fig7(args) -> int:
    table, checks = figures.fig7(args.out, rho=args.rho, simulate_jobs=args.simulate)
    print(json.dumps(checks, indent=2))
    print(f"wrote {args.out / 'fig7.png'} and {args.out / 'fig7.csv'}")
    return 0


def _fig8(args) -> int:
    table = figures.fig8(args.out, rho=args.rho)
    print(table.iloc[[49, 89, 94, 98]].to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print(f"wrote {args.out / 'fig8.png'} and {args.out / 'fig8.csv'}")
    return 0


def _transient(args) -> int:
    names = tuple(w.strip().upper() for w in args.workloads.split(",")) if args.workloads else tuple(figures.TRANSIENT)
    unknown = [w for w in names if w not in figures.TRANSIENT]
    if unknown:
        print(f"sojourn theory transient: unknown workload(s) {', '.join(unknown)}; accepted: {', '.join(figures.TRANSIENT)}",
              file=sys.stderr)
        return 2
    table = figures.transient(args.out, names, duration_s=args.duration, link_bps=args.link, seed=args.seed)
    columns = ["workload", "mean_response_s_ps", "mean_response_s_srpt", "mean_response_ratio_ps_over_srpt",
               "largest_1pct_ratio_srpt_over_ps", "peak_in_system_ps", "peak_in_system_srpt",
               "mean_recovery_s_ps", "mean_recovery_s_srpt"]
    print(table[columns].to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print(f"wrote {args.out / 'transient.png'} and {args.out / 'transient.csv'}")
    return 0


# A load below saturation: the M/G/1 formulas hold for 0 < rho < 1.
LOAD = number(above=0, below=1, what="a load")


def register(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="theory_command", metavar="WHAT", required=True)

    response = sub.add_parser("response", help="M/G/1 PS, FCFS and SRPT mean response time by size percentile",
                              description="M/G/1 PS, FCFS and SRPT (004 §6.1) mean response time by size percentile; "
                                          "time in units of service (size / link bytes per second).")
    response.add_argument("--dist", choices=DISTRIBUTIONS, required=True, help="size distribution")
    response.add_argument("--mean", type=positive, default=3000.0, help="mean size (exp; bpareto without --k)")
    response.add_argument("--alpha", type=positive, default=1.1, help="bounded Pareto tail index")
    response.add_argument("--k", type=positive, help="bounded Pareto lower bound")
    response.add_argument("--p", type=positive, default=1e10, help="bounded Pareto upper bound")
    response.add_argument("--rho", type=LOAD, required=True, help="load, 0 < rho < 1")
    response.add_argument("--percentiles", default="0.1,0.5,0.9,0.95,0.99,0.999", help="comma-separated size percentiles")
    response.set_defaults(func=_response)

    for name, handler, help_text in (("fig7", _fig7, "004 Fig. 7: SRPT slowdown vs size percentile, exponential vs BP 1.1"),
                                     ("fig8", _fig8, "004 Fig. 8: SRPT slowdown vs size percentile, BP alpha 0.5-1.9")):
        fig = sub.add_parser(name, help=help_text, description=help_text)
        fig.add_argument("--out", type=Path, default=Path("results/theory"), help="output directory")
        fig.add_argument("--rho", type=LOAD, default=0.9, help="load (004 uses 0.9)")
        if name == "fig7":
            fig.add_argument("--simulate", type=number(int, at_least=0), default=0, metavar="JOBS",
                             help="also simulate SRPT with this many jobs and draw the mean slowdown per size bin")
        fig.set_defaults(func=handler)

    transient = sub.add_parser("transient", help="000 §6: W1-W10 simulated under PS and SRPT",
                               description="000 §6: simulate the transient workloads of 000 Table 1 under PS and SRPT "
                                           "on the same arrivals; table, figure and CSV.")
    transient.add_argument("--out", type=Path, default=Path("results/theory"), help="output directory")
    transient.add_argument("--workloads", help="comma-separated subset of W1..W10 (default all)")
    transient.add_argument("--duration", type=positive, default=1800.0, help="seconds simulated per workload (000: 30 min)")
    transient.add_argument("--link", type=positive, default=10e6, help="link rate in bits/s")
    transient.add_argument("--seed", type=int, default=1, help="seed of the arrivals and sizes")
    transient.set_defaults(func=_transient)
