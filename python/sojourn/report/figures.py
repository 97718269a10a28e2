"""The report's figures, each a function from analysis tables to a matplotlib Figure.

Every figure is drawn only from sojourn.analysis outputs (so the report can be redrawn
offline from saved results) and encoded by :func:`png_data_uri` as an inline PNG, so the
HTML needs no external file or URL.
"""

from __future__ import annotations

import base64
import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from sojourn import analysis  # noqa: E402
from sojourn.workloads import shaping  # noqa: E402


def png_data_uri(figure) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    plt.close(figure)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


def response_over_time(per_run: dict[str, pd.DataFrame], periods: list[dict]):
    """000 Fig. 8(a-b): mean response time per 1-s bin of arrival time, one panel per
    run, overload periods shaded."""
    runs = list(per_run)
    figure, axes = plt.subplots(len(runs), 1, figsize=(9, 2.4 * len(runs)), sharex=True, sharey=True, squeeze=False)
    for axis, run in zip(axes[:, 0], runs):
        table = per_run[run]
        for start, end in shaping.overload_spans(periods):
            axis.axvspan(start, end, color="tab:red", alpha=0.12, lw=0)
        axis.plot(table["t_s"], table["mean_response_s"], lw=1.2)
        axis.set_ylabel("mean resp. (s)")
        axis.set_title(run, fontsize=10, loc="left")
        axis.grid(alpha=0.3)
    axes[-1, 0].set_xlabel("arrival time (s); shaded: overload periods (rho > 1)")
    return figure


def ccdf_figure(responses: dict[str, np.ndarray]):
    """000 Fig. 8(c): CCDF of response times, log-log, all runs."""
    figure, axis = plt.subplots(figsize=(6, 4))
    for run, values in responses.items():
        table = analysis.ccdf(values)
        table = table[table["ccdf"] > 0]
        axis.loglog(table["x"], table["ccdf"], label=run)
    axis.set_xlabel("response time x (s)")
    axis.set_ylabel("P(response time > x)")
    axis.grid(alpha=0.3, which="both")
    _legend_beside(axis, len(responses))
    return figure


def _legend_beside(axis, entries: int) -> None:
    """A legend inside the axes while it is short, to their right once it would cover the lines."""
    if entries <= 6:
        axis.legend(fontsize=8)
    else:
        axis.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)


