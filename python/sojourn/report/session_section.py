"""The report's sessions section (003 §5), for runs whose repetitions hold session data
(``classes.json`` written by the runner in ``workload.mode = "sessions"`` or with
``server.stages``).

Guarantees: everything is recomputed from the saved records and stage series with
:func:`sojourn.analysis.session_metrics.summarize_directory` (so the section follows the
current analysis code); runs without session data are left out and, when no run has
any, :func:`section` returns nothing, leaving the rest of the report as it was.
Measures are means over a run's repetitions; partial repetitions are marked.
"""

from __future__ import annotations

import html

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from sojourn.analysis import session_metrics as sessions  # noqa: E402
from sojourn.analysis.results import Repetition  # noqa: E402
from sojourn.report.figures import png_data_uri  # noqa: E402

CLASS_STYLES = ("-", "--", ":", "-.")
MEASURES = {"response_mean_s": "mean response (s)", "timeout_rate": "request timeout rate",
            "drop_rate": "drop rate (503)", "session_abort_rate": "session abort rate"}


def session_summaries(reps: list[Repetition]) -> dict[tuple[str, int], dict]:
    """Each repetition's session summary, keyed by (run, repetition), recomputed from its files."""
    return {(rep.run, rep.rep): sessions.summarize_directory(rep.directory)
            for rep in reps if rep.has("classes.json")}


def class_table(reps: list[Repetition], summaries: dict, runs: list[str]) -> pd.DataFrame:
    """One row per run and class (and ``all``): the measures averaged over repetitions."""
    rows = []
    for rep in reps:
        summary = summaries.get((rep.run, rep.rep))
        if summary is None:
            continue
        base = {"run": rep.run, "variant": rep.variant or rep.run, "sweep_value": rep.sweep_value,
                "partial": not rep.complete}
        for row in summary["classes"]:
            rows.append({**base, **row, "class": row["name"], "class_index": row["class"]})
        if summary["overall"]:
            rows.append({**base, "class": "all", "class_index": len(summary["class_names"]), **summary["overall"]})
    if not rows:
        return pd.DataFrame()
    frame = pd.DataFrame(rows).drop(columns=["name"], errors="ignore")
    keys = ["run", "variant", "class", "class_index"]
    numeric = ["requests", "sessions", "sessions_aborted", *MEASURES]
    table = frame.groupby(keys, sort=False, dropna=False).agg(
        {**{m: "mean" for m in numeric}, "partial": "any", "sweep_value": "first"}).reset_index()
    order = {run: i for i, run in enumerate(runs)}
    return table.sort_values(["run", "class_index"], key=lambda s: s.map(order) if s.name == "run" else s,
                             kind="stable").reset_index(drop=True)


def _x(rows: pd.DataFrame, position: int) -> np.ndarray:
    """The swept value, or without a sweep the variant's position (one point per run)."""
    values = rows["sweep_value"]
    return values.astype(float).to_numpy() if values.notna().all() else np.full(len(rows), float(position))


def versus_load_figure(table: pd.DataFrame, parameter: str):
    """003 Fig. 9 and Tables 3-6, Fig. 13: mean response time, request timeout rate and
    session abort rate per class vs load, one colour per policy (variant), one line
    style per class (thick: all classes)."""
    figure, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    classes = [c for c in dict.fromkeys(table["class"]) if c != "all"]
    for number, (variant, rows) in enumerate(table.groupby("variant", sort=False)):
        color = colors[number % len(colors)]
        for axis, measure in zip(axes, ("response_mean_s", "timeout_rate", "session_abort_rate")):
            for cls, style in [("all", "-")] + list(zip(classes, CLASS_STYLES[1:] + CLASS_STYLES[:1])):
                line = rows[rows["class"] == cls].sort_values("sweep_value")
                if line.empty:
                    continue
                axis.plot(_x(line, number), line[measure], ls=style, color=color, marker="o", ms=3,
                          lw=2.2 if cls == "all" else 1, label=f"{variant} {cls}")
    swept = table["sweep_value"].notna().all()
    for axis, measure in zip(axes, ("response_mean_s", "timeout_rate", "session_abort_rate")):
        axis.set_xlabel(parameter if swept else "run")
        if not swept:
            variants = list(dict.fromkeys(table["variant"]))
            axis.set_xticks(range(len(variants)), variants)
            axis.set_xlim(-0.5, len(variants) - 0.5)
        axis.set_ylabel(MEASURES[measure])
        axis.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    figure.tight_layout()
    return figure


def over_time_figure(series: dict[str, pd.DataFrame], ylabel: str, title: str):
    """One panel per label, one line per column of its frame (index = time)."""
    labels = list(series)
    figure, axes = plt.subplots(len(labels), 1, figsize=(9, 2.3 * len(labels)), sharex=True, squeeze=False)
    for axis, label in zip(axes[:, 0], labels):
        frame = series[label]
        for column in frame.columns:
            axis.plot(frame.index, frame[column], lw=1, label=str(column))
        axis.set_title(f"{title}: {label}", fontsize=10, loc="left")
        axis.set_ylabel(ylabel)
        axis.grid(alpha=0.3)
        axis.legend(fontsize=7, loc="upper right")
    axes[-1, 0].set_xlabel("time (s)")
    return figure


