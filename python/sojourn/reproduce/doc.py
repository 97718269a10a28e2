"""Stage 3 of a reproduction: docs/reproduction/<paper>.md and <paper>.csv from the
published results (nothing else is read, so a re-run of this stage alone regenerates both),
the figures of the paper's printed values beside ours (docs/reproduction/<paper>/beside/),
and docs/reproduction/README.md, whose summary is read from every paper's CSV.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
from collections import Counter
from pathlib import Path

from sojourn.reproduce import CSV_COLUMNS, REPO, SHARED, Context, Paper
from sojourn.reproduce.readme import coverage_line, readme_text
from sojourn.reproduce.rows import Row, missing

BESIDE = "beside"  # docs/reproduction/<paper>/beside/: the paper's values drawn beside ours

# An absolute path in text (a caption written on the machine that ran it).
ABSOLUTE_PATH = re.compile(r"(?<![\w.~/:])/(?:[\w.=+-]+/)+[\w.=+-]*")


def relative_paths(text: str) -> str:
    """``text`` with every absolute path made relative: to the repository when under it,
    else from its ``results/`` part (a result directory of another checkout), else its name."""
    def shorten(match: re.Match) -> str:
        path = match.group(0)
        try:
            return str(Path(path).relative_to(REPO))
        except ValueError:
            pass
        _, found, rest = path.partition("/results/")
        return f"results/{rest}" if found else Path(path).name
    return ABSOLUTE_PATH.sub(shorten, text)


def number(value: float | None, unit: str = "") -> str:
    if missing(value):
        return "—"
    text = f"{value:.3g}" if abs(value) < 1000 else f"{value:.0f}"
    return f"{text} {unit}".strip()


def _csv_number(value: float | None, digits: int = 6) -> str:
    return "" if missing(value) else f"{value:.{digits}g}"


def csv_rows(paper: Paper, rows: list[Row]) -> list[list]:
    out = []
    for row in rows:
        ci = row.ours.ci if row.ours.ok else None
        out.append([paper.tag, row.experiment, row.claim, row.kind, _csv_number(row.paper.paper_value),
                    row.paper.bound, _csv_number(row.ours.value if row.ours.ok else None),
                    _csv_number(ci[0] if ci else None), _csv_number(ci[1] if ci else None),
                    _csv_number(row.ratio, 4), row.verdict(), row.reason(), row.scale, row.ours.repetitions,
                    row.result_path, relative_paths(row.why_text())])
    return out


def csv_text(paper: Paper, rows: list[Row]) -> str:
    """The shared CSV format (:data:`CSV_COLUMNS`), one line per claim, with or without a result."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    writer.writerows(csv_rows(paper, rows))
    return out.getvalue()


def paper_cell(row: Row) -> str:
    claim = row.paper
    if claim.kind == "bound":
        text = f"{claim.bound} {claim.unit}".strip()
        if claim.paper_value is not None:
            text += f"; printed {number(claim.paper_value, claim.unit)}"
    else:
        text = number(claim.paper_value, claim.unit)
    return f"{text} ({claim.paper_text})" if claim.paper_text else text


def ours_cell(row: Row) -> str:
    ours = row.ours
    text = number(ours.value, row.paper.unit)
    if ours.ok and ours.ci is not None:
        text += f" [{number(ours.ci[0])}, {number(ours.ci[1])}]"
    if ours.ok and ours.at:
        text += f" at {ours.at}"
    return text


def _experiments_table(paper: Paper, ctx: Context) -> list[str]:
    lines = ["| experiment | what | ran | scale | repetitions | run length | ran on | wall time |",
             "|---|---|---|---|---|---|---|---|"]
    for entry in paper.experiments:
        what = entry.title + ("" if entry.of_paper else " (ours, not in the paper)")
        if not ctx.has(entry.name):
            lines.append(f"| {entry.name} | {what} | not run yet | | | | | |")
            continue
        lines.append(f"| [{entry.name}]({paper.tag}/{entry.name}/) | {what} | {ctx.points(entry.name)} | "
                     f"{ctx.scale(entry.name)} | {ctx.repetitions(entry.name)} | {ctx.run_length(entry.name)} | "
                     f"{ctx.ran_on(entry.name)} | {ctx.wall_s(entry.name):.0f} s |")
    return lines


def _time_scale_lines(paper: Paper, ctx: Context) -> list[str]:
    """The published experiments that ran shorter than the paper's time scale (their rows are
    ``compressed``), each with what it ran against the paper's timing."""
    lines = []
    for entry in paper.experiments:
        if not ctx.has(entry.name) or not (short := ctx.shorter_than_paper(entry.name)):
            continue
        ran = ", ".join(f"workload.{key} {value:g} s against {least:g}" for key, value, least in short)
        lines.append(f"- `{entry.name}`: {ran}; the paper: {entry.time_scale.source}.")
    if not lines:
        return []
    return ["", "Shorter than the paper's time scale (their rows are `compressed`: a figure from shorter points "
            "is not the paper's, whatever it shows):", ""] + lines


