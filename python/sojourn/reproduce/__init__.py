"""Reproducing the papers: ``sojourn reproduce PAPER [--quick] [--only NAME]``.

A paper is a module named in :data:`PAPERS` that defines ``PAPER = Paper(...)``:

- ``experiments``: :class:`Entry` items. An entry runs a spec (``experiments/<paper>/<name>.toml``,
  through the runner, at its ``[quick]`` scale with ``--quick``) or a command (an argv whose
  ``{out}`` is replaced by the entry's result directory, ``{python}`` by this Python and
  ``{quick}`` by ``--quick`` or nothing).
- ``claims(ctx)``: the doc's rows (:class:`sojourn.reproduce.rows.Row`): the paper's claims
  written from its text, ours computed only from *published* results through
  :class:`Context`, never from memory or constants.

The command's stages, each rerunnable alone (``--doc-only`` does the last):

1. run: results/reproduce/<paper>[-quick]/<name>/ (resume as ``sojourn run`` does);
2. publish: docs/reproduction/<paper>/<name>/ gets what the numbers come from and is small
   enough to keep in the repository: the spec as run, every repetition's run.json,
   status.json and summary.json, the report's figures as PNG (figures.json names them) and
   meta.json (--quick or not, publishing date);
3. doc: docs/reproduction/<paper>.md and <paper>.csv from every published entry, figures of
   the paper's printed values beside ours, and docs/reproduction/README.md's summary over
   all papers. The CSV has the columns of :data:`CSV_COLUMNS`, one format for every paper
   (docs/reproduction/README.md).
"""

from __future__ import annotations

import importlib
import json
import math
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Callable

from sojourn.reproduce.rows import Claim, Measure, Row, Why

REPO = Path(__file__).resolve().parents[3]
DOCS = REPO / "docs" / "reproduction"
# Written into a repetition taken from another experiment's publication, and published with it:
# the experiment, run and repetition it was measured as (sojourn.reproduce.publish.shared_reps).
SHARED = "shared.json"

# Paper tag -> module defining PAPER; an explicit table (no lookup by globals()).
PAPERS: dict[str, str] = {
    "000": "sojourn.reproduce.paper000",
    "001": "sojourn.reproduce.paper001",
    "002": "sojourn.reproduce.paper002",
    "003": "sojourn.reproduce.paper003",
    "004": "sojourn.reproduce.paper004",
}

CSV_COLUMNS = ("paper", "experiment", "claim", "kind", "paper_value", "bound", "ours", "ci_lo", "ci_hi", "ratio",
               "verdict", "reason", "scale", "repetitions", "result_path", "why")

# A repetition count at or above which a full-scale (not --quick) result is at the paper's scale.
PAPER_REPETITIONS = 3


@dataclass(frozen=True)
class TimeScale:
    """The paper's time scale for an experiment's points: the least value of each workload key
    (seconds) a run must have had to be at it, and where the paper gives it."""

    least: tuple[tuple[str, float], ...]  # (workload key, seconds), e.g. (("level_s", 630.0),)
    source: str  # the paper's timing in words, with its section

    def short_of(self, workload: dict) -> list[tuple[str, float, float]]:
        """The keys ``workload`` (a run's resolved workload) ran below the paper's: (key, ran,
        the paper's)."""
        return [(key, float(workload.get(key) or 0), least) for key, least in self.least
                if float(workload.get(key) or 0) < least]


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
    # False for a study of ours that the paper did not run (a set-up ablation, a scale check).
    of_paper: bool = True
    # An exact computation (a formula): the same at any scale, with nothing to repeat.
    exact: bool = False
    # The most testbeds at once its runs were seen to hold, where fewer than the count measured
    # for their kind of testbed (bench/concurrency); None: that count.
    most_testbeds: int | None = None
    # The paper's time scale for its points, where its runs must be checked against one besides
    # workload.time_compression (a capacity probe's levels, a fixed-length point); None: none.
    time_scale: TimeScale | None = None

    def __post_init__(self) -> None:
        if bool(self.spec) == bool(self.command):
            raise ValueError(f"entry {self.name}: give exactly one of spec or command")


