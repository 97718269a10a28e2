"""``python -m sojourn.overload list | run NAME | publish RESULT_DIR... | doc`` (see :mod:`sojourn.overload`).

Example, the transient set at the paper's time scale, resumed where the last checkout
stopped and ended whole within two hours:

    python -m sojourn.overload run overload-control-transient --stop-after 120
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from sojourn.argtypes import positive_int
from sojourn.overload import EXPERIMENTS, REPO
from sojourn.overload.publish import publish
from sojourn.overload import doc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sojourn.overload", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    running = commands.add_parser(
        "run", help="run what is missing of an experiment (what docs/overload-control/ holds is kept), publish it, "
                    "write the doc")
    running.add_argument("name", choices=[e.name for e in EXPERIMENTS], help="the experiment (its spec's name)")
    running.add_argument("--quick", action="store_true", help="at the spec's [quick] scale (results/<name>-quick/)")
    running.add_argument("--concurrency", type=positive_int, default=None, metavar="N",
                         help="testbeds at once (default: the most measured safe for the experiment's kind of "
                              "testbed; CPU-bound experiments run one at a time)")
    running.add_argument("--results", default=str(REPO / "results"), help="results root (default: %(default)s)")
    running.add_argument("--prefix", default="sjovl", help="testbed namespace prefix (default: %(default)s)")
    from sojourn.runner.cli import add_stop_after, stop_time

    add_stop_after(running)
    listing = commands.add_parser("list", help="each experiment's size, what is published of it and the hours to go")
    listing.add_argument("--quick", action="store_true", help="at the specs' [quick] scale")
    publishing = commands.add_parser("publish", help="derive and publish the doc's numbers of result directories")
    publishing.add_argument("results", nargs="+", help="results/<name> of an overload-control spec")
    commands.add_parser("doc", help="write docs/overload-control.md from the published numbers")
    args = parser.parse_args(argv)
    try:
        if args.command == "run":
            if os.geteuid() != 0:
                print("python -m sojourn.overload run: needs root to create the testbed's network namespaces",
                      file=sys.stderr)
                return 1
            from rich.console import Console

            from sojourn.overload.campaign import run_and_publish

            return run_and_publish(Console(), args.name, Path(args.results), args.quick, args.concurrency,
                                   stop_time(args.stop_after), args.prefix)
        if args.command == "list":
            from sojourn.overload.campaign import plan

            for line in plan(args.quick):
                print(line)
            return 0
        if args.command == "publish":
            for directory in args.results:
                print(f"published {publish(directory)}")
        doc.build()
        print(f"wrote {doc.DOC}")
    except (ValueError, FileNotFoundError) as error:
        print(f"python -m sojourn.overload: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