def cdf_by_load_figure(responses: dict[str, dict[float, np.ndarray]], completed: dict[str, dict[float, float]],
                       parameter: str):
    """001 Figs. 3-4: each server's latency CDF at each load level, one panel per variant
    (response time on a log axis, one line per sweep value). A line whose run completed less
    than 99% of its requests says what share it is of."""
    variants = list(responses)
    columns = min(2, len(variants))
    rows = -(-len(variants) // columns)
    figure, axes = plt.subplots(rows, columns, figsize=(5.5 * columns, 3.6 * rows), squeeze=False, sharex=True,
                                sharey=True)
    for axis, variant in zip(axes.flat, variants):
        for value in sorted(responses[variant]):
            values = np.sort(responses[variant][value])
            if not len(values):
                continue
            share = completed[variant][value]
            label = f"{value:g}" + (f" ({share:.0%} completed)" if share < 0.99 else "")
            axis.semilogx(values, np.arange(1, len(values) + 1) / len(values), label=label)
        axis.set_title(variant or "run", fontsize=10, loc="left")
        axis.grid(alpha=0.3, which="both")
        axis.legend(fontsize=7, title=parameter.rsplit(".", 1)[-1], title_fontsize=7)
    for axis in axes.flat[len(variants):]:
        axis.set_visible(False)
    for axis in axes[-1]:
        axis.set_xlabel("response time x (s)")
    for axis in axes[:, 0]:
        axis.set_ylabel("P(response time <= x)")
    figure.tight_layout()
    return figure


def by_size_figure(per_run: dict[str, pd.DataFrame], ideal: pd.DataFrame | None = None):
    """000 Fig. 8(d), 004 Figs. 2 and 4: mean response time vs request size."""
    figure, axis = plt.subplots(figsize=(6, 4))
    for run, table in per_run.items():
        axis.loglog(table["size_mid"], table["mean_response_s"], marker="o", ms=3, label=run)
    if ideal is not None:
        for column in [c for c in ideal.columns if c != "size_mid"]:
            axis.loglog(ideal["size_mid"], ideal[column], ls="--", lw=1, label=column)
    axis.set_xlabel("request size (bytes, log bins)")
    axis.set_ylabel("mean response time (s)")
    axis.grid(alpha=0.3, which="both")
    axis.legend(fontsize=8)
    return figure


def counters_figure(per_run: dict[str, pd.DataFrame], link_bps: float):
    """000 Fig. 6: open connections and SYN drops over time; plus link utilization."""
    figure, axes = plt.subplots(3, 1, figsize=(9, 6.5), sharex=True)
    for run, counters in per_run.items():
        t = counters["t_s"]
        if "established" in counters:
            axes[0].plot(t, counters["established"], label=run, lw=1)
        drops = counters.get("listen_drops", counters.get("listen_overflows"))
        if drops is not None:
            axes[1].plot(t, drops - drops.iloc[0], label=run, lw=1)
        if "uplink_tx_bytes" in counters:
            utilization = analysis.utilization_series(counters, link_bps)
            axes[2].plot(utilization["t_s"], utilization["utilization"], label=run, lw=1)
    axes[0].set_ylabel("established")
    axes[1].set_ylabel("SYN drops (cum.)")
    axes[2].set_ylabel("uplink utilization")
    axes[2].set_xlabel("time (s)")
    for axis in axes:
        axis.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    return figure


def deciles_figure(table: pd.DataFrame, run: str):
    """001 Figs. 5-6: composition of each response-time decile by size series."""
    figure, axis = plt.subplots(figsize=(6, 3.2))
    bottom = np.zeros(len(table))
    series_info = {s["series"]: s for s in table.attrs.get("series", [])}
    for series in table.columns:
        info = series_info.get(series)
        label = f"series {series}" + (f": {info['min']:.0f}-{info['max']:.0f} B ({info['share']:.0%})" if info else "")
        axis.bar(table.index + 1, table[series], bottom=bottom, label=label)
        bottom += table[series].to_numpy()
    axis.set_xlabel("response-time decile (1 = fastest 10%)")
    axis.set_ylabel("share of decile")
    axis.set_title(run, fontsize=10, loc="left")
    axis.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return figure


def capacity_levels_figure(levels: pd.DataFrame):
    """002 Figs. 9-14: requests/s, server CPU and mean response time vs the users of each
    load level of a capacity probe, one line per run, 90% confidence intervals over the
    repetitions that reached the level (``levels``: over_repetitions by run and users)."""
    panels = (("throughput_rps", "requests/s"), ("server_cpu", "server CPU (cores)"),
              ("response_mean", "mean response (s)"))
    figure, axes = plt.subplots(len(panels), 1, figsize=(9, 7.5), sharex=True)
    for run, rows in levels.groupby("run", sort=False):
        rows = rows.sort_values("users")
        for axis, (metric, _) in zip(axes, panels):
            axis.errorbar(rows["users"], rows[metric],
                          yerr=[rows[metric] - rows[f"{metric}_lo"], rows[f"{metric}_hi"] - rows[metric]],
                          marker="o", ms=3, capsize=2, lw=1, label=run)
    for axis, (_, label) in zip(axes, panels):
        axis.set_ylabel(label)
        axis.set_xscale("log", base=2)
        axis.grid(alpha=0.3, which="both")
    axes[2].set_yscale("log")
    axes[-1].set_xlabel("users (load level of the capacity probe)")
    _legend_beside(axes[0], levels["run"].nunique())
    return figure


def range_figure(table: pd.DataFrame, parameter: str, metric: str, label: str):
    """000 Figs. 9-10 (right column): a metric vs the swept parameter, one line per
    variant, with 90% confidence intervals over repetitions."""
    figure, axis = plt.subplots(figsize=(6, 3.6))
    numeric = pd.to_numeric(table["sweep_value"], errors="coerce").notna().all()
    # Named points (e.g. workload.profile W1..W10) keep the spec's order on a categorical axis.
    order = list(dict.fromkeys(table["sweep_value"]))
    for variant, rows in table.groupby("variant", sort=False):
        if numeric:
            rows = rows.sort_values("sweep_value")
            x = rows["sweep_value"].astype(float)
        else:
            rows = rows.assign(position=rows["sweep_value"].map(order.index)).sort_values("position")
            x = rows["position"]
        axis.errorbar(x, rows[metric], yerr=[rows[metric] - rows[f"{metric}_lo"], rows[f"{metric}_hi"] - rows[metric]],
                      marker="o", capsize=3, label=variant or "run")
    if not numeric:
        axis.set_xticks(range(len(order)), [str(value) for value in order])
    axis.set_xlabel(parameter)
    axis.set_ylabel(label)
    axis.grid(alpha=0.3)
    axis.legend()
    return figure


def latency_profile_figure(table: pd.DataFrame, parameter: str):
    """001 Figs. 1-2: mean, median, p5 and p95 of response time vs load."""
    figure, axis = plt.subplots(figsize=(6, 4))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for number, (variant, rows) in enumerate(table.groupby("variant", sort=False)):
        rows = rows.sort_values("sweep_value")
        x = rows["sweep_value"].astype(float)
        # One colour per variant, one line style per statistic.
        for metric, style in (("response_mean", "-"), ("response_median", "--"), ("response_p5", ":"), ("response_p95", "-.")):
            if metric in rows:
                axis.semilogy(x, rows[metric], ls=style, color=colors[number % len(colors)], marker="o", ms=3,
                              label=f"{variant or 'run'} {metric.split('_')[1]}")
    axis.set_xlabel(parameter)
    axis.set_ylabel("response time (s)")
    axis.grid(alpha=0.3, which="both")
    axis.legend(fontsize=7)
    return figure