def command_args(doc: str, out: str, quick: str, argv: list[str] | None = None):
    """The options of a command entry's program (``python -m sojourn.reproduce.<module>``):
    ``--out`` its ``{out}`` (``out`` says what is written there) and ``--quick`` its ``{quick}``
    (``quick`` says what it does less). A command that fails is not published (publish.run)."""
    import argparse

    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help=f"directory for {out}")
    parser.add_argument("--quick", action="store_true", help=quick)
    return parser.parse_args(argv)


# Keys naming the rows of a list in a summary (sessions.classes by "name", sessions.anatomy by
# "stage", a capacity probe's levels by "users").
ROW_KEYS = ("name", "stage", "users")


def _dotted(summary: dict, metric: str):
    """``summary[a][b]`` for metric "a.b" (e.g. by_group.far.response_mean), None if absent.
    In a list of rows, a part picks the row whose name or stage it is
    (sessions.classes.gold.response_mean_s, levels.1020.server.events_per_wait_mean)."""
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


def summarize(values: list[float], runs: tuple = (), absent: str = "") -> Measure:
    """Mean of ``values`` with its 90% t-interval (002 §3.5) when there are several."""
    from sojourn.analysis.sweeps import confidence_interval

    values = [float(v) for v in values if v is not None and not math.isnan(float(v))]
    if not values:
        return Measure(runs=runs, absent=absent)
    mean, low, high = confidence_interval(values)
    return Measure(mean, None if len(values) < 2 else (low, high), len(values), runs)


def per_rep_quotient(top: dict[int, float], bottom: dict[int, float]) -> dict[int, float]:
    """top / bottom for each repetition number both have (and a bottom that is not 0)."""
    return {rep: top[rep] / bottom[rep] for rep in sorted(set(top) & set(bottom)) if bottom[rep]}


def past_one_in_every_repetition(ratios: dict[int, float]) -> str | None:
    """Why a ratio above 1 in every repetition still misses a strict bound "> 1", in words to
    follow what grew: the 90% t-interval of a few ratios this spread reaches below 1 (a strict
    bound is met only by a whole interval, :func:`sojourn.reproduce.rows.bound_verdict`).
    None unless there are two or more and every one exceeds 1."""
    if len(ratios) < 2 or not all(r > 1 for r in ratios.values()):
        return None
    return (f"in every repetition ({', '.join(f'{r:.3g}' for r in ratios.values())} times); the 90% t-interval of "
            f"{len(ratios)} ratios this spread reaches below 1")


def quotient(top: dict[int, float], bottom: dict[int, float], runs: tuple = (), absent: str = "") -> Measure:
    """The mean and 90% interval of :func:`per_rep_quotient`."""
    return summarize(list(per_rep_quotient(top, bottom).values()), runs, absent)


@dataclass
class Paper:
    tag: str
    title: str
    experiments: list[Entry]
    claims: Callable[["Context"], list[Row]]
    intro: str = ""
    # Markdown sections after the tables: readings, measured reasons, kernel differences.
    notes: Callable[["Context"], str] = field(default=lambda ctx: "")
    # Figures of the paper's printed values beside ours: (ctx, directory) -> [(file, caption)].
    figures: Callable[["Context", Path], list[tuple[str, str]]] = field(default=lambda ctx, out: [])

    def entry(self, name: str) -> Entry:
        for entry in self.experiments:
            if entry.name == name:
                return entry
        raise KeyError(f"paper {self.tag} has no experiment {name!r}; it has: "
                       f"{', '.join(e.name for e in self.experiments)}")


def rows_of(ctx: "Context", builders: dict[str, Callable[["Context"], list[Row]]]) -> list[Row]:
    """The rows of every experiment that has a builder, in the paper's order; those of a spec
    not run yet are its claims without a result (the table shows what is missing, issue 28:
    "that is a row, not silence"). A command's claims are read from the files it writes, so
    they wait for its first run."""
    rows: list[Row] = []
    for entry in ctx.paper.experiments:
        if entry.name in builders and (entry.spec or ctx.has(entry.name)):
            rows += builders[entry.name](ctx)
    return rows


