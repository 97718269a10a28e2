"""``sojourn plan``: session-based capacity planning (003 §3).

Reads a plan file (TOML; default: the bundled 003 example) and prints the
admissible request arrival rate of every class at every stage (the traffic
conformation inequality, 003 eq. 3), its bounds, the session generation rate of
each class (eq. 4) and, for infeasible inputs, what fails and why. Exit status:
0 feasible, 1 infeasible, 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from sojourn.plan.model import Plan, plan
from sojourn.plan.spec import EXAMPLE, PlanSpecError, load_spec


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "spec",
        nargs="?",
        type=Path,
        help=f"plan file (TOML): stages, processing_times, transitions, request_session_ratio, cpus, "
        f"[[classes]] name + delay_bound, highest priority first (default: the 003 example, {EXAMPLE.name})",
    )
    parser.add_argument("--json", action="store_true", help="print the plan as JSON")
    parser.add_argument("--show-example", action="store_true", help="print the bundled example plan file and exit")
    parser.epilog = "Example: sojourn plan python/sojourn/plan/examples/003.toml --json"
    parser.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    if args.show_example:
        sys.stdout.write(EXAMPLE.read_text())
        return 0
    path = args.spec or EXAMPLE
    try:
        result = plan(load_spec(path))
    except PlanSpecError as err:
        print(f"sojourn plan: {err}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        render(result, str(path))
    return 0 if result.feasible else 1


def render(result: Plan, source: str) -> None:
    console = Console()
    spec = result.spec
    table = Table(title=f"Admissible arrival rates (003 eq. 3) for {source}")
    table.add_column("class")
    for stage in spec.stages:
        table.add_column(stage, justify="right")
    table.add_column("sessions (eq. 4)", justify="right")
    for p, name in enumerate(spec.classes):
        cells = [
            f"{result.arrival_rates[p, i]:.4g} [dim]≤ {result.upper[p, i]:.4g}[/]" for i in range(len(spec.stages))
        ]
        table.add_row(name, *cells, f"{result.session_rates[p]:.4g}")
    console.print(table)
    console.print(f"CPU demand: {result.utilization:.3f} of {spec.cpus:g} CPU(s)")
    if result.feasible:
        console.print("[green]feasible[/]: every class meets its delay bound at these rates")
    else:
        console.print("[red]infeasible[/]:")
        for problem in result.problems:
            console.print(f"  - {problem}", highlight=False)
