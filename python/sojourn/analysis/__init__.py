"""Metrics over per-request records (docs/formats.md), for the report and for notebooks.

Typical use (docs/analysis.md)::

    from sojourn import analysis
    reqs = analysis.requests(analysis.read_records("results/demo/srpt/0/records.csv"))
    analysis.summarize(reqs, link_bps=10e6)["response_mean"]
    analysis.service_inversion_index(reqs.loc[reqs.completed, "size"], reqs.loc[reqs.completed, "response_s"])

Modules: ``records`` (reading, derived per-request times), ``metrics`` (one run),
``inversion`` (001 service inversion and deciles), ``sweeps`` (confidence intervals,
capacity), ``results`` (the results/<experiment>/<run>/<rep>/ layout).
"""

from sojourn.analysis.inversion import decile_composition, service_inversion_index, size_series
from sojourn.analysis.metrics import (by_group, by_size, ccdf, client_group, connect_metrics, counter_metrics, dropped_syn_share,
                                      first_syn_drop_s,
                                      largest_share_mean, per_second, slowdown, slowdown_by_size_percentile, squared_cv,
                                      summarize, utilization_series)
from sojourn.analysis.records import RecordsError, normalize, read_records, requests
from sojourn.analysis.sweeps import (capacity, capacity_of_levels, confidence_interval, next_level, over_repetitions,
                                     swept_users, window_throughput)

__all__ = [
    "capacity_of_levels", "next_level", "swept_users", "window_throughput",
    "by_group", "client_group", "connect_metrics", "dropped_syn_share", "first_syn_drop_s", "by_size", "capacity", "ccdf", "confidence_interval", "counter_metrics", "decile_composition",
    "largest_share_mean", "normalize", "over_repetitions", "per_second", "read_records", "RecordsError",
    "requests", "service_inversion_index", "size_series", "slowdown", "slowdown_by_size_percentile",
    "squared_cv", "summarize", "utilization_series",
]
