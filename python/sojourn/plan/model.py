"""The traffic conformation inequality and session generation rates (003 §3).

Notation follows 003 Table 1: ``P`` the stage transition matrix (``P[a, b]``
from stage a to b), ``T`` the processing time of each stage, ``d[p, i]`` the
delay bound of class ``p`` at stage ``i`` (classes in priority order, highest
first), ``r_rs`` the request/session ratio.

For each class ``p`` in priority order and each stage ``i`` (003 eqs. 1-3):

- lower bound ``1 / (T_i + d[p, i])``: a request must turn around within its
  processing time plus its delay bound, so the stage must sustain at least that
  rate for the class (eq. 1, with arrivals equal to departures in steady state);
- the admissible arrival rate ``lambda[p, i]`` is set to that lower bound, as
  003 §3 does "in practice", so it leaves the most room to lower classes;
- upper bound ``sum_k mu[p, k] * P[k, i]`` with
  ``mu[p, k] = lambda[p, k] / sum_{j <= p} lambda[j, k] * T_k``: under
  pre-emptive priority, class p leaves stage k no faster than its share of the
  stage's service left by higher classes, and stage i receives what the other
  stages pass on (eqs. 2-3).

The plan is feasible when every lower bound is at most its upper bound and the
total CPU demand ``sum lambda[p, i] * T_i`` fits in the CPUs (that last check is
not in 003, which assumes it implicitly). Session generation rates follow eq. 4
as printed: ``phi_p = r_rs * sum_i lambda[p, i]``.

Everything here is pure: specs in, :class:`Plan` out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

# Relative slack when comparing bounds, so a bound met exactly is not refused
# for rounding.
TOLERANCE = 1e-9


@dataclass(frozen=True)
class PlanSpec:
    """Inputs of a capacity plan; see :func:`sojourn.plan.spec.parse_spec`."""

    stages: tuple[str, ...]
    processing_times: np.ndarray  # shape (n,)
    transitions: np.ndarray  # shape (n, n), rows sum to one
    classes: tuple[str, ...]
    delay_bounds: np.ndarray  # shape (m, n)
    request_session_ratio: float
    cpus: float = 1.0


@dataclass
class Plan:
    """Admissible arrival rates per class and stage, and why a spec fails."""

    spec: PlanSpec
    lower: np.ndarray  # (m, n) 1 / (T + d)
    upper: np.ndarray  # (m, n) eq. 3's right-hand side
    arrival_rates: np.ndarray  # (m, n) lambda, set to the lower bound
    session_rates: np.ndarray  # (m,) eq. 4
    utilization: float  # CPU demand over the CPUs
    problems: list[str] = field(default_factory=list)

    @property
    def feasible(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict:
        spec = self.spec

        def per_stage(values: np.ndarray) -> dict[str, dict[str, float]]:
            return {c: {s: float(values[p, i]) for i, s in enumerate(spec.stages)} for p, c in enumerate(spec.classes)}

        return {
            "feasible": self.feasible,
            "stages": list(spec.stages),
            "classes": list(spec.classes),
            "arrival_rates": per_stage(self.arrival_rates),
            "lower_bounds": per_stage(self.lower),
            "upper_bounds": per_stage(self.upper),
            "session_rates": {c: float(self.session_rates[p]) for p, c in enumerate(spec.classes)},
            "utilization": float(self.utilization),
            "problems": list(self.problems),
        }


def plan(spec: PlanSpec) -> Plan:
    """Computes the admissible rates of ``spec`` (003 eqs. 1-4)."""
    times = spec.processing_times
    m, n = spec.delay_bounds.shape
    lower = 1.0 / (times[None, :] + spec.delay_bounds)
    rates = lower.copy()
    upper = np.empty_like(lower)
    problems: list[str] = []
    for p in range(m):
        # Work per unit time at each stage from classes 1..p (eq. 1's denominator).
        work = (rates[: p + 1] * times[None, :]).sum(axis=0)
        departures = rates[p] / work
        upper[p] = departures @ spec.transitions
        for i in range(n):
            if lower[p, i] > upper[p, i] * (1 + TOLERANCE):
                problems.append(
                    f"class {spec.classes[p]!r} at stage {spec.stages[i]!r}: meeting delay bound "
                    f"{spec.delay_bounds[p, i]:g} with processing time {times[i]:g} needs an arrival rate of at "
                    f"least {lower[p, i]:.4g} (1/(T+d), 003 eq. 1), but the stages feeding it can pass on at most "
                    f"{upper[p, i]:.4g} for this class under priority scheduling (eq. 3); relax this class's "
                    f"delay bound, lighten the higher-priority classes, or shorten processing times"
                )
    demand = float((rates * times[None, :]).sum())
    utilization = demand / spec.cpus
    if utilization > 1 + TOLERANCE:
        share = (rates * times[None, :]).sum(axis=1) / spec.cpus
        breakdown = ", ".join(f"{c} {s:.3f}" for c, s in zip(spec.classes, share))
        problems.append(
            f"CPU demand {utilization:.3f} of {spec.cpus:g} CPU(s) exceeds 1 ({breakdown}): the admissible rates "
            f"cannot all be served; relax delay bounds, drop a class or add CPUs"
        )
    sessions = spec.request_session_ratio * rates.sum(axis=1)
    return Plan(spec, lower, upper, rates, sessions, utilization, problems)
