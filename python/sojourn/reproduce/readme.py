"""docs/reproduction/README.md: the summary over every paper, read from the papers' CSVs
(so it says exactly what the tables say), followed by the description of the one row format.
"""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path

from sojourn.reproduce import PAPERS, REPO, load_paper
from sojourn.reproduce.rows import NEGATIVE

# How each kind's verdicts are counted in the summary, in this order.
KIND_VERDICTS = {
    "point": ("same direction within 2x", "same direction beyond 2x", "opposite"),
    "direction": ("same direction within 2x", "same direction beyond 2x", "opposite", "undecided"),
    "bound": ("met", "missed"),
}
SHORT = {"same direction within 2x": "within 2x", "same direction beyond 2x": "beyond 2x"}

FORMAT = """
## One row format for every paper

`docs/reproduction/<paper>.csv` has one line per claim of the paper, with or without a result,
in these columns (the doc `<paper>.md` shows the same rows, with the reasons written out):

| column | meaning |
|---|---|
| paper, experiment | the paper's tag and the experiment (a directory under `<paper>/`) the row's numbers come from |
| claim | what is compared, in words |
| kind | `point`: the paper prints a value (a time, a rate, a ratio it calls about 1); `direction`: the paper prints a ratio on one side of 1 (such as FAIR / SRPT); `bound`: the paper states a bound ("at least 2.5x", "under 0.5%"), or a direction without a number, written as a bound on the reference ("> 1"), or calls a ratio equal ("hardly affected", "more or less the same"), written as a range of ours around 1 (`in [0.90, 1.10]`), or gives values on both sides of ours (000 §5.2's incomplete shares at loads 0.7 and 0.9, for a workload at 0.8: `in [0.002, 0.150]`) |
| paper_value | the paper's printed value for the quantity; empty for a bound the paper gives no value beside |
| bound | a bound row's bound, operator and value (`>= 2.5`), or a range (`in [0.90, 1.10]`, both ends included); empty for the other kinds |
| ours | our value: the mean over repetitions (a ratio of two runs is taken per repetition, paired by repetition number, then averaged); empty when there is no result |
| ci_lo, ci_hi | the 90% t-interval of that mean (002 §3.5); empty with one repetition |
| ratio | ours / paper_value; never to a bound (empty when the paper prints no value) |
| verdict | `met` or `missed` for a bound (for >=, <= and a range ours is rounded to the decimals the paper printed, and compared exactly with a bound printed without decimals, such as a count; a threshold of ours, our reading of words such as "no improvements" or "very few", is written with two decimals (`<= 1.10`), so 1.14 does not round to it; > and < are strict, and with repetitions met only when the whole 90% interval is past the bound); for a point or a direction `same direction within 2x`, `same direction beyond 2x` (ratio outside 0.5-2; for a direction also when ours departs from 1 by a factor outside 0.5-2 of the paper's departure, log ours / log paper, so 0.99 against the paper's 0.7, a 1% gain against 30%, is beyond 2x) or `opposite` (ours on the other side of the reference, or on it; a point's reference is 0, a direction's 1); for a direction with repetitions `undecided` when ours is on the paper's side but its 90% interval reaches the reference; `no result` when there is no value |
| reason | for a negative verdict (missed, beyond 2x, opposite, undecided): `measured` when a published measurement shows the cause (the `why` column says which), else `unexplained`; `—` for the others |
| scale | what the published result ran: `compressed` when its runs had workload.time_compression > 1 or ran their points shorter than the paper did (the paper's timing, where the experiment declares it: each doc lists them under its experiments table); `paper` at the spec's full scale (not `--quick`) with at least 3 repetitions, or an exact computation (a formula); `not run` when the experiment has no published result yet; else `quick`. Read from the published run.json and meta.json of the runs the row uses |
| repetitions | the complete repetitions the row's value is over (the fewest of its runs) |
| result_path | the published directory the value comes from, relative to the repository; for an experiment not run yet, its spec |
| why | for a negative verdict, the measured reason or what is known of an unexplained one; for `no result`, why there is none |

Every number in the generated docs comes from the published files under `<paper>/<experiment>/`
(spec.toml, run.json, status.json, summary.json, counters.csv, a command's CSVs); the generator
holds the papers' numbers and no number of ours. No row passes by construction: where a run could
not see what the paper measured (SRPT's first SYN drop near half an hour, in a run of minutes), or
an experiment ran but gave no value, the claim keeps its row as `no result` and says why. An
experiment not yet published has its rows too, each `no result` at scale `not run`, naming the
spec and the command that runs it; a claim made per workload or per point has a row for every
point its spec runs, whether that point ran or not.

`python -m sojourn.reproduce.check` (which `sojourn reproduce` runs after writing the docs) and
`python/tests/test_reproduce_tables.py` check every CSV and doc against these rules: a row whose
result_path does not exist, a bound row without a bound verdict, a ratio taken to anything but
the paper's value, a verdict that does not follow from the numbers, or an absolute path in a
generated doc fails the suite.
"""


