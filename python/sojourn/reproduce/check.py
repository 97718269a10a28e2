"""Checks the generated reproduction docs against the rules of their format
(docs/reproduction/README.md), from the files alone:

- every CSV row names an existing result_path (relative to the repository);
- kind, verdict, reason and scale are from their vocabularies; a bound row has a bound and a
  bound verdict (met, missed, no result), a row of another kind neither;
- the ratio is ours / paper_value, and absent when the paper prints no value (never taken to
  a bound);
- the verdict follows from the numbers (a bound's from ours, its interval and the bound,
  within or beyond 2x from ours / paper_value); a negative verdict has a reason, a measured
  one says why, a row without a result says why;
- no generated doc (a paper's .md or .csv, README.md) holds an absolute path.

``python -m sojourn.reproduce.check [DOCS]`` prints the problems and exits 1 if there are any.
"""

from __future__ import annotations

import csv
import io
import math
import sys
from pathlib import Path

from sojourn.reproduce import CSV_COLUMNS, DOCS, REPO
from sojourn.reproduce.doc import ABSOLUTE_PATH
from sojourn.reproduce.rows import (KINDS, NEGATIVE, REASONS, SCALES, VERDICTS, bound_verdict, departs_alike, departure,
                                    within_2x)


def _float(text: str) -> float | None:
    try:
        return float(text) if text != "" else None
    except ValueError:
        return math.nan


def check_row(row: dict, repo: Path = REPO) -> list[str]:
    """The problems of one CSV row (a dict of CSV_COLUMNS)."""
    problems = []
    path = row["result_path"]
    if not path or Path(path).is_absolute() or not (repo / path).exists():
        problems.append(f"result_path {path!r} is not an existing path relative to the repository")
    for column, allowed in (("kind", KINDS), ("verdict", VERDICTS), ("reason", REASONS), ("scale", SCALES)):
        if row[column] not in allowed:
            problems.append(f"{column} {row[column]!r} is not one of {', '.join(allowed)}")
    kind, verdict, bound = row["kind"], row["verdict"], row["bound"]
    ours, paper, ratio = _float(row["ours"]), _float(row["paper_value"]), _float(row["ratio"])
    if kind == "bound":
        if not bound:
            problems.append("a bound row without a bound")
        if verdict not in ("met", "missed", "no result"):
            problems.append(f"a bound row with the verdict {verdict!r} (a bound is met or missed)")
        elif bound and ours is not None:
            lo, hi = _float(row["ci_lo"]), _float(row["ci_hi"])
            if verdict != bound_verdict(bound, ours, (lo, hi) if lo is not None and hi is not None else None):
                problems.append(f"verdict {verdict!r} does not follow from ours {row['ours']} (90% interval "
                                f"{row['ci_lo'] or '-'} to {row['ci_hi'] or '-'}) and the bound {bound}")
    else:
        if bound:
            problems.append(f"a {kind} row with a bound")
        if verdict in ("met", "missed"):
            problems.append(f"a {kind} row with the bound verdict {verdict!r}")
        if paper is None or paper == 0:
            problems.append(f"a {kind} row without the paper's value")
        elif verdict == "undecided" and (kind != "direction" or row["ci_lo"] == ""):
            problems.append("undecided without a direction's 90% interval to reach its reference")
        elif ours is not None and verdict.startswith("same direction"):
            alike = departs_alike(ours, paper) if kind == "direction" else within_2x(ours / paper)
            if (verdict == "same direction within 2x") != alike:
                problems.append(f"verdict {verdict!r} does not follow from ours / paper = {ours / paper:.4g}"
                                + (f" and log ours / log paper = {departure(ours, paper):.3g}"
                                   if kind == "direction" else ""))
    if ratio is not None:
        if paper is None or ours is None:
            problems.append("a ratio without the paper's value (a ratio taken to a bound?)")
        elif not math.isclose(ratio, ours / paper, rel_tol=1e-3):
            problems.append(f"ratio {row['ratio']} is not ours / paper_value = {ours / paper:.4g}")
    elif paper and ours is not None:
        problems.append("no ratio although ours and the paper's value are given")
    if (ours is None) != (verdict == "no result"):
        problems.append(f"verdict {verdict!r} with ours {row['ours']!r}")
    if (row["ci_lo"] == "") != (row["ci_hi"] == ""):
        problems.append("half an interval")
    if verdict in NEGATIVE:
        if row["reason"] not in ("measured", "unexplained"):
            problems.append(f"a negative verdict with the reason {row['reason']!r}")
        if row["reason"] == "measured" and not row["why"]:
            problems.append("a measured reason that does not say what measured it")
    elif row["reason"] != "—":
        problems.append(f"reason {row['reason']!r} on a verdict that is not negative")
    if verdict == "no result" and not row["why"]:
        problems.append("no result, and no why")
    return problems


def check_csv(text: str, repo: Path = REPO) -> list[str]:
    rows = list(csv.DictReader(io.StringIO(text)))
    header = text.splitlines()[0].split(",") if text else []
    if tuple(header) != CSV_COLUMNS:
        return [f"columns {header} are not {list(CSV_COLUMNS)}"]
    problems = [f"line {number}: {problem}" for number, row in enumerate(rows, 2) for problem in check_row(row, repo)]
    return problems + check_text(text)


def check_text(text: str) -> list[str]:
    """An absolute path in a generated doc."""
    return [f"absolute path {match.group(0)!r}" for match in ABSOLUTE_PATH.finditer(text)]


def check_docs(docs: Path = DOCS, repo: Path = REPO) -> dict[str, list[str]]:
    """Problems per generated file under ``docs`` (every <paper>.csv, <paper>.md, README.md)."""
    problems = {}
    for path in sorted(docs.glob("*.csv")):
        problems[path.name] = check_csv(path.read_text(), repo)
    for path in sorted(docs.glob("*.md")):
        problems[path.name] = check_text(path.read_text())
    return {name: found for name, found in problems.items() if found}


def main(argv: list[str] | None = None) -> int:
    docs = Path((argv if argv is not None else sys.argv[1:] or [str(DOCS)])[0])
    problems = check_docs(docs)
    for name, found in problems.items():
        for problem in found:
            print(f"{name}: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
