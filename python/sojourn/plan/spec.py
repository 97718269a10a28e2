"""Reading capacity plan files (TOML) into :class:`~sojourn.plan.model.PlanSpec`.

A plan file names the stages, their processing times, the transition matrix
(rows of percentages or probabilities, normalized), the request/session ratio,
optionally the number of CPUs, and the priority classes in order, each with a
delay bound that is one number or one per stage. See ``examples/003.toml``.
Every error names the key and what would be accepted.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import numpy as np

from sojourn.plan.model import PlanSpec

EXAMPLE = Path(__file__).with_name("examples") / "003.toml"


class PlanSpecError(ValueError):
    """A plan file that cannot be planned; the message names the bad key."""


def load_spec(path: Path) -> PlanSpec:
    try:
        data = tomllib.loads(Path(path).read_text())
    except OSError as err:
        raise PlanSpecError(f"cannot read plan file {path}: {err.strerror}") from err
    except tomllib.TOMLDecodeError as err:
        raise PlanSpecError(f"{path} is not valid TOML: {err}") from err
    return parse_spec(data, str(path))


def _positive_numbers(value, key: str, where: str, count: int | None = None, allow_zero: bool = False) -> np.ndarray:
    if isinstance(value, bool) or not isinstance(value, (list, tuple)) or not all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in value
    ):
        raise PlanSpecError(f"{where}: {key} = {value!r}; expected a list of numbers")
    array = np.asarray(value, dtype=float)
    if count is not None and array.size != count:
        raise PlanSpecError(f"{where}: {key} has {array.size} entries; expected one per stage ({count})")
    bad = ~np.isfinite(array) | ((array < 0) if allow_zero else (array <= 0))
    if bad.any():
        index = int(np.flatnonzero(bad)[0])
        bound = ">= 0" if allow_zero else "> 0"
        raise PlanSpecError(f"{where}: {key}[{index}] = {value[index]!r}; expected a finite number {bound}")
    return array


def parse_spec(data: dict, where: str = "plan") -> PlanSpec:
    known = {"stages", "processing_times", "transitions", "request_session_ratio", "cpus", "classes"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise PlanSpecError(f"{where}: unknown key(s) {', '.join(unknown)}; expected {', '.join(sorted(known))}")
    stages = data.get("stages")
    if not isinstance(stages, list) or not stages or not all(isinstance(s, str) and s for s in stages):
        raise PlanSpecError(f"{where}: stages = {stages!r}; expected a non-empty list of stage names")
    if len(set(stages)) != len(stages):
        raise PlanSpecError(f"{where}: stages {stages!r} repeat a name; expected distinct names")
    n = len(stages)
    times = _positive_numbers(data.get("processing_times"), "processing_times", where, n)
    rows = data.get("transitions")
    if not isinstance(rows, list) or len(rows) != n:
        raise PlanSpecError(f"{where}: transitions needs {n} rows (one per stage, from-stage first)")
    matrix = np.vstack([_positive_numbers(row, f"transitions[{i}]", where, n, allow_zero=True) for i, row in enumerate(rows)])
    sums = matrix.sum(axis=1)
    if (sums <= 0).any():
        row = int(np.flatnonzero(sums <= 0)[0])
        raise PlanSpecError(f"{where}: transitions[{row}] is all zero; expected probabilities with a positive sum")
    matrix = matrix / sums[:, None]
    ratio = data.get("request_session_ratio")
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not np.isfinite(ratio) or ratio <= 0:
        raise PlanSpecError(f"{where}: request_session_ratio = {ratio!r}; expected a number > 0 (003 r_rs, e.g. 0.526)")
    cpus = data.get("cpus", 1)
    if isinstance(cpus, bool) or not isinstance(cpus, (int, float)) or not np.isfinite(cpus) or cpus <= 0:
        raise PlanSpecError(f"{where}: cpus = {cpus!r}; expected a number > 0")
    classes = data.get("classes")
    if not isinstance(classes, list) or not classes:
        raise PlanSpecError(f"{where}: no [[classes]]; expected at least one class with a name and a delay_bound")
    names: list[str] = []
    bounds: list[np.ndarray] = []
    for index, entry in enumerate(classes):
        label = f"classes[{index}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or "delay_bound" not in entry:
            raise PlanSpecError(f"{where}: {label} needs name = \"...\" and delay_bound = number or list per stage")
        extra = sorted(set(entry) - {"name", "delay_bound"})
        if extra:
            raise PlanSpecError(f"{where}: {label} has unknown key(s) {', '.join(extra)}; expected name, delay_bound")
        bound = entry["delay_bound"]
        bound = [bound] * n if isinstance(bound, (int, float)) and not isinstance(bound, bool) else bound
        names.append(entry["name"])
        bounds.append(_positive_numbers(bound, f"{label}.delay_bound", where, n, allow_zero=True))
    if len(set(names)) != len(names):
        raise PlanSpecError(f"{where}: class names {names!r} repeat; expected distinct names")
    return PlanSpec(tuple(stages), times, matrix, tuple(names), np.vstack(bounds), float(ratio), float(cpus))
