"""Service inversion (001 §3.2-3.3): how far the order of responses by response time is
from their order by size.

Service-inversion index, 001 eq. (3): Σ_i |position of i by response time − position of
i by size| / ⌊n²/2⌋, where ⌊n²/2⌋ is the total distance of the fully reversed order
(the maximum of this distance, Spearman's footrule). 0 = responses finish in size
order, 1 = in reverse size order. The paper's example: sizes a<b<c<d<e finishing in
the order b, c, a, d, e gives 4/12 = 0.33.

Ties, which the paper does not discuss and which real workloads are full of (objects
repeat): among equal sizes any order is ideal, so the size order breaks ties by
response time; among equal response times, the time order breaks ties by size. Both
choices give the smallest distance consistent with the definition, so a server that
serves in size order scores exactly 0 whatever the ties. Cost: two O(n log n) sorts.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def service_inversion_index(sizes: np.ndarray, response_times: np.ndarray) -> float:
    """001 eq. (3) over paired arrays (completed requests only; NaNs are dropped pairwise)."""
    sizes = np.asarray(sizes, dtype=float)
    times = np.asarray(response_times, dtype=float)
    if sizes.shape != times.shape:
        raise ValueError(f"sizes ({sizes.shape}) and response times ({times.shape}) differ in shape")
    keep = ~(np.isnan(sizes) | np.isnan(times))
    sizes, times = sizes[keep], times[keep]
    n = sizes.size
    if n < 2:
        return 0.0
    by_size = np.lexsort((times, sizes))     # primary key last: size, then time
    by_time = np.lexsort((sizes, times))     # time, then size
    position_by_size = np.empty(n, dtype=np.int64)
    position_by_size[by_size] = np.arange(n)
    position_by_time = np.empty(n, dtype=np.int64)
    position_by_time[by_time] = np.arange(n)
    distance = np.abs(position_by_time - position_by_size).sum()
    return float(distance / (n * n // 2))


def size_series(sizes: np.ndarray, series: int = 4) -> np.ndarray:
    """Series numbers 0..series-1 grouping requests by size so that the series' request
    counts are as equal as possible without splitting one size across two series
    (001 Table 1: four series of ~25% each)."""
    sizes = np.asarray(sizes, dtype=float)
    if sizes.size == 0:
        return np.zeros(0, dtype=int)
    distinct, counts = np.unique(sizes, return_counts=True)
    cumulative = np.cumsum(counts) / sizes.size
    # A distinct size goes to the series in which the middle of its mass lies.
    middle = cumulative - counts / (2 * sizes.size)
    series_of_distinct = np.minimum((middle * series).astype(int), series - 1)
    return series_of_distinct[np.searchsorted(distinct, sizes)]


def decile_composition(requests: pd.DataFrame, series: int = 4) -> pd.DataFrame:
    """001 Figs. 5-6: completed requests ranked by response time into deciles (0 =
    fastest 10%); per decile the fraction of responses from each size series. Also
    returns each series' size range and share of requests (001 Table 1) via
    ``DataFrame.attrs['series']``."""
    done = requests[requests["completed"]]
    sizes = done["size"].to_numpy(dtype=float)
    labels = size_series(sizes, series)
    order = np.lexsort((sizes, done["response_s"].to_numpy()))
    decile = np.empty(len(done), dtype=int)
    decile[order] = np.arange(len(done)) * 10 // max(len(done), 1)
    table = pd.crosstab(pd.Series(decile, name="decile"), pd.Series(labels, name="series"), normalize="index")
    table = table.reindex(index=range(10), columns=range(series), fill_value=0.0)
    info = pd.DataFrame({"series": labels, "size": sizes}).groupby("series")["size"].agg(["min", "max", "count"])
    info["share"] = info["count"] / max(len(done), 1)
    table.attrs["series"] = info.reset_index().to_dict("records")
    return table
