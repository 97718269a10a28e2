"""The ``sojourn`` command: one subcommand per concern, each in its own module.

Every module named in ``COMMANDS`` provides ``register(parser)``, which adds its
arguments (and sub-subcommands) to ``parser`` and sets ``func`` to the handler
that takes the parsed arguments and returns an exit status. Modules are imported
only when their command runs, so ``sojourn --help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

COMMANDS: dict[str, tuple[str, str]] = {
    "trace": ("sojourn.workloads.cli", "generate, shape, import and describe request traces; make docroots"),
    "testbed": ("sojourn.testbed.cli", "bring the network testbed up or down, or show its state"),
    "run": ("sojourn.runner.cli", "run an experiment spec end to end"),
    "report": ("sojourn.report.cli", "build the self-contained HTML report of an experiment's results"),
    "theory": ("sojourn.theory.cli", "queueing formulas and the figures of 004 §6"),
    "plan": ("sojourn.plan.cli", "session-based capacity planning (003 §3)"),
    "reproduce": ("sojourn.reproduce.cli", "run a paper's experiments and write docs/reproduction/<paper>.md"),
}


def build_parser(argv: list[str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sojourn", description="Web servers under overload: workloads, testbed, experiments, reports.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    chosen = next((a for a in argv if not a.startswith("-")), None)
    for name, (module, help_text) in COMMANDS.items():
        cmd = sub.add_parser(name, help=help_text, description=help_text)
        if name == chosen:
            importlib.import_module(module).register(cmd)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(argv).parse_args(argv)
    try:
        status = int(args.func(args) or 0)
        sys.stdout.flush()
        return status
    except KeyboardInterrupt:
        print("sojourn: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `sojourn ... | head`: the reader left. End quietly, as Unix filters do (and keep
        # Python from complaining again when it flushes stdout at exit).
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