def anatomy_figure(parts: dict[str, pd.DataFrame]):
    """003 Fig. 10: mean queueing and processing time per completed request of each
    stage, side by side for each labelled run."""
    labels = list(parts)
    stages = sorted(set().union(*[set(p["stage"]) for p in parts.values()]))
    figure, axis = plt.subplots(figsize=(max(6, 1.2 * len(stages) * len(labels)), 3.8))
    width = 0.8 / max(len(labels), 1)
    x = np.arange(len(stages))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for number, label in enumerate(labels):
        color = colors[number % len(colors)]
        frame = parts[label].set_index("stage").reindex(stages)
        offset = x - 0.4 + width * (number + 0.5)
        queueing, processing = frame["queueing_mean_s"].fillna(0), frame["processing_mean_s"].fillna(0)
        axis.bar(offset, queueing, width, color=color, alpha=0.35, label=f"{label} queueing")
        axis.bar(offset, processing, width, bottom=queueing, color=color, label=f"{label} processing")
    axis.set_xticks(x, stages)
    axis.set_ylabel("mean time per completed request (s)")
    axis.legend(fontsize=7)
    axis.grid(alpha=0.3, axis="y")
    return figure


def _figure(uri: str, caption: str) -> str:
    return f'<figure><img src="{uri}" alt="{html.escape(caption)}"><figcaption>{html.escape(caption)}</figcaption></figure>'


def _heaviest(table: pd.DataFrame, summaries: dict, reps: list[Repetition]) -> dict[str, tuple[str, dict]]:
    """For each variant, its run at the highest load (last sweep value) and that run's
    first repetition's session summary."""
    chosen = {}
    for variant, rows in table.groupby("variant", sort=False):
        run = rows.sort_values("sweep_value", kind="stable")["run"].iloc[-1]
        rep = next(r for r in reps if r.run == run and (r.run, r.rep) in summaries)
        chosen[variant] = (run, summaries[(rep.run, rep.rep)])
    return chosen


def section(reps: list[Repetition], runs: list[str], parameter: str) -> list[str]:
    """The HTML parts of the sessions section; empty when no run has session data."""
    summaries = session_summaries(reps)
    if not summaries:
        return []
    table = class_table(reps, summaries, runs)
    if table.empty:
        return []
    bounds = next(iter(summaries.values()))
    classes = ", ".join(f"{name} {bound * 1000:g} ms" for name, bound in zip(bounds["class_names"], bounds["delay_bounds_s"]))
    shown = table[["run", "class", "requests", "sessions", *MEASURES, "partial"]].rename(columns=MEASURES)
    parts = ["<h2>Sessions (003 §5)</h2>",
             f"<p>Class delay bounds: {html.escape(classes)}. A request meets its bound when it is a 200 within its "
             "class's bound; the timeout rate counts every finished request that did not (late, dropped with 503, "
             "failed); a session is aborted when one of its requests did not (003 §5.2). Mean response is over served "
             "(200) requests, as 003 Tables 3-6 average. Means over repetitions.</p>",
             shown.to_html(index=False, border=0, float_format=lambda v: f"{v:.4g}", na_rep="—"),
             _figure(png_data_uri(versus_load_figure(table, parameter)),
                     "Mean response time, request timeout rate and session abort rate per class vs load, one colour "
                     "per policy, thick = all classes (003 Fig. 9, Tables 3-6, Fig. 13)")]
    productivity = {}
    for rep in reps:
        summary = summaries.get((rep.run, rep.rep))
        if summary and summary["productivity"] and rep.rep == min(r.rep for r in reps if r.run == rep.run):
            frame = pd.DataFrame(summary["productivity"]).set_index("t_s")
            productivity.setdefault(rep.variant or rep.run, {})[rep.run] = frame["productivity"]
    if productivity:
        parts.append(_figure(png_data_uri(over_time_figure(
            {variant: pd.DataFrame(lines) for variant, lines in productivity.items()}, "c − e per s", "productivity")),
            "Server productivity over time, requests that met their bound minus those that did not per second "
            "(003 §4.1), one line per run"))
    heaviest = _heaviest(table, summaries, reps)
    queues = {f"{variant} ({run})": pd.DataFrame({k: v for k, v in s["queue_lengths"].items() if k != "t_s"},
                                                 index=s["queue_lengths"]["t_s"])
              for variant, (run, s) in heaviest.items() if s["queue_lengths"]}
    if queues:
        parts.append(_figure(png_data_uri(over_time_figure(queues, "queue length", "stage queues")),
                             "Stage queue lengths over time at the highest load of each policy (003 Figs. 11-12)"))
    anatomy = {f"{variant} ({run})": pd.DataFrame(s["anatomy"]) for variant, (run, s) in heaviest.items() if s["anatomy"]}
    if anatomy:
        parts.append(_figure(png_data_uri(anatomy_figure(anatomy)),
                             "Response-time anatomy: mean queueing (light) and processing (dark) time per completed "
                             "request of each stage at the highest load of each policy (003 Fig. 10)"))
        rows = [pd.DataFrame(s["anatomy"]).assign(run=run) for (run, _), s in summaries.items() if s["anatomy"]]
        frame = pd.concat(rows, ignore_index=True).drop_duplicates(["run", "stage"])
        parts.append(frame[["run", "stage", "completed", "queueing_mean_s", "processing_mean_s", "late", "dropped"]]
                     .to_html(index=False, border=0, float_format=lambda v: f"{v:.4g}"))
    return parts
