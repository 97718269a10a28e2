"""Size and popularity models, catalogues of objects, and synthetic traces.

A *size model* is a distribution of response sizes in bytes with a vectorized
``quantile(u)`` (u in [0, 1)), an exact ``mean`` and ``sample(n, rng)``. Models by name:

============== ==============================================================
``wc98``       World-Cup-98-like, fitted to 000 §2.1 (parameters in docs/workloads.md)
``nasa``       NASA-like, fitted to the Appendix of 000
``surge``      SURGE empirical model, exactly 004 Table 1
``specweb99``  SPECweb99-like directories of 36 files (001 §2.4)
``bounded_pareto(k, p, alpha)``, ``exponential(mean)`` for theory and simulator
============== ==============================================================

A *catalogue* is a set of objects with fixed sizes and Zipf popularity, so that objects
repeat as on real sites. Sizes are matched to popularity so that the *request* size
distribution follows the model (SURGE's "optimal file/request matching", 002 §3.3):
objects are laid along the quantile axis in a random order, each occupying a stratum
as wide as its popularity, and take the model's quantile at a random point of their
stratum; objects drawing more than 0.1 % of requests are kept below the 90th
percentile (see ``_quantile_order``). Every request-weighted quantile is off by at most
the largest popularity share, and the tail is made of many thin strata.

:func:`make_trace` draws requests from a catalogue with Poisson or on/off-modulated
Poisson arrivals. Everything is a pure function of its arguments and ``seed``: same
seed, same trace. No per-request Python loops.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Protocol

import numpy as np
import pandas as pd
from scipy.special import ndtr, ndtri

from sojourn import papers

from .io import validate_trace


class SizeModel(Protocol):
    name: str

    def quantile(self, u: np.ndarray) -> np.ndarray: ...

    @property
    def mean(self) -> float: ...

    @property
    def maximum(self) -> float: ...


def sample(model: SizeModel, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` independent sizes (whole bytes, at least 1) from ``model``."""
    return to_bytes(model.quantile(rng.random(n)))


def to_bytes(sizes: np.ndarray) -> np.ndarray:
    """Round sizes to whole bytes, at least 1 (a 0-byte object has no body to schedule)."""
    return np.maximum(np.rint(sizes), 1).astype(np.uint64)


def _bounded_pareto_quantile(u: np.ndarray, low: float, high: float, alpha: float) -> np.ndarray:
    # Inverse of F(x) = (1 - (low/x)^alpha) / (1 - (low/high)^alpha) on [low, high].
    return low / (1.0 - u * (1.0 - (low / high) ** alpha)) ** (1.0 / alpha)


def _bounded_pareto_mean(low: float, high: float, alpha: float) -> float:
    ratio = (low / high) ** alpha
    if abs(alpha - 1.0) < 1e-12:
        return low * math.log(high / low) / (1.0 - ratio)
    return alpha * low**alpha * (high ** (1 - alpha) - low ** (1 - alpha)) / ((1 - alpha) * (1 - ratio))


@dataclass(frozen=True)
class LognormalParetoHybrid:
    """Lognormal body on [minimum, cutoff) with probability ``1 - tail_weight`` and a
    bounded Pareto tail on [cutoff, maximum] with probability ``tail_weight``: the
    hybrid that 000 §2.1 and 004 §4.1 describe for web request sizes."""

    name: str
    mu: float
    sigma: float
    minimum: float
    cutoff: float
    alpha: float
    tail_weight: float
    maximum: float

    def __post_init__(self) -> None:
        if not (0 <= self.minimum < self.cutoff < self.maximum):
            raise ValueError(f"{self.name}: need 0 <= minimum < cutoff < maximum, got {self.minimum}, {self.cutoff}, {self.maximum}")
        if not (0 < self.tail_weight < 1) or self.sigma <= 0 or self.alpha <= 0:
            raise ValueError(f"{self.name}: need 0 < tail_weight < 1, sigma > 0, alpha > 0")

    def _body_cdf_bounds(self) -> tuple[float, float]:
        low = 0.0 if self.minimum <= 0 else float(ndtr((math.log(self.minimum) - self.mu) / self.sigma))
        return low, float(ndtr((math.log(self.cutoff) - self.mu) / self.sigma))

    def quantile(self, u: np.ndarray) -> np.ndarray:
        u = np.asarray(u, dtype=np.float64)
        low, high = self._body_cdf_bounds()
        body_mass = 1.0 - self.tail_weight
        in_body = u < body_mass
        body_u = low + (np.minimum(u, body_mass) / body_mass) * (high - low)
        body = np.exp(self.mu + self.sigma * ndtri(np.clip(body_u, low, np.nextafter(high, 0))))
        tail_u = np.clip((u - body_mass) / self.tail_weight, 0.0, 1.0)
        tail = _bounded_pareto_quantile(tail_u, self.cutoff, self.maximum, self.alpha)
        return np.where(in_body, np.clip(body, self.minimum, self.cutoff), tail)

    @property
    def mean(self) -> float:
        low, high = self._body_cdf_bounds()
        # Partial mean of a lognormal: E[X; X < c] = e^(mu + sigma^2/2) Phi((ln c - mu - sigma^2)/sigma).
        shift = self.mu + self.sigma**2
        upper = ndtr((math.log(self.cutoff) - shift) / self.sigma)
        lower = 0.0 if self.minimum <= 0 else ndtr((math.log(self.minimum) - shift) / self.sigma)
        body_mean = math.exp(self.mu + self.sigma**2 / 2) * (upper - lower) / (high - low)
        tail_mean = _bounded_pareto_mean(self.cutoff, self.maximum, self.alpha)
        return (1 - self.tail_weight) * body_mean + self.tail_weight * tail_mean


