"""``sojourn report RESULTS``: build the self-contained report.html of an experiment."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(parser: argparse.ArgumentParser) -> None:
    parser.description = ("Build RESULTS/report.html (one self-contained file, figures inline, readable offline) "
                          "from an experiment's saved results, e.g. results/demo.")
    parser.add_argument("results", type=Path, help="an experiment's results directory (results/<name>)")
    parser.add_argument("--baseline", help="run the ratios are relative to (default: the spec's baseline, else the first run)")
    parser.add_argument("--export-figures", type=Path, metavar="DIR", help="also write every figure as a PNG file into DIR")
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from sojourn.report.html import build_report

    try:
        path = build_report(args.results, baseline=args.baseline, export_dir=args.export_figures)
    except FileNotFoundError as err:
        print(f"sojourn report: {err}")
        return 2
    print(path)
    return 0
