"""One self-contained ``report.html`` per experiment, built only from saved results.

Guarantees: the file references nothing outside itself (figures are inline PNG data
URIs, styles inline, no external URL), so it reads offline and can be mailed; it is
written atomically; partial repetitions are marked as such wherever their numbers
appear. Sections: summary table with ratios to the baseline run, response time over
time with overload shaded (000 Fig. 8a-b), CCDF (Fig. 8c), response time vs size (Fig.
8d), connections / SYN drops / link utilization over time (Fig. 6), decile composition
(001 Figs. 5-6), for sweeps the range plots (000 Figs. 9-10 right column) and for load
sweeps the latency profile and service inversion vs load (001 Figs. 1-2, 7); for runs with
session data the sessions section (sojourn.report.session_section, 003 §5); then the load
periods, versions, kernel and parameters.
"""

from __future__ import annotations

import base64
import html
import importlib
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd

from sojourn import analysis
from sojourn.engine import engine_path
from sojourn.analysis.results import TABLE_METRICS, Repetition, open_experiment, run_table
from sojourn.report import figures
from sojourn.report.session_section import section as session_section

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: right; }
th:first-child, td:first-child { text-align: left; }
.partial { color: #b00; }
figure { margin: 1.5em 0; } figcaption { font-size: 0.9em; color: #555; }
img { max-width: 100%; }
pre { background: #f6f6f6; padding: 0.8em; overflow-x: auto; font-size: 0.8em; }
"""

# Sets data-figures on <body> to the number of figures that decoded: the browser test reads it.
CHECK_SCRIPT = """
window.addEventListener('load', function () {
  var ok = Array.prototype.filter.call(document.images, function (i) { return i.complete && i.naturalWidth > 0; });
  document.body.setAttribute('data-figures', String(ok.length));
});
"""


def _representative(reps: list[Repetition], run: str) -> Repetition | None:
    """The repetition whose per-request figures are shown: the first complete one."""
    candidates = [r for r in reps if r.run == run and r.has("records.csv")]
    complete = [r for r in candidates if r.complete]
    return (complete or candidates or [None])[0]


def _format(metric: str, value) -> str:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "—"
    if metric in ("incomplete", "syn_drops", "n"):
        return f"{value:.0f}"
    return f"{value:.3g}"


def _summary_table(table: pd.DataFrame) -> str:
    cells = ["<tr><th>run</th><th>reps</th>" + "".join(f"<th>{html.escape(label)}</th>" for label in TABLE_METRICS.values())
             + "<th>mean ratio</th><th>largest 1% ratio</th></tr>"]
    for _, row in table.iterrows():
        name = html.escape(str(row["run"]))
        mark = ' <span class="partial">(partial or invalid)</span>' if row["partial"] else ""
        values = []
        for metric in TABLE_METRICS:
            text = _format(metric, row[metric])
            if row["n"] > 1 and not np.isnan(row[f"{metric}_lo"]) and row[f"{metric}_hi"] != row[f"{metric}_lo"]:
                text += f" <small>[{_format(metric, row[f'{metric}_lo'])}, {_format(metric, row[f'{metric}_hi'])}]</small>"
            values.append(f"<td>{text}</td>")
        cells.append(f"<tr><td>{name}{mark}</td><td>{row['n']}</td>{''.join(values)}"
                     f"<td>{_format('r', row['mean_ratio'])}</td><td>{_format('r', row['largest_1pct_ratio'])}</td></tr>")
    return "<table>" + "\n".join(cells) + "</table>"


def _figure(uri: str, caption: str) -> str:
    return (f'<figure><img src="{uri}" alt="{html.escape(caption)}">'
            f"<figcaption>{html.escape(caption)}</figcaption></figure>")


def _ideal(rep: Repetition, reqs: pd.DataFrame) -> tuple[pd.DataFrame | None, str]:
    """Ideal fluid PS and SRPT per request on the run's own arrivals and sizes at the
    link's body rate (sojourn.theory.bounds.ideal, issue 7), and a note; (None, why) when
    unavailable. Read from the repetition's ideal.parquet (written when it finished);
    only results older than that file are simulated here, and the note says so."""
    stored = rep.ideal()
    if stored is not None:
        return stored, ""
    try:
        bounds = importlib.import_module("sojourn.theory.bounds")
        engine_path(build=False)  # the report never starts a cargo build
    except (ModuleNotFoundError, FileNotFoundError) as err:
        return None, f"ideal references unavailable: {err}"
    link_bps = bounds.body_rate_bps(rep.link_bps, rep.config.get("network", {}).get("tcp", {}).get("timestamps", True))
    try:
        frame = bounds.ideal(reqs[["request_id", "scheduled_s", "expected_size", "bytes"]], link_bps=link_bps,
                             policies=("ps", "srpt"))
    except (subprocess.CalledProcessError, OSError, ValueError) as err:
        return None, f"ideal references failed: {err}"
    return frame, f"ideal references simulated while rendering: {rep.directory} predates ideal.parquet (result format 1)"


def _ideal_by_size(ideal: pd.DataFrame) -> pd.DataFrame:
    """The ideal schedules' mean response time per logarithmic size bin, one column each."""
    lines = {}
    for policy, rows in ideal.groupby("policy"):
        frame = rows[["size", "response_s"]].assign(completed=True)
        lines[f"ideal {policy.upper()}"] = analysis.by_size(frame).set_index("size_mid")["mean_response_s"]
    return pd.DataFrame(lines).reset_index()


def _ideal_ratio_rows(run: str, reqs: pd.DataFrame, ideal: pd.DataFrame) -> list[dict]:
    """Table rows: the run's measured mean response time over its completed requests
    against ideal PS and SRPT on the same requests ("measured / ideal")."""
    bounds = importlib.import_module("sojourn.theory.bounds")
    return [{"run": run, "ideal policy": row.policy.upper(), "requests": row.requests,
             "measured mean (s)": row.measured_mean_response_s, "ideal mean (s)": row.ideal_mean_response_s,
             "measured / ideal": row.ratio_of_means}
            for row in bounds.ratios(reqs, ideal).itertuples()]


def _bands_table(reps: list[Repetition], runs: list[str]) -> pd.DataFrame | None:
    """Per run (its shown repetition): sent MB and drops per uplink band, or None
    when no run had bands."""
    rows = []
    for run in runs:
        rep = _representative(reps, run)
        bands = rep.bands() if rep else None
        if bands is None:
            continue
        row = {"run": run}
        for _, band in bands.iterrows():
            name = "default" if pd.isna(band["band"]) else f"band {int(band['band'])}"
            row[f"{name} MB"] = round(band["sent_bytes"] / 1e6, 3)
            row[f"{name} drops"] = int(band["dropped"])
        rows.append(row)
    return pd.DataFrame(rows) if rows else None


def _capacity_frames(reps: list[Repetition], runs: list[str]) -> tuple[pd.DataFrame | None, pd.DataFrame | None]:
    """The capacity probes' levels over repetitions (by run and users) and their capacities
    (by run), from each repetition's summary (kept by a publication, so restored repetitions
    count); (None, None) without probes over several levels."""
    probes = [rep for rep in reps if rep.run in runs and analysis.swept_users(rep.summary)]
    if not probes:
        return None, None
    metrics = ["throughput_rps", "server_cpu", "response_mean"]
    levels = pd.DataFrame([{"run": rep.run, **{key: level.get(key, np.nan) for key in ["users", *metrics]}}
                           for rep in probes for level in rep.summary["levels"]])
    capacities = pd.DataFrame([{"run": rep.run, "capacity_rps": rep.summary["capacity_rps"]} for rep in probes])
    return (analysis.over_repetitions(levels, ["run", "users"], metrics),
            analysis.over_repetitions(capacities, ["run"], ["capacity_rps"]))


def _capacity_table(reps: list[Repetition], runs: list[str]) -> pd.DataFrame | None:
    """Run x repetition: the capacity and each level's throughput; None without capacity runs."""
    rows = []
    for rep in reps:
        if rep.run in runs and rep.summary.get("levels"):
            row = {"run": rep.run, "rep": rep.rep,
                   "capacity (req/s)": f"{rep.summary['capacity_rps']:.4g}" + ("*" if rep.summary.get("capacity_at_last_level") else ""),
                   "at users": rep.summary.get("capacity_users")}
            row.update({f"{level['users']} users": level["throughput_rps"] for level in rep.summary["levels"]})
            rows.append(row)
    return pd.DataFrame(rows) if rows else None


def _group_table(reps: list[Repetition], runs: list[str]) -> pd.DataFrame | None:
    """Run x client group: mean/median response and incompletes, averaged over repetitions;
    None when no run has several groups."""
    rows = [{"run": rep.run, "group": name, **stats} for rep in reps if rep.run in runs
            for name, stats in (rep.summary.get("by_group") or {}).items()]
    if not rows:
        return None
    frame = pd.DataFrame(rows)
    columns = ["requests", "completed", "incomplete", "response_mean", "response_median", "response_p95"]
    table = frame.groupby(["run", "group"], sort=False)[columns].mean().reset_index()
    return table.rename(columns={"response_mean": "mean response (s)", "response_median": "median (s)",
                                 "response_p95": "p95 (s)"})


def _export(parts: list[str], export_dir: Path) -> None:
    """Saves every inline figure of ``parts`` as figure-NN.png in ``export_dir``, and
    figures.json listing each file with its caption."""
    export_dir.mkdir(parents=True, exist_ok=True)
    marker = 'src="data:image/png;base64,'
    index = []
    for part in parts:
        if marker in part:
            name = f"figure-{len(index) + 1:02d}.png"
            data = part.split(marker, 1)[1].split('"', 1)[0]
            (export_dir / name).write_bytes(base64.b64decode(data))
            caption = part.split("<figcaption>", 1)[1].split("</figcaption>", 1)[0] if "<figcaption>" in part else ""
            index.append({"file": name, "caption": html.unescape(caption)})
    (export_dir / "figures.json").write_text(json.dumps(index, indent=2) + "\n")


def build_report(directory: str | Path, baseline: str | None = None, export_dir: Path | None = None) -> Path:
    """Writes ``<directory>/report.html`` and returns its path; with ``export_dir``, also
    each figure as a PNG file there."""
    directory = Path(directory)
    experiment = open_experiment(directory, recompute=True)
    reps, spec = experiment.repetitions, experiment.spec
    baseline = baseline or spec.get("baseline") or None
    table = run_table(reps, baseline, order=experiment.runs)
    runs = list(table["run"])
    parts = [f"<h1>{html.escape(directory.name)}</h1>",
             f"<p>{html.escape(spec.get('description', ''))}</p>",
             f"<h2>Summary</h2><p>Means over repetitions with 90% confidence intervals (002 §3.5) where there are "
             f"several; ratios relative to <b>{html.escape(table.attrs['baseline'])}</b>. Response time is measured from "
             f"each request's scheduled time to its last byte; incomplete = requests without a successful final "
             f"attempt.</p>",
             _summary_table(table)]
    capacity = _capacity_table(reps, runs)
    if capacity is not None:
        parts.append("<h2>Capacity</h2><p>Capacity mode (002 §4.4): requests/s completed at each load level after its "
                     "warm-up; the capacity is the most sustained (marked with * when it is the last level: the "
                     "server may not have been saturated).</p>"
                     + capacity.to_html(index=False, float_format=lambda v: f"{v:.4g}", border=0))
    levels, capacities = _capacity_frames(reps, runs)
    if levels is not None:
        parts.append(_figure(figures.png_data_uri(figures.capacity_levels_figure(levels)),
                             "Requests/s, server CPU and mean response time vs users at each level of the capacity "
                             "probe, 90% confidence intervals over the repetitions that reached it (002 Figs. 8-14)"))
    groups = _group_table(reps, runs)
    if groups is not None:
        parts.append("<h2>By client group</h2><p>Each client group's requests (its own WAN conditions), means over "
                     "repetitions: 000 §5.1 (B) reports response time per RTT group.</p>"
                     + groups.to_html(index=False, float_format=lambda v: f"{v:.4g}", border=0))

    per_second, responses, by_size, counters, deciles = {}, {}, {}, {}, {}
    # Completed responses and the share completed, by variant and sweep value (001 Figs. 3-4).
    by_load: dict[str, dict] = {}
    completed_by_load: dict[str, dict] = {}
    sweep_of = dict(zip(table["run"], zip(table["variant"].fillna(""), table["sweep_value"])))
    ideal_lines, ideal_note, ideal_rows, ideal_failed = None, "", [], False
    periods: list[dict] = []
    for run in runs:
        rep = _representative(reps, run)
        if rep is None:
            continue
        label = run + ("" if rep.complete else f" ({rep.status.get('state', 'partial')})")
        reqs = rep.requests()
        per_second[label] = analysis.per_second(reqs)
        done = reqs[reqs["completed"]]
        responses[label] = done["response_s"].to_numpy()
        variant, value = sweep_of.get(run, ("", None))
        if isinstance(value, (int, float)) and value == value and len(reqs):
            by_load.setdefault(variant, {})[float(value)] = responses[label]
            completed_by_load.setdefault(variant, {})[float(value)] = len(done) / len(reqs)
        by_size[label] = analysis.by_size(reqs)
        # Stage responses of session runs are all alike in size: no size series to compose.
        if len(done) >= 10 and not rep.has("classes.json"):
            deciles[label] = analysis.decile_composition(reqs)
        table_counters = rep.table("counters.csv")
        if table_counters is not None:
            counters[label] = table_counters
        periods = periods or rep.periods
        if len(done) and not ideal_failed:
            ideal, note = _ideal(rep, reqs)
            ideal_failed = ideal is None
            ideal_note = ideal_note or note
            if ideal is not None:
                ideal_lines = _ideal_by_size(ideal) if ideal_lines is None else ideal_lines
                ideal_rows += _ideal_ratio_rows(label, reqs, ideal)

    if per_second:
        parts.append("<h2>Response time over time</h2>")
        parts.append(_figure(figures.png_data_uri(figures.response_over_time(per_second, periods)),
                             "Mean response time per 1-second bin of arrival time, overload periods shaded (000 Fig. 8a-b)"))
        parts.append("<h2>Distribution and size</h2>")
        parts.append(_figure(figures.png_data_uri(figures.ccdf_figure(responses)),
                             "Complementary CDF of response times (000 Fig. 8c)"))
        parts.append(_figure(figures.png_data_uri(figures.by_size_figure(by_size, ideal_lines)),
                             "Mean response time vs request size in logarithmic bins (000 Fig. 8d; 004 Figs. 2, 4)"
                             + ("; dashed: ideal fluid PS and SRPT on the first run's arrivals and sizes (sojourn.theory)"
                                if ideal_lines is not None else "") + (f" ({ideal_note})" if ideal_note else "")))
    if ideal_rows:
        parts.append("<h2>Measured against ideal</h2><p>Each run's mean response time over its completed requests "
                     "against ideal fluid processor sharing and SRPT of the same requests (same arrivals and sizes) "
                     "on a link at the uplink's body rate (1448/1514 of its nominal rate): how far the real system is "
                     "from what the policy could achieve (sojourn.theory.bounds, 004 §6).</p>"
                     + pd.DataFrame(ideal_rows).to_html(index=False, float_format=lambda v: f"{v:.4g}", border=0))
    if counters:
        parts.append("<h2>Connections, SYN drops, link</h2>")
        parts.append(_figure(figures.png_data_uri(figures.counters_figure(counters, reps[0].link_bps)),
                             "Established connections, cumulative SYN drops (ListenDrops) and uplink utilization (000 Fig. 6)"))
    if deciles:
        parts.append("<h2>Service inversion</h2>")
        for label, decile_table in deciles.items():
            parts.append(_figure(figures.png_data_uri(figures.deciles_figure(decile_table, label)),
                                 f"{label}: size-series composition of response-time deciles (001 Figs. 5-6)"))

    parameter = spec.get("sweep", {}).get("parameter", "")
    if parameter and table["sweep_value"].notna().any():
        parts.append(f"<h2>Sweep of {html.escape(parameter)}</h2>")
        if capacities is not None:
            capacities = capacities.merge(table[["run", "variant", "sweep_value"]], on="run")
            parts.append(_figure(figures.png_data_uri(figures.range_figure(capacities, parameter, "capacity_rps",
                                                                           "capacity (requests/s)")),
                                 f"Capacity vs {parameter}, 90% confidence intervals (002 Figs. 17-20)"))
        # A capacity probe's repetition has no requests of its own (they are its levels').
        if table["response_mean"].notna().any():
            parts.append(_figure(figures.png_data_uri(figures.range_figure(table, parameter, "response_mean",
                                                                           "mean response time (s)")),
                                 f"Mean response time vs {parameter}, 90% confidence intervals (000 Figs. 9-10, right "
                                 "column)"))
        if parameter.endswith("rho") or parameter.endswith("load_fraction"):
            full = analysis.over_repetitions(
                analysis_results_frame(reps), ["run"], ["response_mean", "response_median", "response_p5", "response_p95"])
            full = full.merge(table[["run", "variant", "sweep_value"]], on="run")
            parts.append(_figure(figures.png_data_uri(figures.latency_profile_figure(full, parameter)),
                                 "Latency profile vs load: mean, median, p5, p95 (001 Figs. 1-2)"))
            if by_load:
                parts.append(_figure(figures.png_data_uri(figures.cdf_by_load_figure(by_load, completed_by_load, parameter)),
                                     "CDF of response times of the completed requests at each load, one panel per "
                                     "variant, from one repetition of each point (001 Figs. 3-4)"))
            parts.append(_figure(figures.png_data_uri(figures.range_figure(table, parameter, "service_inversion", "service inversion")),
                                 "Service inversion vs load (001 Fig. 7)"))

    parts += session_section(reps, runs, parameter)

    bands = _bands_table(reps, runs)
    if bands is not None:
        parts.append("<h2>Uplink priority bands</h2><p>Bytes sent and packets dropped per band of the uplink "
                     "(band 0 = fewest bytes left, 000 §3; default = unclassified: SYN-ACKs, ACKs and every packet "
                     "of a server that sets no priority), from each uplink leaf's qdisc counters after the load.</p>"
                     + bands.to_html(index=False, border=0))
    if periods:
        frame = pd.DataFrame(periods)
        parts.append("<h2>Load periods</h2>" + frame.to_html(index=False, float_format=lambda v: f"{v:.3g}", border=0))
    parts.append("<h2>Versions, kernel and parameters</h2>")
    for run in runs:
        rep = _representative(reps, run) or next(r for r in reps if r.run == run)
        versions = rep.versions()
        versions.pop("testbed", None)
        status = rep.status
        parts.append(f"<h3>{html.escape(run)}</h3><p>status: {html.escape(str(status.get('state')))}"
                     f"{' — ' + html.escape(status.get('reason', '')) if status.get('reason') else ''}</p>"
                     f"<pre>{html.escape(json.dumps({'versions': versions, 'config': rep.config}, indent=2))}</pre>")
    if experiment.spec_text:
        parts.append(f"<h3>spec.toml</h3><pre>{html.escape(experiment.spec_text)}</pre>")

    document = ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
                f"<title>sojourn report: {html.escape(directory.name)}</title><style>{STYLE}</style></head><body>"
                + "\n".join(parts) + f"<script>{CHECK_SCRIPT}</script></body></html>\n")
    if export_dir is not None:
        _export(parts, Path(export_dir))
    out = directory / "report.html"
    tmp = directory / ".report.html.tmp"
    tmp.write_text(document)
    os.replace(tmp, out)
    return out


def analysis_results_frame(reps: list[Repetition]) -> pd.DataFrame:
    from sojourn.analysis.results import summaries
    frame = summaries(reps)
    for column in ("response_median", "response_p5", "response_p95"):
        if column not in frame:
            frame[column] = np.nan
    return frame
