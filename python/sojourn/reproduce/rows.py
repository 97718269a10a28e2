"""One row of a reproduction table: what the paper claims beside what we measured, and the
verdict, in the one format every paper's CSV shares (docs/reproduction/README.md).

A :class:`Claim` is the paper's side, written in the paper module from the paper's text:

- ``point``: the paper prints a value (a time, a rate, a ratio it calls "about 1"). Ours is
  compared by the ratio ours / paper; both lie on the positive side of 0, so the verdict
  says whether ours is within 2x (``same direction within 2x``) or not.
- ``direction``: the paper prints a ratio on one side of 1 (FAIR / SRPT = 7.97, on the side
  where SRPT is better). The verdict is ``opposite`` when ours lies on the other side of 1 or
  on it, ``undecided`` when ours lies on the paper's side but its 90% interval reaches 1 (a
  side inside the noise of the repetitions is no side shown, as a strict bound is met only by
  a whole interval), else within 2x when ours is within 2x of the paper's value and departs
  from 1 by within 2x of the paper's departure (:func:`departs_alike`), beyond 2x otherwise.
- ``bound``: the paper states a bound ("at least a factor of 2.5", "under 0.5%", or a
  direction with no number: "> 1"). The verdict is ``met`` or ``missed``. The paper's own
  value for the quantity, when it prints one, is ``paper_value`` and the ratio is taken to
  it; a bound never gives a ratio.

A :class:`Measure` is ours, computed by :class:`sojourn.reproduce.Context` from the
published results only. A :class:`Why` says why a verdict is negative (``measured``: a
published measurement shows the cause; otherwise ``unexplained``) or why there is no result.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

KINDS = ("point", "direction", "bound")
VERDICTS = ("met", "missed", "same direction within 2x", "same direction beyond 2x", "opposite", "undecided",
            "no result")
NEGATIVE = ("missed", "same direction beyond 2x", "opposite", "undecided")
REASONS = ("measured", "unexplained", "—")
SCALES = ("paper", "quick", "compressed", "not run")
BOUND_OPS = (">=", "<=", ">", "<", "in")
# How far from 1 a ratio the paper calls equal ("hardly affected", "more or less the same")
# may lie: a threshold of ours, printed with two decimals like every such reading.
ABOUT_ONE = 0.10


def missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def bound_text(op: str, value: float, digits: int | None = None) -> str:
    """The bound as the CSV's ``bound`` column writes it, e.g. ``>= 2.5``; with ``digits``
    that many decimals (``<= 1.10`` for the paper's "10%", so 1.15 does not round to it)."""
    return f"{op} {value:g}" if digits is None else f"{op} {value:.{digits}f}"


def _rounded(ours: float, number: str) -> float:
    """``ours`` rounded to the decimals ``number`` is printed with; exact without decimals."""
    decimals = number.partition(".")[2]
    return round(ours, len(decimals)) if decimals.isdigit() else ours


def bound_met(bound: str, ours: float) -> bool:
    """Whether ``ours`` meets ``bound`` (``">= 2.5"``, or ``"in [0.90, 1.10]"`` for both
    sides at once). For >=, <= and in with decimals ours is first rounded to the decimals the
    paper printed (1.62 meets "<= 1.6"); a bound without decimals (a count such as "<= 0" SYN
    drops, a ratio's bare "1", "1e-05") is exact, as rounding to units would let 0.4 drops
    meet "no drop". > and < are strict (a direction with no number: ours exactly on the
    reference does not meet it)."""
    op, _, number = bound.partition(" ")
    if op not in BOUND_OPS:
        raise ValueError(f"bound {bound!r}: expected one of {', '.join(BOUND_OPS)} and a number")
    if op == "in":
        low, comma, high = number.strip("[]").partition(",")
        if not (comma and number.startswith("[") and number.endswith("]")):
            raise ValueError(f"bound {bound!r}: expected in [low, high]")
        low, high = low.strip(), high.strip()
        return float(low) <= _rounded(ours, low) and _rounded(ours, high) <= float(high)
    value = float(number)
    if op in (">=", "<="):
        ours = _rounded(ours, number)
        return ours >= value if op == ">=" else ours <= value
    return ours > value if op == ">" else ours < value


def bound_verdict(bound: str, ours: float, ci: tuple[float, float] | None = None) -> str:
    """``met`` or ``missed``: ``ours`` against ``bound`` (:func:`bound_met`). A strict bound
    says larger or smaller, so with a 90% interval it is met only when the whole interval is
    past it: a mean past it inside the noise of its repetitions is no difference shown."""
    strict = bound.split(" ", 1)[0] in (">", "<")
    values = ci if strict and ci else (ours,)
    return "met" if all(bound_met(bound, value) for value in values) else "missed"


def within_2x(ratio: float) -> bool:
    return 0.5 <= ratio <= 2.0


def departure(ours: float, paper: float) -> float:
    """How far ``ours`` departs from 1 beside the paper's ratio ``paper``, on a log scale (so a
    ratio and its inverse depart alike): log ours / log paper; NaN when either is not positive
    or the paper's is 1 (no departure to compare with)."""
    if ours <= 0 or paper <= 0 or paper == 1:
        return math.nan
    return math.log(ours) / math.log(paper)


def departs_alike(ours: float, paper: float) -> bool:
    """Whether a direction's ratio ``ours`` is within 2x of the paper's ``paper`` both as a
    value and in its :func:`departure` from 1. The value alone cannot fail near 1: 0.99 is
    within 2x of the paper's 0.7, yet a 1% gain is not the paper's 30% (departure 0.03)."""
    return within_2x(ours / paper) and within_2x(departure(ours, paper))


@dataclass(frozen=True)
class Claim:
    """The paper's side of a row (see the module doc for the kinds)."""

    kind: str
    paper_value: float | None = None
    bound: str = ""
    reference: float = 0.0
    paper_text: str = ""
    unit: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"claim kind {self.kind!r}: expected one of {', '.join(KINDS)}")
        if (self.kind == "bound") != bool(self.bound):
            raise ValueError("a bound claim, and only a bound claim, has a bound")
        if self.kind != "bound" and not self.paper_value:
            raise ValueError(f"a {self.kind} claim needs the paper's (non-zero) value")


