"""Reproducing the papers: ``sojourn reproduce PAPER [--quick] [--only NAME]``.

A paper is a module named in :data:`PAPERS` that defines ``PAPER = Paper(...)``:

- ``experiments``: :class:`Entry` items. An entry runs a spec (``experiments/<paper>/<name>.toml``,
  through the runner, at its ``[quick]`` scale with ``--quick``) or a command (an argv whose
  ``{out}`` is replaced by the entry's result directory, ``{python}`` by this Python and
  ``{quick}`` by ``--quick`` or nothing).
- ``claims(ctx)``: the doc's rows (:class:`Row`), computed only from *published* results
  through :class:`Context`, never from memory or constants.

The command's stages, each rerunnable alone (``--doc-only`` does the last):

1. run: results/reproduce/<paper>[-quick]/<name>/ (resume as ``sojourn run`` does);
2. publish: docs/reproduction/<paper>/<name>/ gets what the numbers come from and is small
   enough to keep in the repository: the spec as run, every repetition's run.json,
   status.json and summary.json, the report's figures as PNG (figures.json names them) and
   meta.json (scale, date, wall time);
3. doc: docs/reproduction/<paper>.md and <paper>.csv from every published entry. The CSV has
   the columns of :data:`CSV_COLUMNS`, one format for every paper.
"""

from __future__ import annotations

import importlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[3]
DOCS = REPO / "docs" / "reproduction"

# Paper tag -> module defining PAPER; an explicit table (no lookup by globals()).
PAPERS: dict[str, str] = {
    "000": "sojourn.reproduce.paper000",
    "001": "sojourn.reproduce.paper001",
    "002": "sojourn.reproduce.paper002",
    "003": "sojourn.reproduce.paper003",
    "004": "sojourn.reproduce.paper004",
}

CSV_COLUMNS = ("paper", "experiment", "claim", "paper_value", "ours", "ratio", "same_direction", "within_2x",
               "repetitions", "result_path")


@dataclass(frozen=True)
class Entry:
    """One experiment of a paper: a spec run by the runner, or a command."""

    name: str
    title: str
    spec: str = ""  # path relative to the repository, e.g. experiments/000/baseline.toml
    command: tuple[str, ...] = ()
    # Files a command writes into {out} that are published (globs); specs publish their summaries.
    publish: tuple[str, ...] = ("*.json", "*.csv", "*.png")
    # Rough wall time of one quick run in seconds, for the progress line and the plan.
    quick_s: float = 60.0

    def __post_init__(self) -> None:
        if bool(self.spec) == bool(self.command):
            raise ValueError(f"entry {self.name}: give exactly one of spec or command")


@dataclass
class Row:
    """One claim of the paper next to ours.

    ``reference`` is the value that separates the two directions (1.0 for a ratio such as
    FAIR/SRPT: the paper's value is on one side of it and ours should be on the same side);
    None for an absolute value, where direction does not apply. ``bound`` ('>=' or '<=')
    marks a claim that is a bound ("at least 2.5x"): the verdict is then whether ours meets it.
    """

    experiment: str
    claim: str
    paper_value: float
    ours: float | None
    repetitions: int
    result_path: str
    unit: str = ""
    reference: float | None = 1.0
    bound: str = ""
    ci: tuple[float, float] | None = None
    paper_text: str = ""
    note: str = ""

    @property
    def ratio(self) -> float | None:
        if self.ours is None or not self.paper_value or _nan(self.ours):
            return None
        return self.ours / self.paper_value

    @property
    def same_direction(self) -> bool | None:
        if self.reference is None or self.ours is None or _nan(self.ours):
            return None
        return (self.paper_value - self.reference) * (self.ours - self.reference) > 0 or \
            self.paper_value == self.ours == self.reference

    @property
    def within_2x(self) -> bool | None:
        ratio = self.ratio
        return None if ratio is None else 0.5 <= ratio <= 2.0

    @property
    def meets_bound(self) -> bool | None:
        if not self.bound or self.ours is None or _nan(self.ours):
            return None
        return self.ours >= self.paper_value if self.bound == ">=" else self.ours <= self.paper_value

    def verdict(self) -> str:
        if self.ours is None or _nan(self.ours):
            return "no result"
        parts = []
        if self.bound:
            parts.append("bound met" if self.meets_bound else "bound missed")
        if self.same_direction is not None:
            parts.append("same direction" if self.same_direction else "opposite direction")
        if self.within_2x is not None:
            parts.append("within 2x" if self.within_2x else "beyond 2x")
        elif self.ours == self.paper_value:
            parts.append("equal")
        return ", ".join(parts) or "—"


# Keys naming the rows of a list in a summary (sessions.classes by "name", sessions.anatomy by "stage").
ROW_KEYS = ("name", "stage")