def _guard_lines(paper: Paper, ctx: Context) -> list[str]:
    """The fidelity bounds a published experiment's spec set away from the defaults, each with
    the worst value its complete repetitions recorded (summary.json's fidelity), so a table
    judged by a looser guard says so."""
    from sojourn.runner.fidelity import GUARDS, worst
    from sojourn.runner.spec import SCHEMA
    defaults = {key: rule.default for key, rule in SCHEMA["collect"]["fidelity"].items()}
    lines = []
    for entry in paper.experiments:
        reps = ctx.complete_reps(entry.name)
        for measure, (key, unit, _) in GUARDS.items():
            judged = [(rep, setting) for rep in reps
                      if (setting := rep.config["collect"].get("fidelity", {}).get(key, defaults[key])) != defaults[key]]
            if not judged:
                continue
            changed = sorted({setting for _, setting in judged})
            values = [v for rep, _ in judged
                      if (v := ((rep.summary.get("fidelity") or {}).get("values") or {}).get(measure)) is not None]
            seen = f"; the worst of its {len(values)} repetitions: {worst(measure, values) / unit:.3g}" if values else ""
            lines.append(f"- `{entry.name}`: `collect.fidelity.{key}` = {', '.join(f'{v:g}' for v in changed)} "
                         f"(default {defaults[key]:g}; 0 = not judged){seen}. The spec says why.")
    if not lines:
        return []
    return ["", "Guard bounds set by a spec, not the defaults (docs/experiments.md; each repetition is judged "
            "against its own):", ""] + lines


def _redo_lines(paper: Paper, ctx: Context) -> list[str]:
    """The attempts the fidelity guard found invalid and had run again, per experiment: how
    many, of how many published repetitions, and the bound each broke (attempts.json), so a
    table that took many tries says so."""
    from sojourn.runner.points import ATTEMPTS
    lines = []
    for entry in paper.experiments:
        reps = ctx.reps(entry.name)
        records = [json.loads(rep.text(ATTEMPTS)) for rep in reps if rep.has(ATTEMPTS)]
        voided = [attempt for record in records for attempt in record]
        if not voided:
            continue
        broke = Counter(violation.split()[0] for attempt in voided
                        for violation in (attempt.get("fidelity") or {}).get("violations") or ["unrecorded"])
        lines.append(f"- `{entry.name}`: {len(voided)} attempt(s) of {len(records)} of its {len(reps)} "
                     f"repetitions; the bounds they broke: "
                     + ", ".join(f"{measure} {count}" for measure, count in broke.most_common()))
    if not lines:
        return []
    return ["", "Attempts the fidelity guard found disturbed and ran again (each repetition's attempts.json keeps "
            "their records; only a valid attempt counts in the rows):", ""] + lines


def _machine_lines(paper: Paper, ctx: Context) -> list[str]:
    """The machines each experiment's repetitions ran on (host.json, sojourn.testbed.host): how
    many, and how far apart their speeds were (a loopback TCP round trip's CPU time, slowest
    over fastest), so a CPU-bound table measured on several machines says so; repetitions
    from before machines were recorded (7 Dec 2026) are counted apart."""
    from sojourn.testbed.host import FILE
    lines = []
    for entry in paper.experiments:
        reps = ctx.reps(entry.name)
        hosts = [h for rep in reps if rep.has(FILE) and "error" not in (h := json.loads(rep.text(FILE)))]
        if not hosts:
            continue
        machines = {h["boot_id"] for h in hosts}
        trips = [h["speed"]["loopback_round_trip_cpu_us"] for h in hosts]
        unrecorded = len(reps) - len(hosts)
        lines.append(f"- `{entry.name}`: {len(hosts)} repetition(s) on {len(machines)} machine(s), a loopback round "
                     f"trip {min(trips):.1f}-{max(trips):.1f} CPU µs (slowest / fastest {max(trips) / min(trips):.2f})"
                     + (f"; {unrecorded} without a record (from before 7 Dec 2026, or unmeasured: host.json's "
                        "error)" if unrecorded else ""))
    if not lines:
        return []
    return ["", "The machines the repetitions ran on (each repetition's host.json: its boot id, and the CPU time of "
            "fixed work measured just before it, docs/experiments.md; a CPU-bound result depends on it):", ""] + lines