def point(value: float, text: str = "", unit: str = "") -> Claim:
    return Claim("point", value, paper_text=text, unit=unit)


def direction(value: float, text: str = "") -> Claim:
    return Claim("direction", value, reference=1.0, paper_text=text)


def bound(op: str, value: float, paper: float | None = None, text: str = "", unit: str = "",
          digits: int | None = None) -> Claim:
    return Claim("bound", paper, bound=bound_text(op, value, digits), paper_text=text, unit=unit)


def between(low: float, high: float, text: str = "", digits: int = 2) -> Claim:
    """A value the paper places between two of its own (a share at a load between the two it
    gives one for): met in [low, high], both printed with ``digits`` decimals."""
    return Claim("bound", bound=f"in [{low:.{digits}f}, {high:.{digits}f}]", paper_text=text)


def about_one(text: str) -> Claim:
    """A ratio the paper calls equal ("hardly affected", "no difference"): met within
    ABOUT_ONE of 1 on both sides. As a point it would pass anywhere in 0.5-2, so a ratio of
    1.9 would have read "hardly affected"."""
    return between(1 - ABOUT_ONE, 1 + ABOUT_ONE, text)


@dataclass(frozen=True)
class Measure:
    """Ours: a mean over repetitions (or a ratio of two, paired by repetition), its 90%
    interval when there are several, the repetitions and the runs it was read from."""

    value: float = math.nan
    ci: tuple[float, float] | None = None
    repetitions: int = 0
    runs: tuple[str, ...] = ()
    absent: str = ""  # why there is no value, when the helper can tell
    at: str = ""  # the sweep point an extreme was found at

    @property
    def ok(self) -> bool:
        return not missing(self.value)


@dataclass(frozen=True)
class Why:
    text: str
    measured: bool = False


def measured(text: str) -> Why:
    return Why(text, True)


def unexplained(text: str) -> Why:
    return Why(text, False)


@dataclass
class Row:
    experiment: str
    claim: str
    paper: Claim
    ours: Measure
    result_path: str
    scale: str
    why: Why | None = None
    note: str = ""  # shown in the doc whatever the verdict (how ours was measured)

    @property
    def kind(self) -> str:
        return self.paper.kind

    @property
    def ratio(self) -> float | None:
        """ours / the paper's value; never to a bound."""
        if not self.ours.ok or not self.paper.paper_value:
            return None
        return self.ours.value / self.paper.paper_value

    def verdict(self) -> str:
        if not self.ours.ok:
            return "no result"
        if self.kind == "bound":
            return bound_verdict(self.paper.bound, self.ours.value, self.ours.ci)
        reference = self.paper.reference
        if (self.paper.paper_value - reference) * (self.ours.value - reference) <= 0:
            return "opposite"
        if self.kind == "direction":
            if self.ours.ci and min(self.ours.ci) <= reference <= max(self.ours.ci):
                return "undecided"
            alike = departs_alike(self.ours.value, self.paper.paper_value)
        else:
            alike = within_2x(self.ratio)
        return "same direction within 2x" if alike else "same direction beyond 2x"

    def reason(self) -> str:
        if self.verdict() not in NEGATIVE:
            return "—"
        return "measured" if self.why is not None and self.why.measured else "unexplained"

    def why_text(self) -> str:
        """The reason of a negative verdict, or why there is no result (empty otherwise)."""
        verdict = self.verdict()
        if verdict == "no result":
            return (self.why.text if self.why else "") or self.ours.absent or "not measured"
        if verdict in NEGATIVE and self.why is not None:
            return self.why.text
        return ""