def _rows(docs: Path, tag: str) -> list[dict]:
    path = docs / f"{tag}.csv"
    return list(csv.DictReader(path.open())) if path.is_file() else []


def _kind_cell(rows: list[dict], kind: str) -> str:
    counts = Counter(row["verdict"] for row in rows if row["kind"] == kind)
    parts = [f"{counts[v]} {SHORT.get(v, v)}" for v in KIND_VERDICTS[kind] if counts[v]]
    return ", ".join(parts) or "—"


def coverage(paper, rows: list[dict]) -> dict:
    """How much of a paper its rows (CSV rows as dicts) cover: its own experiments and ours,
    those with a result (a row with a value) and those whose every row is at the paper's
    scale, the negative verdicts and how many carry a measured reason, the rows without a
    result and how many of those wait for an experiment not run yet."""
    own = [e.name for e in paper.experiments if e.of_paper]
    by_experiment: dict[str, list[dict]] = {}
    for row in rows:
        by_experiment.setdefault(row["experiment"], []).append(row)
    with_row = [name for name in own if name in by_experiment]
    with_result = [name for name in with_row if any(r["verdict"] != "no result" for r in by_experiment[name])]
    negative = [row for row in rows if row["verdict"] in NEGATIVE]
    return {"own": len(own), "added": len(paper.experiments) - len(own), "with_row": len(with_row),
            "with_result": len(with_result),
            "at_paper": sum(all(r["scale"] == "paper" for r in by_experiment[name]) for name in with_result),
            "negative": len(negative), "measured": sum(row["reason"] == "measured" for row in negative),
            "no_result": sum(row["verdict"] == "no result" for row in rows),
            "not_run": sum(row["scale"] == "not run" for row in rows)}


def coverage_line(paper, rows: list[dict]) -> str:
    """The count at the top of a paper's doc."""
    c = coverage(paper, rows)
    ours = f" (and {c['added']} of ours)" if c["added"] else ""
    return (f"**Coverage:** {c['own']} experiments of the paper{ours}: {c['with_row']} with a row, "
            f"{c['with_result']} with a result, {c['at_paper']} of them at the paper's scale (>= 3 repetitions, or exact); {c['measured']} of "
            f"{c['negative']} negative verdicts {'carries' if c['measured'] == 1 else 'carry'} a measured reason; "
            f"{c['no_result']} {'row has' if c['no_result'] == 1 else 'rows have'} no result, {c['not_run']} of them "
            f"of experiments not run yet.")