def load_paper(tag: str) -> Paper:
    if tag not in PAPERS:
        raise KeyError(f"no paper {tag!r}; accepted: {', '.join(PAPERS)}")
    return importlib.import_module(PAPERS[tag]).PAPER


Side = tuple[str, str, str]  # (experiment, run, metric)


class Context:
    """What a paper's claims may read: the published results of its experiments."""

    def __init__(self, paper: Paper, docs: Path = DOCS, cited: Path | None = None):
        """``docs``: where the published results are read from; ``cited``: the directory
        the CSV's result_path names (default ``docs``; a copy elsewhere can cite the original)."""
        self.paper = paper
        self.docs = Path(docs)
        self.cited = Path(cited) if cited is not None else self.docs
        self.reps = cache(self._reps)

    # --- what is published ---------------------------------------------------------------

    def directory(self, name: str) -> Path:
        return self.docs / self.paper.tag / name

    def result_path(self, name: str) -> str:
        """The published directory as the CSV names it (relative to the repository); the
        spec for an experiment not run yet (what a row without a result waits for)."""
        if not self.has(name):
            return self.paper.entry(name).spec
        path = (self.cited / self.paper.tag / name).resolve()
        try:
            return str(path.relative_to(REPO))
        except ValueError:
            return str(path)

    def has(self, name: str) -> bool:
        return (self.directory(name) / "meta.json").is_file()

    def meta(self, name: str) -> dict:
        return json.loads((self.directory(name) / "meta.json").read_text())

    def _reps(self, name: str):
        from sojourn.analysis.results import load_experiment
        if not self.paper.entry(name).spec or not self.has(name):
            return []
        return load_experiment(self.directory(name))

    def complete_reps(self, name: str, run: str | None = None) -> list:
        """The repetitions of ``name`` (of its run ``run`` when given) that completed: one
        the fidelity guard found invalid is published for its record, never used as a result."""
        return [rep for rep in self.reps(name) if rep.complete and (run is None or rep.run == run)]

    def table(self, name: str):
        """One row per run: means over repetitions with 90% intervals (run_table)."""
        from sojourn.analysis.results import run_table
        return run_table(self.reps(name)).set_index("run")

    def figures(self, name: str) -> list[tuple[str, str]]:
        """(file relative to docs/reproduction, caption) of an entry's published figures."""
        index = self.directory(name) / "figures.json"
        if not index.is_file():
            return []
        return [(f"{self.paper.tag}/{name}/{f['file']}", f["caption"]) for f in json.loads(index.read_text())]

    # --- how it ran ------------------------------------------------------------------------

    def repetitions(self, name: str, run: str = "") -> int:
        """Complete repetitions of ``run`` (of the experiment's least repeated run without
        one); a command's count is what it says it repeated (``seeds``), else 1."""
        if not self.paper.entry(name).spec:
            summary = self.directory(name) / "summary.json"
            if summary.is_file():
                seeds = [v.get("seeds") for v in json.loads(summary.read_text()).values() if isinstance(v, dict)]
                if seeds and all(isinstance(s, int) for s in seeds):
                    return min(seeds)
            return 1
        counts: dict[str, int] = {}
        for rep in self.reps(name):
            counts.setdefault(rep.run, 0)
            counts[rep.run] += rep.complete
        return counts.get(run, 0) if run else min(counts.values(), default=0)

    def scale(self, name: str, run: str = "") -> str:
        """``compressed`` when the run (any run of the experiment without one) ran with
        workload.time_compression > 1 or shorter than the entry's TimeScale; ``paper`` when it
        ran at the spec's full scale (not --quick) with at least PAPER_REPETITIONS repetitions,
        or is an exact computation; else ``quick``. Read from the published run.json and
        meta.json."""
        entry = self.paper.entry(name)
        if not self.has(name):
            return "not run"
        if entry.exact:
            return "paper"
        reps = [r for r in self.reps(name) if not run or r.run == run]
        if any(float((r.config.get("workload") or {}).get("time_compression") or 1) > 1 for r in reps):
            return "compressed"
        if self.shorter_than_paper(name, run):
            return "compressed"
        full = self.meta(name).get("scale") == "full"
        return "paper" if full and self.repetitions(name, run) >= PAPER_REPETITIONS else "quick"

    def shorter_than_paper(self, name: str, run: str = "", time_scale: TimeScale | None = None
                           ) -> list[tuple[str, float, float]]:
        """The workload keys the run (any run without one) ran below ``time_scale`` (default:
        the entry's), each once: (key, the least it ran at, the paper's)."""
        time_scale = time_scale or self.paper.entry(name).time_scale
        if time_scale is None:
            return []
        short: dict[str, tuple[float, float]] = {}
        for rep in self.reps(name):
            if run and rep.run != run:
                continue
            for key, ran, least in time_scale.short_of(rep.config.get("workload") or {}):
                short[key] = (min(ran, short.get(key, (ran,))[0]), least)
        return [(key, ran, least) for key, (ran, least) in short.items()]

    def wall_s(self, name: str) -> float:
        """The time the runs took: the sum over repetitions of finished - started
        (status.json); a command's is the time the published command ran (meta.json)."""
        reps = self.reps(name)
        if not reps:
            return float(self.meta(name).get("wall_s", math.nan))
        total = 0.0
        for rep in reps:
            started, finished = rep.status.get("started"), rep.status.get("finished")
            if started and finished:
                total += (_instant(finished) - _instant(started)).total_seconds()
        return total

    def ran_on(self, name: str) -> str:
        """The days the first and the last repetition started, one day when they are the same
        (the publishing day for a command)."""
        days = sorted(r.status["started"][:10] for r in self.reps(name) if r.status.get("started"))
        if not days:
            return self.meta(name).get("published", "")[:10]
        return days[0] if days[0] == days[-1] else f"{days[0]} to {days[-1]}"

    def points(self, name: str) -> str:
        """What ran, from the published run.json: variants and sweep values."""
        reps = self.reps(name)
        if not reps:
            return "—"
        variants = list(dict.fromkeys(r.variant or r.run for r in reps))
        values = list(dict.fromkeys(r.sweep_value for r in reps if r.sweep_value is not None))
        text = ", ".join(variants)
        if values:
            parameter = _sweep_parameter(self.directory(name) / "spec.toml")
            text += f"; {parameter} = " + ", ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in values)
        return text

    def run_length(self, name: str) -> str:
        """workload.duration_s of the runs (the load's length, before any drain); for a
        capacity probe, the length of each of its levels of users (workload.level_s)."""
        lengths = sorted({_length(r.config.get("workload") or {}) for r in self.reps(name)})
        return ", ".join(text for seconds, text in lengths if seconds) or "—"

    # --- ours ----------------------------------------------------------------------------------

    def per_rep(self, name: str, run: str, metric: str) -> dict[int, float]:
        """``metric`` of each complete repetition of ``run`` (repetition -> value)."""
        return self.per_rep_of(name, run, lambda summary: _dotted(summary, metric))

    def measure(self, name: str, run: str, metric: str) -> Measure:
        """Mean of ``metric`` over the run's complete repetitions, with its 90% interval."""
        values = self.per_rep(name, run, metric)
        return summarize(list(values.values()), ((name, run),), absent=self.absent(name, run, metric))

    def mean(self, name: str, run: str, metric: str) -> float:
        return self.measure(name, run, metric).value

    def sweep_values(self, name: str) -> list:
        """The sweep values of experiment ``name`` at the paper's scale: those its spec in the
        repository runs without ``--quick``, then any other the published runs have, so a
        claim made per point has a row for every point, run or not."""
        from sojourn.runner.spec import load_spec
        planned = [run.sweep_value for run in load_spec(REPO / self.paper.entry(name).spec).runs]
        published = [rep.sweep_value for rep in self.reps(name)]
        return [value for value in dict.fromkeys(planned + published) if value is not None]

    def runs_of(self, name: str) -> set[str]:
        """The runs of experiment ``name`` in its published results."""
        return {rep.run for rep in self.reps(name)}

    def config(self, name: str, run: str, key: str):
        """A dotted key of the configuration the run ran with (run.json), None if absent."""
        rep = next((r for r in self.reps(name) if r.run == run), None)
        return None if rep is None else _dotted(rep.config, key)

    def per_rep_of(self, name: str, run: str, reduce: Callable) -> dict[int, float]:
        """``reduce`` (a function of one repetition's summary.json, returning a number or
        None) of each complete repetition of ``run``, for values a dotted key cannot name (a
        bin of a series)."""
        values = {rep.rep: reduce(rep.summary) for rep in self.complete_reps(name, run)}
        # A flag counts as 0 or 1; anything not a number (absent, a table) is no value.
        return {rep: float(value) for rep, value in values.items()
                if isinstance(value, (int, float)) and not math.isnan(value)}

    def from_summary(self, name: str, run: str, reduce: Callable, what: str) -> Measure:
        """The mean and 90% interval of :meth:`per_rep_of`; ``what`` names the quantity when
        no repetition gives one."""
        absent = self.absent(name, run, "") or f"{run}'s summary.json has no {what}"
        return summarize(list(self.per_rep_of(name, run, reduce).values()), ((name, run),), absent=absent)

    def counters(self, name: str, run: str, reduce: Callable, what: str) -> Measure:
        """``reduce`` (a function of one repetition's kernel counters, counters.csv as a
        DataFrame, returning a number or None) over the run's complete repetitions; ``what``
        names the quantity when no repetition gives one."""
        values = []
        for rep in self.complete_reps(name, run):
            table = rep.table("counters.csv")
            if table is not None:
                value = reduce(table)
                if value is not None:
                    values.append(float(value))
        absent = self.absent(name, run, "") or f"{run}'s counters.csv has no {what}"
        return summarize(values, ((name, run),), absent=absent)

    def ratio(self, numerator: Side, denominator: Side) -> Measure:
        """numerator / denominator per repetition, paired by repetition number (a ratio of
        two runs of one experiment, or across two), then the mean and 90% interval."""
        absent = self.absent(*numerator) or self.absent(*denominator)
        return quotient(self.per_rep(*numerator), self.per_rep(*denominator), (numerator[:2], denominator[:2]),
                        absent or f"{denominator[2]} of {denominator[1]} is 0")

    def sweep(self, name: str, metric: str = "response_mean",
              variants: tuple[str, str] = ("fair", "srpt")) -> dict:
        """Sweep value -> (first / second variant's ``metric``, the first's, the second's),
        each a Measure, for the points where both variants ran."""
        first, second = variants
        return {point: (self.ratio((name, by[first], metric), (name, by[second], metric)),
                        self.measure(name, by[first], metric), self.measure(name, by[second], metric))
                for point, by in self._sweep_runs(name, variants).items() if first in by and second in by}

    def _sweep_runs(self, name: str, variants: tuple[str, str]) -> dict:
        """Sweep value -> {variant: run} of the published runs of ``variants``."""
        runs: dict = {}
        for rep in self.reps(name):
            if rep.variant in variants and rep.sweep_value is not None:
                runs.setdefault(rep.sweep_value, {})[rep.variant] = rep.run
        return runs

    def extreme(self, name: str, pick: Callable = min, metric: str = "response_mean",
                variants: tuple[str, str] = ("fair", "srpt"), part: int = 0) -> Measure:
        """The least (``pick`` min) or largest over the sweep of part ``part`` of
        :meth:`sweep` (0 = the ratio, 1 = the first variant's value, 2 = the second's), with
        the interval of the point it was found at."""
        # A point one variant has published and the other not yet (a campaign cut short): the
        # extreme over the sweep is not known until it has both.
        half = sorted(point for point, by in self._sweep_runs(name, variants).items() if len(by) < len(variants))
        if half:
            named = ", ".join(f"{p:g}" if isinstance(p, float) else str(p) for p in half)
            return Measure(absent=f"the sweep's point(s) {named} have only one of {' and '.join(variants)} published yet")
        found = {point: parts[part] for point, parts in self.sweep(name, metric, variants).items() if parts[part].ok}
        if not found:
            return Measure(absent=f"no sweep point of {name} has both {' and '.join(variants)}")
        point = pick(found, key=lambda p: found[p].value)
        best = found[point]
        runs = tuple(run for m in found.values() for run in m.runs)
        key = _sweep_parameter(self.directory(name) / "spec.toml").rsplit(".", 1)[-1]
        at = f"{key}={point:g}" if isinstance(point, float) else f"{key}={point}"
        # The repetitions of the point whose value and interval the row shows: 000 (H)'s
        # incomplete FAIR / SRPT had one repetition at 15 s (SRPT left none incomplete in two)
        # and said 1 beside the 3-repetition interval of its 3-s point.
        return Measure(best.value, best.ci, best.repetitions, runs, at=at)

    def not_run(self, name: str) -> str:
        """Why an experiment without published results gives nothing, with the command that
        runs it."""
        return f"not run yet: `sojourn reproduce {self.paper.tag} --only {name}`"

    def absent(self, name: str, run: str, metric: str) -> str:
        """Why run ``run`` of published experiment ``name`` gives no ``metric`` (any metric
        when empty): the sentence a row shows in place of a value, or "" when it gives one."""
        reps = [r for r in self.reps(name) if r.run == run]
        if not reps:
            return f"run {run} is not in the published results of {name}"
        if not any(r.complete for r in reps):
            return f"no repetition of {run} completed"
        if metric and not self.per_rep(name, run, metric):
            return f"{run} has no {metric}"
        return ""

    # --- rows ------------------------------------------------------------------------------

    def row(self, name: str, claim: str, paper: Claim, ours: Measure, why: Why | None = None,
            note: str = "", time_scale: TimeScale | None = None) -> Row:
        """A row of experiment ``name``; its scale is the least of the runs ``ours`` read
        (not run, then compressed, then quick, then paper). ``time_scale``: the paper's timing
        for this row alone, where it differs from its experiment's; a run shorter than it makes
        the row ``compressed``, its note saying by how much."""
        runs = ours.runs or ((name, ""),)
        scales = {self.scale(experiment, run) for experiment, run in runs}
        short = {item for experiment, run in runs if time_scale and self.has(experiment)
                 for item in self.shorter_than_paper(experiment, run, time_scale)}
        if short:
            scales.add("compressed")
            ran = ", ".join(f"workload.{key} {value:g} s against {least:g}" for key, value, least in sorted(short))
            note = "; ".join(filter(None, (note, f"compressed: {ran}; the paper: {time_scale.source}")))
        scale = next(s for s in ("not run", "compressed", "quick", "paper") if s in scales)
        unrun = [experiment for experiment, _ in runs if not self.has(experiment)]
        if unrun and not ours.ok:
            # Whatever a builder says of a missing value, the reason is that nothing ran.
            ours, why = replace(ours, absent=self.not_run(unrun[0])), None
        return Row(name, claim, paper, ours, self.result_path(name), scale, why, note)


def _length(workload: dict) -> tuple[float, str]:
    """A run's length in seconds and as the run-length column says it: a capacity probe's
    levels, each of workload.level_s with its warm-up, or workload.duration_s."""
    if workload.get("mode") == "capacity":
        level, warmup = float(workload.get("level_s") or 0), float(workload.get("warmup_s") or 0)
        return level, f"levels of {level:g} s ({warmup:g} s warm-up)"
    duration = float(workload.get("duration_s") or 0)
    return duration, f"{duration:g} s"


def _instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _sweep_parameter(spec: Path) -> str:
    import tomllib
    if not spec.is_file():
        return "sweep"
    return (tomllib.loads(spec.read_text()).get("sweep") or {}).get("parameter", "sweep")