@dataclass(frozen=True)
class BoundedPareto:
    """Bounded Pareto on [k, p] with shape ``alpha`` (004 §6)."""

    k: float
    p: float
    alpha: float
    name: str = "bounded_pareto"

    def __post_init__(self) -> None:
        if not (0 < self.k < self.p) or self.alpha <= 0:
            raise ValueError(f"bounded_pareto: need 0 < k < p and alpha > 0, got k={self.k}, p={self.p}, alpha={self.alpha}")

    def quantile(self, u: np.ndarray) -> np.ndarray:
        return _bounded_pareto_quantile(np.asarray(u, dtype=np.float64), self.k, self.p, self.alpha)

    @property
    def mean(self) -> float:
        return _bounded_pareto_mean(self.k, self.p, self.alpha)

    @property
    def maximum(self) -> float:
        return self.p


@dataclass(frozen=True)
class Exponential:
    """Exponential sizes with the given mean (bytes)."""

    mean_bytes: float
    name: str = "exponential"

    def __post_init__(self) -> None:
        if not self.mean_bytes > 0:
            raise ValueError(f"exponential: mean must be > 0, got {self.mean_bytes}")

    def quantile(self, u: np.ndarray) -> np.ndarray:
        return -self.mean_bytes * np.log1p(-np.asarray(u, dtype=np.float64))

    @property
    def mean(self) -> float:
        return self.mean_bytes

    @property
    def maximum(self) -> float:
        return math.inf


# 001 §2.4: four classes of nine files each, requested 35/50/14/1 %.
SPECWEB99_CLASS_SHARE = np.array([0.35, 0.50, 0.14, 0.01])
SPECWEB99_FILES_PER_CLASS = 9


def specweb99_sizes() -> np.ndarray:
    """The 36 file sizes of one directory, class-major: (i+1) * 100 * 10^class bytes."""
    steps = np.arange(1, SPECWEB99_FILES_PER_CLASS + 1)
    return np.concatenate([steps * 100 * 10**c for c in range(4)]).astype(np.float64)


SPECWEB99_DIRECTORY_BYTES = float(specweb99_sizes().sum())