def _shared_lines(paper: Paper, ctx: Context) -> list[str]:
    """The repetitions each experiment holds from another experiment's publication, measured
    once from a run configured alike (sojourn.reproduce.publish.shared_reps): which
    experiment's runs they are, so no one counts them as independent evidence twice."""
    lines = []
    for entry in paper.experiments:
        reps = ctx.reps(entry.name)
        sources = Counter(f"`{origin['experiment']}`'s {origin['run']}" for rep in reps if rep.has(SHARED)
                          for origin in (json.loads(rep.text(SHARED)),))
        if sources:
            lines.append(f"- `{entry.name}`: {sum(sources.values())} of its {len(reps)} repetitions: "
                         + ", ".join(f"{count} of {source}" for source, count in sorted(sources.items())))
    if not lines:
        return []
    return ["", "Repetitions measured once and published in two experiments, their runs configured alike (the same "
            "set-up, workload, seed and length; each one's shared.json names where it ran):", ""] + lines


def figure_run(caption: str) -> str:
    """The run a figure of one run draws: the report captions those "RUN: ..."."""
    return caption.split(":", 1)[0]


def markdown(paper: Paper, ctx: Context, rows: list[Row], beside: list[tuple[str, str]] = ()) -> str:
    lines = [f"# {paper.tag}: {paper.title}", "",
             f"Generated by `sojourn reproduce {paper.tag}` from the published results under "
             f"[{paper.tag}/]({paper.tag}/); do not edit by hand (a re-run rewrites it). The same rows are in "
             f"[{paper.tag}.csv]({paper.tag}.csv); [README.md](README.md) explains the columns, the kinds of claim "
             "and the verdicts.", "", coverage_line(paper, [dict(zip(CSV_COLUMNS, r)) for r in csv_rows(paper, rows)]),
             ""]
    if paper.intro:
        lines += [paper.intro.strip(), ""]
    lines += ["## Experiments", "",
              "Scale, repetitions, run length and wall time (the sum of the repetitions' run times) are read "
              "from each experiment's published run.json, status.json and meta.json.", ""]
    lines += _experiments_table(paper, ctx)
    lines += _time_scale_lines(paper, ctx)
    lines += _guard_lines(paper, ctx)
    lines += _redo_lines(paper, ctx)
    lines += _machine_lines(paper, ctx)
    lines += _shared_lines(paper, ctx)
    if beside:
        lines += ["", "## The paper's printed values beside ours", ""]
        for file, caption in beside:
            lines += [f"![{caption}]({file})", "", f"*{caption}*", ""]
    lines += ["", "## Claims: the paper's numbers beside ours", "",
              "Ratio = ours / the paper's value (never to a bound). Intervals are 90% over repetitions "
              "(002 §3.5) where there are several; a ratio of two runs is taken per repetition.", ""]
    by_experiment: dict[str, list[Row]] = {}
    for row in rows:
        by_experiment.setdefault(row.experiment, []).append(row)
    for entry in paper.experiments:
        group = by_experiment.get(entry.name)
        if not group:
            continue
        lines += [f"### {entry.title} (`{entry.name}`)", "",
                  "| claim | kind | paper | ours | ratio | verdict | reason | scale | reps |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for row in group:
            lines.append(f"| {row.claim} | {row.kind} | {paper_cell(row)} | {ours_cell(row)} | {number(row.ratio)} | "
                         f"{row.verdict()} | {row.reason()} | {row.scale} | {row.ours.repetitions} |")
        notes = [f"- *{row.claim}*: {text}" for row in group for text in (row.why_text(), row.note) if text]
        if notes:
            lines += [""] + notes
        figures = ctx.figures(entry.name)
        if figures:
            lines.append("")
            lines += [f"- [{caption}]({file})" for file, caption in figures]
            undrawn = ctx.meta(entry.name).get("not_in_figures", [])  # figures come with meta.json (publish)
            if undrawn:
                kept = {figure_run(caption) for _, caption in figures} & set(undrawn)
                lines.append(f"- Figures of several runs draw only those repeated on the publishing machine: "
                             f"{len(undrawn)} runs, restored or shared without per-request records, are not in them "
                             f"({', '.join(undrawn)}); {len(kept)} of these keep their own figures from the earlier "
                             "publication.")
        lines.append("")
    extra = paper.notes(ctx)
    if extra:
        lines += [extra.strip(), ""]
    return relative_paths("\n".join(lines))


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def write_docs(paper: Paper, ctx: Context) -> tuple[Path, Path]:
    rows = paper.claims(ctx)
    ctx.docs.mkdir(parents=True, exist_ok=True)
    beside = [(f"{paper.tag}/{BESIDE}/{file}", caption)
              for file, caption in paper.figures(ctx, ctx.docs / paper.tag / BESIDE)]
    md_path, csv_path = ctx.docs / f"{paper.tag}.md", ctx.docs / f"{paper.tag}.csv"
    _write(md_path, markdown(paper, ctx, rows, beside))
    _write(csv_path, csv_text(paper, rows))
    _write(ctx.docs / "README.md", readme_text(ctx.docs))
    return md_path, csv_path