def summary_lines(docs: Path) -> list[str]:
    lines = ["| paper | experiments in the paper | with a row | with a result | at paper scale (>= 3 repetitions, or exact) | point | direction "
             "| bound | no result | negative verdicts with a measured reason |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for tag in PAPERS:
        rows = _rows(docs, tag)
        if not rows:
            continue
        c = coverage(load_paper(tag), rows)
        experiments = f"{c['own']}" + (f" (+{c['added']} of ours)" if c["added"] else "")
        lines.append(f"| [{tag}]({tag}.md) | {experiments} | {c['with_row']} | {c['with_result']} | {c['at_paper']} | "
                     f"{_kind_cell(rows, 'point')} | {_kind_cell(rows, 'direction')} | {_kind_cell(rows, 'bound')} | "
                     f"{c['no_result']} | {c['measured']} of {c['negative']} |")
    return lines


CONCURRENCY = "concurrency"  # docs/reproduction/concurrency/<experiment>.json, from bench/concurrency/compare.py


def _defaults(docs: Path) -> str:
    """The measured default count for each kind of testbed (concurrency.kind)."""
    from sojourn.reproduce.concurrency import measured_concurrency
    from sojourn.runner.spec import load_spec

    kinds = (("without the WAN emulator", "experiments/000/concurrency.toml"),
             ("with it", "experiments/000/concurrency-rtt.toml"),
             ("for closed loops of users with think time", "experiments/004/concurrency.toml"))
    return ", ".join(f"{measured_concurrency(load_spec(REPO / spec), docs)} {kind}" for kind, spec in kinds)


def _shift(row: dict) -> str:
    """A concurrent run's shift from solo with its Welch interval and p (compare.py), — for
    the solo rows and for comparisons published before compare.py kept the repetitions."""
    if row.get("welch_lo") is None:
        return "—"
    return f"{row['welch_diff']:+.1%} [{row['welch_lo']:+.1%}, {row['welch_hi']:+.1%}] ({row['welch_p']:.2f})"


def concurrency_lines(docs: Path) -> list[str]:
    """The solo-against-concurrent check of `sojourn reproduce --concurrency`'s default, one
    table per published comparison (bench/concurrency/run.sh, compare.py --json)."""
    files = sorted((docs / CONCURRENCY).glob("*.json"))
    if not files:
        return []
    lines = ["", "## Several testbeds at once", "",
             "`sojourn reproduce` runs link-bound experiments with several testbeds at once (`--concurrency`; "
             "CPU-bound ones alone), each repetition checked by the fidelity guard (docs/experiments.md). Whether "
             "that changes what is measured was measured: the same spec solo and with N testbeds at once "
             "(`bench/concurrency/run.sh`), each count's mean response times against the solo repetitions' 90% "
             "intervals. A count is safe when every mean lies inside them and every repetition is complete and "
             "valid. The default of `sojourn reproduce` is, for each kind of testbed, the largest N with every count "
             f"from 2 to N measured safe in every comparison of that kind: {_defaults(docs)}. A count given twice "
             "(`run.sh 1 2 1`: solo, 2 at once, solo again) pools its sets, so the machine's drift between batches "
             "widens the solo interval instead of deciding the verdict. Beside the rule, comparisons made since "
             "compare.py kept each repetition give the shift from solo with its Welch 90% interval and p-value "
             "(unequal variances): how large a change the repetitions could hide."]
    for path in files:
        data = json.loads(path.read_text())
        measured_counts = ", ".join(sorted(data["counts"], key=int))
        lines += ["", f"`{data['spec']}` ({data['run_length']} of load per repetition, ran {data['ran_on']}; counts "
                      f"measured: {measured_counts}; largest safe count: **{data['largest_safe']}**):", "",
                  "| testbeds at once | run | repetitions (valid) | invalid attempts redone | CPU idle | mean (s) | "
                  "solo 90% interval (s) | inside | vs solo, Welch 90% (p) | SYN drops | incomplete |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for count, runs in sorted(data["counts"].items(), key=lambda kv: int(kv[0])):
            for run, row in runs.items():
                inside = "—" if count == "1" else ("yes" if row["inside_solo_interval"] else "no")
                lines.append(f"| {count} | {run} | {row['n']} ({row['valid']}) | {row.get('redone', 0):.0f} | "
                             f"{row['cpu_idle']:.2f} | "
                             f"{row['response_mean']:.3g} | {row['solo_lo']:.3g}-{row['solo_hi']:.3g} | {inside} | "
                             f"{_shift(row)} | {row['syn_drops']:.0f} | {row['incomplete']:.0f} |")
    return lines


def readme_text(docs: Path) -> str:
    lines = ["# Reproducing the papers", "",
             "Generated by `sojourn reproduce` from the CSVs beside it; do not edit by hand. One line per "
             "paper: its experiments (and studies of ours beside them), how many have a row in the paper's "
             "table and how many a result, how many of those ran at the paper's scale with at least three repetitions (or are an exact "
             "computation), the "
             "verdicts of its rows by kind, and how many negative verdicts (missed, beyond 2x, opposite, undecided) "
             "have a measured reason.", ""]
    lines += summary_lines(docs)
    lines += concurrency_lines(docs)
    return "\n".join(lines) + "\n" + FORMAT