def _dotted(summary: dict, metric: str):
    """``summary[a][b]`` for metric "a.b" (e.g. by_group.far.response_mean), None if absent.
    In a list of rows, a part picks the row whose name or stage it is
    (sessions.classes.gold.response_mean_s)."""
    node = summary
    for part in metric.split("."):
        if isinstance(node, list):
            node = next((row for row in node if isinstance(row, dict)
                         and any(str(row.get(key)) == part for key in ROW_KEYS)), None)
            if node is None:
                return None
            continue
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _nan(value) -> bool:
    return isinstance(value, float) and math.isnan(value)


@dataclass
class Paper:
    tag: str
    title: str
    experiments: list[Entry]
    claims: Callable[["Context"], list[Row]]
    intro: str = ""
    # Markdown sections after the tables: readings, measured reasons, kernel differences.
    notes: Callable[["Context"], str] = field(default=lambda ctx: "")

    def entry(self, name: str) -> Entry:
        for entry in self.experiments:
            if entry.name == name:
                return entry
        raise KeyError(f"paper {self.tag} has no experiment {name!r}; it has: "
                       f"{', '.join(e.name for e in self.experiments)}")


def load_paper(tag: str) -> Paper:
    if tag not in PAPERS:
        raise KeyError(f"no paper {tag!r}; accepted: {', '.join(PAPERS)}")
    return importlib.import_module(PAPERS[tag]).PAPER


class Context:
    """What a paper's claims may read: the published results of its experiments."""

    def __init__(self, paper: Paper, docs: Path = DOCS, cited: Path | None = None):
        """``docs``: where the published results are read from; ``cited``: the directory
        the CSV's result_path names (default ``docs``; a copy elsewhere can cite the original)."""
        self.paper = paper
        self.docs = Path(docs)
        self.cited = Path(cited) if cited is not None else self.docs

    def directory(self, name: str) -> Path:
        return self.docs / self.paper.tag / name

    def result_path(self, name: str) -> str:
        """The published directory as the CSV names it (relative to the repository)."""
        path = (self.cited / self.paper.tag / name).resolve()
        try:
            return str(path.relative_to(REPO))
        except ValueError:
            return str(path)

    def has(self, name: str) -> bool:
        return (self.directory(name) / "meta.json").is_file()

    def meta(self, name: str) -> dict:
        return json.loads((self.directory(name) / "meta.json").read_text())

    def reps(self, name: str):
        from sojourn.analysis.results import load_experiment
        return load_experiment(self.directory(name))

    def table(self, name: str):
        """One row per run: means over repetitions with 90% intervals (run_table)."""
        from sojourn.analysis.results import run_table
        return run_table(self.reps(name)).set_index("run")

    def value(self, name: str, run: str, metric: str) -> tuple[float, tuple[float, float] | None, int]:
        """Mean of ``metric`` over the run's repetitions, its 90% interval (None for one
        repetition) and the repetition count."""
        from sojourn.analysis.sweeps import confidence_interval
        values = [_dotted(r.summary, metric) for r in self.reps(name) if r.run == run and r.complete]
        values = [float(v) for v in values if isinstance(v, (int, float))]
        if not values:
            return math.nan, None, 0
        mean, low, high = confidence_interval(values)
        return mean, (None if len(values) < 2 else (low, high)), len(values)

    def sweep_ratios(self, name: str, metric: str = "response_mean", variants: tuple[str, str] = ("fair", "srpt")) -> dict:
        """Sweep value -> (first variant's ``metric`` / second's, first's, second's,
        repetitions): means over the complete repetitions of the runs <first>-<point> and
        <second>-<point> (e.g. FAIR / SRPT per RTT)."""
        values: dict = {}
        for rep in self.reps(name):
            value = _dotted(rep.summary, metric)
            if rep.complete and rep.variant in variants and isinstance(value, (int, float)):
                values.setdefault(rep.sweep_value, {}).setdefault(rep.variant, []).append(float(value))
        out = {}
        first, second = variants
        for point, by_variant in values.items():
            if first in by_variant and second in by_variant:
                a = sum(by_variant[first]) / len(by_variant[first])
                b = sum(by_variant[second]) / len(by_variant[second])
                out[point] = (a / b if b else math.nan, a, b, min(len(by_variant[first]), len(by_variant[second])))
        return out

    def figures(self, name: str) -> list[tuple[str, str]]:
        """(file relative to docs/reproduction, caption) of an entry's published figures."""
        index = self.directory(name) / "figures.json"
        if not index.is_file():
            return []
        return [(f"{self.paper.tag}/{name}/{f['file']}", f["caption"]) for f in json.loads(index.read_text())]
