"""M/G/1 closed forms over the papers' size distributions.

Time is measured in units of service: a job of size ``x`` needs ``x`` time units alone on
the server (divide bytes by the link's bytes per second to get seconds). Load
``rho = lam * E[S]``.

* PS: ``E[T(x)] = x / (1 - rho)`` (mean slowdown ``1 / (1 - rho)`` for every size);
* FCFS (Pollaczek-Khinchine): ``E[T(x)] = x + lam E[S^2] / (2 (1 - rho))``;
* SRPT (004 §6.1, Schrage and Miller):
  ``E[T(x)] = lam (m2(x) + x^2 (1 - F(x))) / (2 (1 - lam m1(x))^2) + int_0^x dt / (1 - lam m1(t))``
  with ``m_j(x) = int_0^x t^j dF(t)``;
* one TCP transfer under loss (:func:`tcp_loss_throughput`, Mathis et al. 1997), which
  bounds a large response's transfer under 000 (C)-(J)'s losses whatever the scheduling.

Every distribution gives ``F``, the partial moments ``m1``, ``m2`` and the quantile
function in closed form, so the SRPT integral is the only numerical step (Simpson's rule
on a fine logarithmic grid). Guarantees: functions are vectorized over ``x``; they raise
``ValueError`` naming the bad parameter for loads outside (0, 1) or invalid distributions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import integrate, optimize, special, stats

from sojourn import papers

_SURGE = papers.surge()


class Distribution:
    """A job size distribution with closed-form CDF, partial moments and quantiles."""

    lower: float = 0.0  # no mass below this
    upper: float = math.inf  # no mass above this

    def cdf(self, x):
        raise NotImplementedError

    def partial_moment(self, j: int, x):
        """``int_0^x t^j dF(t)`` for j = 1, 2."""
        raise NotImplementedError

    def ppf(self, q):
        raise NotImplementedError

    @property
    def mean(self) -> float:
        return float(self.partial_moment(1, self.top()))

    @property
    def second_moment(self) -> float:
        return float(self.partial_moment(2, self.top()))

    def top(self) -> float:
        """A size above which the mass is negligible (the upper bound if finite)."""
        return self.upper if math.isfinite(self.upper) else float(self.ppf(1 - 1e-16))


@dataclass(frozen=True)
class Exponential(Distribution):
    mean_size: float

    def __post_init__(self):
        if not self.mean_size > 0:
            raise ValueError(f"exponential mean {self.mean_size!r} must be positive")

    def cdf(self, x):
        return -np.expm1(-np.maximum(np.asarray(x, float), 0) / self.mean_size)

    def partial_moment(self, j, x):
        m, y = self.mean_size, np.maximum(np.asarray(x, float), 0) / self.mean_size
        # int_0^x t^j e^{-t/m}/m dt = m^j * lower incomplete gamma(j+1, x/m)
        return m**j * special.gamma(j + 1) * special.gammainc(j + 1, y)

    def ppf(self, q):
        return -self.mean_size * np.log1p(-np.asarray(q, float))

    def top(self):
        return self.mean_size * 60.0


@dataclass(frozen=True)
class BoundedPareto(Distribution):
    """Bounded Pareto on [k, p] with tail index alpha (004 §6, 000 §6.3)."""

    k: float
    p: float
    alpha: float

    def __post_init__(self):
        if not (0 < self.k < self.p and self.alpha > 0 and math.isfinite(self.p)):
            raise ValueError(f"bounded Pareto needs 0 < k < p < inf and alpha > 0, got k={self.k}, p={self.p}, alpha={self.alpha}")

    @property
    def lower(self):
        return self.k

    @property
    def upper(self):
        return self.p

    @classmethod
    def with_mean(cls, mean: float, alpha: float, p: float = 1e10) -> "BoundedPareto":
        """The bounded Pareto with this mean, tail and upper bound (solving for k)."""
        if not 0 < mean < p:
            raise ValueError(f"mean {mean!r} must be in (0, p={p})")
        log_k = optimize.brentq(lambda lk: math.log(cls(math.exp(lk), p, alpha).mean / mean), -250.0, math.log(mean), xtol=1e-14)
        return cls(math.exp(log_k), p, alpha)

    def _norm(self):
        return 1.0 - (self.k / self.p) ** self.alpha

    def cdf(self, x):
        x = np.clip(np.asarray(x, float), self.k, self.p)
        return (1.0 - (self.k / x) ** self.alpha) / self._norm()

    def partial_moment(self, j, x):
        x = np.clip(np.asarray(x, float), self.k, self.p)
        c = self.alpha * self.k**self.alpha / self._norm()
        e = j - self.alpha
        if abs(e) < 1e-12:
            return c * np.log(x / self.k)
        return c * (x**e - self.k**e) / e

    def ppf(self, q):
        q = np.asarray(q, float)
        return self.k * (1.0 - q * self._norm()) ** (-1.0 / self.alpha)


@dataclass(frozen=True)
class Surge(Distribution):
    """The SURGE empirical model of 004 Table 1: lognormal body below 9020 bytes, bounded
    Pareto tail (k 631.44, alpha 1, p 1e10) above; the tail's weight is that bounded
    Pareto's mass above 9020, the body has the rest (as in crates/sim)."""

    mu: float = _SURGE["body_mu"]
    sigma: float = _SURGE["body_sigma"]
    cut: float = _SURGE["cut_bytes"]
    tail_k: float = _SURGE["tail_k"]
    tail_alpha: float = _SURGE["tail_alpha"]
    p: float = _SURGE["tail_p"]

    @property
    def upper(self):
        return self.p

    def _tail(self) -> BoundedPareto:
        return BoundedPareto(self.cut, self.p, self.tail_alpha)

    def tail_weight(self) -> float:
        whole = BoundedPareto(self.tail_k, self.p, self.tail_alpha)
        return float(1.0 - whole.cdf(self.cut))

    def _body_mass(self):
        return stats.norm.cdf((math.log(self.cut) - self.mu) / self.sigma)

    def _body_partial(self, j, x):
        """int_0^min(x,cut) t^j dLN(t), normalized by the lognormal's mass below the cut."""
        x = np.minimum(np.maximum(np.asarray(x, float), 1e-300), self.cut)
        z = (np.log(x) - self.mu) / self.sigma
        return math.exp(j * self.mu + j * j * self.sigma**2 / 2) * stats.norm.cdf(z - j * self.sigma) / self._body_mass()

    def cdf(self, x):
        w = self.tail_weight()
        return (1 - w) * self._body_partial(0, x) + w * np.where(np.asarray(x, float) >= self.cut, self._tail().cdf(x), 0.0)

    def partial_moment(self, j, x):
        w = self.tail_weight()
        tail = np.where(np.asarray(x, float) >= self.cut, self._tail().partial_moment(j, x), 0.0)
        return (1 - w) * self._body_partial(j, x) + w * tail

    def ppf(self, q):
        q = np.asarray(q, float)
        w = self.tail_weight()
        body_q = np.clip(q / (1 - w), 0, 1) * self._body_mass()
        body = np.exp(self.mu + self.sigma * stats.norm.ppf(body_q))
        tail = self._tail().ppf(np.clip((q - (1 - w)) / w, 0, 1))
        return np.where(q < 1 - w, body, tail)


