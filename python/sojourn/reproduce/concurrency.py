"""How many testbeds `sojourn reproduce` runs at once: what bench/concurrency measured safe
(docs/reproduction/concurrency/*.json, one file per comparison of solo against N at once)."""

from __future__ import annotations

import json
from pathlib import Path

from sojourn.reproduce import DOCS, REPO


def kind(experiment) -> tuple[bool, bool]:
    """The kind of testbed a count is measured for: with the WAN emulator or without, and
    open-loop or a closed loop of users (whose demand falls as responses slow, so the two
    answer a neighbour differently)."""
    return (any(run.plan.testbed.uses_emulator for run in experiment.runs),
            any(run.config["workload"]["mode"] == "closed" for run in experiment.runs))


def _safe(runs: dict) -> bool:
    """A count of one comparison is safe when every run's mean lay inside its solo interval
    and every repetition was complete and valid (bench/concurrency/compare.py)."""
    return all(row["inside_solo_interval"] and row["valid"] == row["complete"] == row["n"] for row in runs.values())


def measured_concurrency(experiment, docs: Path = DOCS) -> int:
    """The most testbeds at once measured to change nothing for the kind of testbed the
    experiment's runs use (:func:`kind`): the largest N such that every
    count from 2 to N was measured (bench/concurrency, docs/reproduction/concurrency/*.json,
    each against the solo repetitions of its own session) and found safe every time; 1
    where nothing was measured."""
    from sojourn.runner.spec import SpecError, load_spec

    its_kind = kind(experiment)
    safe: dict[int, bool] = {}
    for path in sorted((docs / "concurrency").glob("*.json")):
        try:
            data = json.loads(path.read_text())
            if kind(load_spec(REPO / data["spec"])) != its_kind:
                continue
            for count, runs in data["counts"].items():
                safe[int(count)] = safe.get(int(count), True) and _safe(runs)
        except (OSError, KeyError, TypeError, ValueError, SpecError):
            continue
    testbeds = 1
    while safe.get(testbeds + 1):
        testbeds += 1
    return testbeds
