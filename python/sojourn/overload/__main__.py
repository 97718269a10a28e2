"""``python -m sojourn.overload publish RESULT_DIR... | doc`` (see :mod:`sojourn.overload`)."""

from __future__ import annotations

import argparse
import sys

from sojourn.overload.publish import publish
from sojourn.overload import doc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sojourn.overload", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    publishing = commands.add_parser("publish", help="derive and publish the doc's numbers of result directories")
    publishing.add_argument("results", nargs="+", help="results/<name> of an overload-control spec")
    commands.add_parser("doc", help="write docs/overload-control.md from the published numbers")
    args = parser.parse_args(argv)
    try:
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