def tcp_loss_throughput(rtt_s: float, loss: float, segment_bytes: float = 1448) -> float:
    """Bytes per second one long TCP transfer carries at round-trip time ``rtt_s`` and
    independent segment loss ``loss``: ``MSS / RTT * sqrt(3 / (2 p))`` (Mathis, Semke,
    Mahdavi and Ott 1997, eq. 3, periodic loss, no timeouts), an upper estimate where
    retransmission timeouts are frequent. 1448 bytes: a 1500-byte MTU less IP, TCP and the
    timestamp option."""
    if rtt_s <= 0 or not 0 < loss < 1 or segment_bytes <= 0:
        raise ValueError(f"rtt_s {rtt_s!r} must be > 0, loss {loss!r} in (0, 1), segment_bytes {segment_bytes!r} > 0")
    return segment_bytes / rtt_s * math.sqrt(1.5 / loss)


def _check_rho(rho: float):
    if not 0 < rho < 1:
        raise ValueError(f"load rho {rho!r} must be in (0, 1) for a stable M/G/1 queue")


def ps_response(dist: Distribution, rho: float, x):
    """PS mean response time of a job of size x."""
    _check_rho(rho)
    return np.asarray(x, float) / (1 - rho)


def fcfs_response(dist: Distribution, rho: float, x):
    """FCFS mean response time of a job of size x (Pollaczek-Khinchine waiting time + x)."""
    _check_rho(rho)
    lam = rho / dist.mean
    return np.asarray(x, float) + lam * dist.second_moment / (2 * (1 - rho))


class Srpt:
    """M/G/1 SRPT mean response time by size (004 §6.1), tabulated once per (dist, rho)."""

    def __init__(self, dist: Distribution, rho: float, points: int = 20001):
        _check_rho(rho)
        self.dist, self.rho = dist, rho
        self.lam = rho / dist.mean
        start = max(dist.lower, float(dist.ppf(1e-12)), 1e-300)
        self.start = start
        self.log_grid = np.linspace(math.log(start), math.log(dist.top()), points)
        grid = np.exp(self.log_grid)
        # int_start^x dt / (1 - lam m1(t)) with t = e^u; below `start` m1 is negligible, the integrand 1.
        integrand = grid / (1 - self.lam * dist.partial_moment(1, grid))
        self.residence = start + np.concatenate(([0.0], integrate.cumulative_simpson(integrand, x=self.log_grid)))

    def response(self, x):
        """Mean response time of a job of size x."""
        x = np.asarray(x, float)
        d, lam = self.dist, self.lam
        waiting = lam * (d.partial_moment(2, x) + x**2 * (1 - d.cdf(x))) / (2 * (1 - lam * d.partial_moment(1, x)) ** 2)
        below = np.minimum(x, self.start)
        inside = np.interp(np.log(np.maximum(x, self.start)), self.log_grid, self.residence) - self.start
        return waiting + below + inside

    def slowdown(self, x):
        return self.response(x) / np.asarray(x, float)

    def mean_response(self) -> float:
        """E[T] = int E[T(x)] dF(x), by the conditional mean of each grid interval."""
        grid = np.exp(self.log_grid)
        mass = np.diff(self.dist.cdf(grid))
        work = np.diff(self.dist.partial_moment(1, grid))
        keep = mass > 0
        centre = work[keep] / mass[keep]
        below = self.dist.cdf(grid[0])
        return float(np.sum(self.response(centre) * mass[keep]) + below * self.response(grid[0]))

    def mean_slowdown(self) -> float:
        """E[T(S)/S] over the size distribution."""
        grid = np.exp(self.log_grid)
        mass = np.diff(self.dist.cdf(grid))
        centre = np.sqrt(grid[1:] * grid[:-1])
        return float(np.sum(self.slowdown(centre) * mass) / np.sum(mass))


def slowdown_by_percentile(dist: Distribution, rho: float, percentiles) -> np.ndarray:
    """SRPT mean slowdown of the job at each size percentile (0..1) - 004 Figs. 7-8."""
    return Srpt(dist, rho).slowdown(dist.ppf(np.asarray(percentiles, float)))