@dataclass(frozen=True)
class SpecWeb99:
    """SPECweb99-like data set (001 §2.4): directories of 36 files in four classes
    (100-900 B, 1-9 KB, 10-90 KB, 100-900 KB) requested 35/50/14/1 %, files uniform
    within a class (001 does not say otherwise), directories chosen Zipf(1).
    ``data_set_bytes`` fixes the number of directories (001 uses 3.3 GB)."""

    data_set_bytes: float = 3.3e9
    directory_zipf: float = 1.0
    name: str = "specweb99"

    def __post_init__(self) -> None:
        if self.data_set_bytes < SPECWEB99_DIRECTORY_BYTES:
            raise ValueError(f"specweb99: data set must hold at least one directory ({SPECWEB99_DIRECTORY_BYTES:.0f} bytes)")

    @property
    def directories(self) -> int:
        return int(self.data_set_bytes // SPECWEB99_DIRECTORY_BYTES)

    def file_probabilities(self) -> np.ndarray:
        """Probability of each of a directory's 36 files (class-major order)."""
        return np.repeat(SPECWEB99_CLASS_SHARE / SPECWEB99_FILES_PER_CLASS, SPECWEB99_FILES_PER_CLASS)

    def quantile(self, u: np.ndarray) -> np.ndarray:
        order = np.argsort(specweb99_sizes(), kind="stable")
        cdf = np.cumsum(self.file_probabilities()[order])
        index = np.minimum(np.searchsorted(cdf, np.asarray(u), side="right"), len(cdf) - 1)
        return specweb99_sizes()[order][index]

    @property
    def mean(self) -> float:
        return float(self.file_probabilities() @ specweb99_sizes())

    @property
    def maximum(self) -> float:
        return float(specweb99_sizes().max())


# 000 §2.1: mean ~5 KB, min 41 B, max 2.02 MB, median < 1 KB, p90 9.3 KB, largest <3 %
# of requests carry >50 % of bytes, Pareto tail alpha < 1.5. Fitted by least squares
# (docs/workloads.md gives the fit and the statistics it achieves).
WC98 = LognormalParetoHybrid("wc98", mu=6.8255, sigma=1.8579, minimum=41, cutoff=12053, alpha=1.2014, tail_weight=0.07293, maximum=2.02e6)
# 000 Appendix: mean ~19 KB, min 50 B, max 1.93 MB, largest 2.5 % of requests carry 50 %.
NASA = LognormalParetoHybrid("nasa", mu=8.1626, sigma=1.6033, minimum=50, cutoff=164250, alpha=1.1986, tail_weight=0.02252, maximum=1.93e6)


def surge(max_size: float = 1e10) -> LognormalParetoHybrid:
    """SURGE empirical model, 004 Table 1: lognormal (mu 7.630, sigma 1.001) below
    9020 B, bounded Pareto (k 631.44, alpha 1.0, p 10^10) from 9020 B. The two densities
    of the table are used as written on their ranges; they carry 0.9300 and 0.0700 of
    the probability (sum 1.0000, renormalized). Mean 11108 B as 004 §4.1 states.
    ``max_size`` caps the tail lower than p (004 §4.2's file set peaked at 121 MB)."""
    table = papers.surge()
    mu, sigma, cutoff = table["body_mu"], table["body_sigma"], table["cut_bytes"]
    k, alpha, p = table["tail_k"], table["tail_alpha"], table["tail_p"]
    body_mass = float(ndtr((math.log(cutoff) - mu) / sigma))
    tail_mass = ((k / cutoff) ** alpha - (k / p) ** alpha) / (1 - (k / p) ** alpha)
    return LognormalParetoHybrid("surge", mu, sigma, 0.0, cutoff, alpha, tail_mass / (body_mass + tail_mass), min(p, max_size))


def wc98() -> LognormalParetoHybrid:
    return WC98


def nasa() -> LognormalParetoHybrid:
    return NASA


def specweb99(data_set_bytes: float = 3.3e9) -> SpecWeb99:
    return SpecWeb99(data_set_bytes=data_set_bytes)


def bounded_pareto(k: float, p: float, alpha: float) -> BoundedPareto:
    return BoundedPareto(k, p, alpha)


def exponential(mean: float) -> Exponential:
    return Exponential(mean)


MODELS: dict[str, Callable[..., SizeModel]] = {
    "wc98": wc98,
    "nasa": nasa,
    "surge": surge,
    "specweb99": specweb99,
    "bounded_pareto": bounded_pareto,
    "exponential": exponential,
}

# Catalogue sizes used when the caller does not choose: 20000 objects (our choice, enough
# that no cold object carries a visible share of the tail); SURGE's file set had 2000
# files (004 §4.2, 002 §3.3).
DEFAULT_OBJECTS = {"surge": 2000}
DEFAULT_OBJECT_COUNT = 20000


def model_by_name(name: str, **params: float) -> SizeModel:
    """The model called ``name`` with ``params``; errors list the accepted names."""
    try:
        factory = MODELS[name]
    except KeyError:
        raise ValueError(f"unknown size model {name!r}; accepted: {', '.join(MODELS)}") from None
    try:
        return factory(**params)
    except TypeError as error:
        raise ValueError(f"size model {name!r}: {error}") from None


def zipf_weights(n: int, alpha: float) -> np.ndarray:
    """Popularity of ranks 1..n proportional to rank^-alpha, summing to 1."""
    weights = np.arange(1, n + 1, dtype=np.float64) ** -alpha
    return weights / weights.sum()


@dataclass
class Catalogue:
    """Objects with fixed sizes and a popularity (probability of each request)."""

    paths: np.ndarray  # object array of str
    sizes: np.ndarray  # uint64
    popularity: np.ndarray  # float64, sums to 1
    _cdf: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._cdf = np.cumsum(self.popularity)
        self._cdf[-1] = 1.0

    def __len__(self) -> int:
        return len(self.sizes)

    def draw(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """Indices of ``n`` independent requests by popularity."""
        return np.searchsorted(self._cdf, rng.random(n), side="right").clip(0, len(self) - 1)


def build_catalogue(model: SizeModel, n_objects: int | None, zipf_alpha: float, rng: np.random.Generator) -> Catalogue:
    """A catalogue whose request-weighted size distribution follows ``model``."""
    if isinstance(model, SpecWeb99):
        return _specweb99_catalogue(model)
    n = n_objects or DEFAULT_OBJECTS.get(model.name, DEFAULT_OBJECT_COUNT)
    if n < 1:
        raise ValueError(f"n_objects must be >= 1, got {n}")
    popularity = zipf_weights(n, zipf_alpha)
    order = _quantile_order(popularity, rng)
    upper = np.cumsum(popularity[order])
    u = upper - popularity[order] * rng.random(n)
    sizes = np.empty(n, dtype=np.uint64)
    sizes[order] = to_bytes(model.quantile(np.clip(u, 0.0, np.nextafter(1.0, 0))))
    width = len(str(n - 1))
    paths = np.array([f"/o/{i:0{width}d}.bin" for i in range(n)], dtype=object)
    return Catalogue(paths, sizes, popularity)


# Objects drawing more than this share of requests are "hot". Hot objects are kept out
# of the top TAIL_RESERVED of the request-size distribution: a hot object (Zipf(1) over
# 20000 objects gives the first 9.5 % of requests) placed in the tail would carry more
# bytes than the rest of the tail together and make the trace's mean a lottery. The
# tail is then made of many small strata, so its statistics are stable across seeds.
HOT_SHARE = 0.001
TAIL_RESERVED = 0.10


def _quantile_order(popularity: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Order of objects along the quantile axis: random, except that hot objects are
    inserted at random places among the cold objects that end before 1 - TAIL_RESERVED."""
    hot = np.flatnonzero(popularity > HOT_SHARE)
    cold = rng.permutation(np.flatnonzero(popularity <= HOT_SHARE))
    room = 1.0 - TAIL_RESERVED - popularity[hot].sum()
    if hot.size == 0 or room <= 0:
        return rng.permutation(len(popularity))
    # Cold objects ending at or below `room` of cold mass can have hot objects before them.
    slots = int(np.searchsorted(np.cumsum(popularity[cold]), room, side="right"))
    positions = np.sort(rng.integers(0, slots + 1, hot.size))
    return np.insert(cold, positions, rng.permutation(hot))


def _specweb99_catalogue(model: SpecWeb99) -> Catalogue:
    directories = model.directories
    popularity = np.outer(zipf_weights(directories, model.directory_zipf), model.file_probabilities()).ravel()
    sizes = np.tile(specweb99_sizes(), directories).astype(np.uint64)
    names = [f"class{c}_{i}" for c in range(4) for i in range(SPECWEB99_FILES_PER_CLASS)]
    paths = np.array([f"/specweb/dir{d:05d}/{name}" for d in range(directories) for name in names], dtype=object)
    return Catalogue(paths, sizes, popularity)


def poisson_arrivals(n: int, rate: float, rng: np.random.Generator) -> np.ndarray:
    """``n`` Poisson arrival times (seconds) at ``rate`` per second, starting at 0."""
    gaps = rng.exponential(1.0 / rate, n)
    gaps[0] = 0.0
    return np.cumsum(gaps)


def on_off_arrivals(n: int, rate: float, on_s: float, off_s: float, rng: np.random.Generator) -> np.ndarray:
    """On/off-modulated Poisson arrivals with long-run ``rate``: exponential ON periods
    (mean ``on_s``) with arrivals at rate * (on_s + off_s) / on_s, silent exponential OFF
    periods (mean ``off_s``). Arrivals are drawn on the ON-time axis, then every
    completed ON period pushes later arrivals back by the OFF period that follows it."""
    if on_s <= 0 or off_s < 0:
        raise ValueError(f"on/off arrivals need on_s > 0 and off_s >= 0, got {on_s}, {off_s}")
    on_rate = rate * (on_s + off_s) / on_s
    on_time = poisson_arrivals(n, on_rate, rng)
    periods = int(on_time[-1] / on_s * 1.2) + 16
    on_ends = np.cumsum(rng.exponential(on_s, periods))
    while on_ends[-1] < on_time[-1]:
        on_ends = np.concatenate([on_ends, on_ends[-1] + np.cumsum(rng.exponential(on_s, periods))])
    off_before = np.concatenate([[0.0], np.cumsum(rng.exponential(off_s, len(on_ends)))])
    return on_time + off_before[np.searchsorted(on_ends, on_time, side="right")]


def apply_locality(objects: np.ndarray, probability: float, mean_distance: float, rng: np.random.Generator) -> np.ndarray:
    """Temporal locality in the spirit of SURGE: each request, with ``probability``,
    repeats the object requested a lognormally distributed number of requests earlier
    (mean ``mean_distance``, sigma 1). The popularity marginal is unchanged, since a
    repeat copies an earlier draw. Resolved by pointer jumping (log-depth, vectorized)."""
    if probability <= 0:
        return objects
    n = len(objects)
    sigma = 1.0
    distance = np.rint(rng.lognormal(math.log(mean_distance) - sigma**2 / 2, sigma, n)).astype(np.int64).clip(1)
    index = np.arange(n)
    source = np.where((rng.random(n) < probability) & (distance <= index), index - distance, index)
    while True:
        jumped = source[source]
        if np.array_equal(jumped, source):
            break
        source = jumped
    return objects[source]


ARRIVALS = ("poisson", "onoff")


def _arrivals(kind: str, n: int, rate: float, on_s: float, off_s: float, rng: np.random.Generator) -> np.ndarray:
    if kind == "poisson":
        return poisson_arrivals(n, rate, rng)
    return on_off_arrivals(n, rate, on_s, off_s, rng)


def make_trace(
    model: SizeModel | str = "wc98",
    n_requests: int | None = None,
    duration_s: float | None = None,
    rate: float | None = None,
    rho: float | None = None,
    link_bps: float | None = None,
    clients: int = 100,
    seed: int = 0,
    n_objects: int | None = None,
    zipf_alpha: float = 1.0,
    arrivals: str = "poisson",
    on_s: float = 1.0,
    off_s: float = 1.0,
    locality: float = 0.0,
    locality_mean_distance: float = 100.0,
) -> pd.DataFrame:
    """A synthetic trace (columns ``arrival_s, client, path, size`` of docs/formats.md).

    Give the length as ``n_requests`` or ``duration_s``, and the intensity as ``rate``
    (requests/s) or as offered load ``rho`` on a link of ``link_bps`` bits/s (000 §2.2:
    rate = rho * link_bps / 8 / mean size). Clients are chosen uniformly.
    """
    if isinstance(model, str):
        model = model_by_name(model)
    if (n_requests is None) == (duration_s is None):
        raise ValueError("give exactly one of n_requests or duration_s")
    if rate is None:
        if rho is None or link_bps is None:
            raise ValueError("give rate (requests/s), or rho together with link_bps")
        if rho <= 0 or link_bps <= 0:
            raise ValueError(f"rho and link_bps must be > 0, got {rho}, {link_bps}")
        rate = rho * link_bps / 8.0 / model.mean
    elif rho is not None:
        raise ValueError("give either rate or rho, not both")
    if not rate > 0:
        raise ValueError(f"rate must be > 0 requests/s, got {rate}")
    if clients < 1:
        raise ValueError(f"clients must be >= 1, got {clients}")
    if arrivals not in ARRIVALS:
        raise ValueError(f"unknown arrival process {arrivals!r}; accepted: {', '.join(ARRIVALS)}")
    rng = np.random.default_rng(seed)
    catalogue = build_catalogue(model, n_objects, zipf_alpha, rng)
    n = n_requests if n_requests is not None else int(rate * duration_s + 8 * math.sqrt(rate * duration_s) + 16)
    if n < 1:
        raise ValueError(f"n_requests must be >= 1, got {n}")
    times = _arrivals(arrivals, n, rate, on_s, off_s, rng)
    while duration_s is not None and times[-1] < duration_s:
        # Bursty arrivals can fall short of the duration: extend the same process.
        more = _arrivals(arrivals, n, rate, on_s, off_s, rng)
        times = np.concatenate([times, times[-1] + rng.exponential(1.0 / rate) + more])
    if duration_s is not None:
        n = int(np.searchsorted(times, duration_s, side="left"))
        times = times[:n]
    objects = apply_locality(catalogue.draw(n, rng), locality, locality_mean_distance, rng)
    trace = pd.DataFrame(
        {
            "arrival_s": times,
            "client": rng.integers(0, clients, n).astype(np.uint32),
            "path": catalogue.paths[objects],
            "size": catalogue.sizes[objects],
        }
    )
    validate_trace(trace, source=f"make_trace({model.name})")
    return trace
