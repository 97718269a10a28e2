"""Reading an experiment's result directory (layout in sojourn.runner.layout) into
tables: one row per run × repetition, and one per run with 90% confidence intervals;
:class:`Experiment` (``sojourn.results.open``) gives them, and every repetition's
records and interval series, as pandas DataFrames (docs/analysis.md "Notebooks").

Result format versions (``format.json`` in each repetition directory, ``{"version": N}``):

- 1 (no ``format.json``): CSV only (records.csv, intervals.csv) and summary.json.
- 2: as 1, plus ``records.parquet`` and ``intervals.parquet`` (zstd, the column types of
  docs/formats.md) and ``ideal.parquet`` (ideal fluid PS and SRPT of the repetition's
  requests, sojourn.theory.bounds.ideal), written when the repetition finishes by
  :func:`write_derived`.

Readers take Parquet where present and CSV otherwise, so version-1 results read as before.
Nothing here writes a result or starts a process: the runner writes them
(sojourn.runner.derived), the report and the reproduction read them through this module.
"""

from __future__ import annotations

import json
import math
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from sojourn.analysis.inversion import service_inversion_index
from sojourn.analysis.metrics import by_arrival, by_group, counter_metrics, largest_share_mean, summarize
from sojourn.analysis.records import read_intervals, read_records, requests
from sojourn.analysis.session_metrics import summarize_directory as summarize_sessions
from sojourn.analysis.sweeps import over_repetitions

# Summary keys the report's table shows (and the demo prints), with their labels.
TABLE_METRICS = {
    "response_mean": "mean response (s)",
    "response_median": "median (s)",
    "response_p99": "p99 (s)",
    "response_largest_1pct_mean": "largest 1% mean (s)",
    "incomplete": "incomplete",
    "syn_drops": "SYN drops",
    "throughput_rps": "completed/s",
    "link_utilization": "link util.",
    "service_inversion": "inversion (001 eq. 3)",
}


FORMAT_VERSION = 2
FORMAT_FILE = "format.json"
PARQUET_COMPRESSION = "zstd"


def format_version(directory: str | Path) -> int:
    """The repetition directory's result format (1 when it has no format.json)."""
    return int(_read_json(Path(directory) / FORMAT_FILE).get("version", 1))


def _preferred(directory: Path, stem: str) -> Path | None:
    """``<stem>.parquet`` if written, else a non-empty ``<stem>.csv``, else None."""
    for path in (directory / f"{stem}.parquet", directory / f"{stem}.csv"):
        if path.is_file() and path.stat().st_size > 0:
            return path
    return None


@dataclass
class Repetition:
    run: str
    rep: int
    directory: Path
    status: dict
    config: dict
    summary: dict
    sweep_value: object = None
    variant: str = ""
    index: int = 0  # the run's position in the spec's expansion (table order)

    @property
    def complete(self) -> bool:
        return self.status.get("state") == "complete"

    @property
    def format_version(self) -> int:
        return format_version(self.directory)

    def requests(self) -> pd.DataFrame:
        """One row per request (sojourn.analysis.records.requests), from records.parquet
        (format 2) or records.csv."""
        path = _preferred(self.directory, "records") or self.directory / "records.csv"
        return requests(read_records(path))

    def intervals(self) -> pd.DataFrame | None:
        """The load generator's per-second series (intervals.parquet or .csv), or None."""
        path = _preferred(self.directory, "intervals")
        return None if path is None else read_intervals(path)

    def ideal(self) -> pd.DataFrame | None:
        """The stored ideal PS/SRPT schedules (format 2), or None for older results."""
        path = self.directory / "ideal.parquet"
        return pd.read_parquet(path) if path.is_file() else None

    def has(self, name: str) -> bool:
        """Whether the repetition holds the file ``name`` with something in it."""
        path = self.directory / name
        return path.is_file() and path.stat().st_size > 0

    def table(self, name: str) -> pd.DataFrame | None:
        """A CSV file of the repetition (counters.csv, ...), or None when absent or empty."""
        return pd.read_csv(self.directory / name) if self.has(name) else None

    def json(self, name: str) -> dict:
        """A JSON file of the repetition (capacity.json, load_summary.json, ...); empty when absent."""
        return _read_json(self.directory / name)

    def text(self, name: str) -> str | None:
        """A text file of the repetition (server_metrics.txt, ...), or None when absent."""
        path = self.directory / name
        return path.read_text() if path.is_file() else None

    def bands(self) -> pd.DataFrame | None:
        """The uplink's bands after the load (bands.json, one JSON object per band), or None."""
        return pd.read_json(self.directory / "bands.json", lines=True) if self.has("bands.json") else None

    @property
    def link_bps(self) -> float:
        """The uplink rate the repetition ran at: its configuration's, else its summary's."""
        mbps = self.config.get("network", {}).get("link_mbps")
        if mbps is not None:
            return float(mbps) * 1e6
        if self.summary.get("link_bps"):
            return float(self.summary["link_bps"])
        raise ValueError(f"{self.directory}: neither run.json's config nor summary.json names the link rate")

    @property
    def periods(self) -> list[dict]:
        """The trace's load periods: :func:`trace_periods`."""
        return trace_periods(self.directory)

    def versions(self) -> dict:
        """versions.json: programs, kernel, host and the testbed's description (empty if absent)."""
        return _read_json(self.directory / "versions.json")


def summarize_repetition(directory: Path, link_bps: float, groups: list[dict] | None = None) -> dict:
    """The content of a repetition's summary.json, from its saved files (partial ones
    too): :func:`metrics.summarize` over records.csv, the service-inversion index,
    :func:`metrics.counter_metrics` over counters.csv, and the load generator's own
    summary under ``load_generator``; with several client ``groups`` (the run's
    network.groups), ``by_group`` holds each group's statistics; with classes of sessions
    (classes.json), ``sessions``. NaN becomes null (JSON). The runner adds its fidelity
    record (``fidelity``)."""
    directory = Path(directory)
    summary: dict = {"link_bps": link_bps}
    records = directory / "records.csv"
    if records.is_file() and records.stat().st_size > 0:
        reqs = requests(read_records(records))
        summary.update(summarize(reqs, link_bps=link_bps))
        done = reqs[reqs["completed"]]
        summary["service_inversion"] = service_inversion_index(done["size"], done["response_s"])
        summary["by_arrival"] = by_arrival(reqs)
        if groups and len(groups) > 1:
            summary["by_group"] = by_group(reqs, groups)
    counters = directory / "counters.csv"
    if counters.is_file() and counters.stat().st_size > 0:
        table = pd.read_csv(counters)
        summary.update(counter_metrics(table, link_bps=link_bps))
        summary.update(first_period_load(table, trace_periods(directory), link_bps))
    capacity_file = directory / "capacity.json"
    if capacity_file.is_file():  # capacity mode (002 §4.4): the levels are in level-<users>/
        summary.update(json.loads(capacity_file.read_text()))
    server_cpu = directory / "server_cpu.json"
    if server_cpu.is_file():  # the server's CPU quota and how often it throttled (sojourn.testbed.cpu)
        summary["server_cpu"] = json.loads(server_cpu.read_text())
    offered = directory / "offered.json"
    if offered.is_file():  # load relative to the measured capacity (001 §3.1)
        summary["offered"] = json.loads(offered.read_text())
    metrics = directory / "server_metrics.txt"
    if metrics.is_file():
        text = metrics.read_text()
        summary.update(server_metric_means(text) | server_metric_totals(text))
        probe = directory / "server_metrics_probe.txt"
        if probe.is_file():  # a load level after a capacity probe (001 §3.1): its means alone
            summary["after_probe"] = server_metric_means(text, before=probe.read_text())
    load_summary = directory / "load_summary.json"
    if load_summary.is_file():
        summary["load_generator"] = json.loads(load_summary.read_text())
    ideal = directory / "ideal.parquet"
    if ideal.is_file():
        workload = _read_json(directory / "run.json").get("config", {}).get("workload", {})
        summary["ideal"] = ideal_metrics(pd.read_parquet(ideal), workload.get("abort_after_s") or 0.0,
                                         path_bytes_per_s(groups or []))
    if (directory / "classes.json").is_file():  # sessions in classes (003): per class and stage
        summary["sessions"] = summarize_sessions(directory)
    return _null_nans(summary)


def path_bytes_per_s(groups: list[dict]) -> float | None:
    """What one TCP connection carries over the clients' emulated path (network.groups, one
    group with a round trip and loss): :func:`sojourn.theory.formulas.tcp_loss_throughput` at its
    RTT, loss and MTU (less 52 bytes of IP, TCP and timestamps); None for several groups or a
    path without loss, where the link, not the path, limits a transfer."""
    from sojourn.theory.formulas import tcp_loss_throughput  # scipy's import, only where a summary needs it

    if len(groups) != 1 or not groups[0].get("loss") or not groups[0].get("rtt_ms"):
        return None
    group = groups[0]
    return tcp_loss_throughput(group["rtt_ms"] / 1000, group["loss"], group.get("mtu", 1500) - 52)


def ideal_metrics(ideal: pd.DataFrame, abort_after_s: float = 0.0, path_rate: float | None = None) -> dict:
    """Per policy of the ideal fluid schedules of a repetition's requests (ideal.parquet,
    sojourn.theory.bounds.ideal): the mean response time and that of the largest 1% (000
    §5.2's claim for the largest requests, against what theory gives on the same arrivals),
    and those requests' wait for their first byte. Where users abort after ``abort_after_s``
    (000 Table 2 (H)), the share of requests the schedule keeps past it (``share_past_abort``:
    those the schedule alone would have users abort on their first try, 000 §5.2's incomplete
    requests being those aborted on every try) and, over a lossy path carrying ``path_rate``
    bytes/s a connection (:func:`path_bytes_per_s`), the share past it once each request's
    time also holds its transfer over the path (``share_past_abort_on_path``: the schedule's
    response plus size / path_rate, the link's own transfer time counted twice, a few percent
    of the path's)."""
    out = {}
    for policy, schedule in ideal.groupby("policy"):
        schedule = schedule.assign(completed=True, ttfb_s=schedule["first_byte_s"] - schedule["scheduled_s"])
        out[policy] = {"response_mean": float(schedule["response_s"].mean()),
                       "response_largest_1pct_mean": largest_share_mean(schedule, 0.01),
                       "ttfb_largest_1pct_mean": largest_share_mean(schedule, 0.01, "ttfb_s")}
        if abort_after_s > 0:
            out[policy]["share_past_abort"] = float((schedule["response_s"] > abort_after_s).mean())
            if path_rate:
                on_path = schedule["response_s"] + schedule["size"] / path_rate
                out[policy]["share_past_abort_on_path"] = float((on_path > abort_after_s).mean())
    return out


def trace_periods(directory: Path) -> list[dict]:
    """A repetition's load periods (run.json ``inputs.periods``; empty without a profile)."""
    return _read_json(Path(directory) / "run.json").get("inputs", {}).get("periods") or []


def first_period_load(counters: pd.DataFrame, periods: list[dict], link_bps: float) -> dict:
    """The load the uplink carried in the trace's first period (of ``periods``:
    :func:`trace_periods`), which starts on an empty system (000 §2.3 measured load this
    way, as the uplink's utilization): beside the rho the period was shaped to, it shows
    what the shaping's basis (bodies or wire) offers on the wire. Empty without a shaped
    trace or enough counter samples."""
    if not periods or "uplink_tx_bytes" not in counters:
        return {}
    first = periods[0]
    inside = counters[(counters["t_s"] >= first["start_s"]) & (counters["t_s"] <= first["end_s"])]
    if len(inside) < 2:
        return {}
    seconds = inside["t_s"].iloc[-1] - inside["t_s"].iloc[0]
    sent = inside["uplink_tx_bytes"].iloc[-1] - inside["uplink_tx_bytes"].iloc[0]
    return {"first_period_target_rho": first["target_rho"],
            "first_period_wire_rho": float(sent * 8 / seconds / link_bps) if seconds > 0 else None}


def _null_nans(value):
    """NaN -> None throughout (JSON has no NaN), nested tables included."""
    if isinstance(value, dict):
        return {k: _null_nans(v) for k, v in value.items()}
    return None if isinstance(value, float) and math.isnan(value) else value


def _prometheus_samples(text: str) -> dict[str, float]:
    """Each sample name's value, summed over its label sets, from Prometheus text (sojourn's
    /metrics); empty for other servers' status pages (nginx stub_status, apache2 mod_status)."""
    from prometheus_client.parser import text_string_to_metric_families

    values: dict[str, float] = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                values[sample.name] = values.get(sample.name, 0.0) + sample.value
    except ValueError:
        return {}
    return values


def server_metric_means(text: str, before: str = "") -> dict:
    """Means of the server's own histograms from its Prometheus text (sojourn /metrics):
    ready events per epoll_wait (001 §6.1, Figs. 13-14), service time, and the wait of
    requests unread in the kernel (measured with --admission only). Empty for servers that
    expose none (nginx stub_status, apache2 mod_status). The wait of an admitted request to
    its response's first byte handed to the kernel is there too (--admission only), and how
    long a blocked write held its write slot (a server that measures it). ``before``: the
    same server's text at an earlier moment; the means are then of what came between (a
    histogram's _sum and _count only grow)."""
    values = _prometheus_samples(text)
    for name, earlier in _prometheus_samples(before).items():
        values[name] = values.get(name, 0.0) - earlier
    out = {}
    for prefix, key in (("sojourn_epoll_ready_events", "events_per_wait_mean"),
                        ("sojourn_service_time_seconds", "server_service_time_mean"),
                        ("sojourn_unread_wait_seconds", "unread_wait_mean"),
                        ("sojourn_first_write_wait_seconds", "first_write_wait_mean"),
                        ("sojourn_write_blocked_seconds", "write_blocked_mean")):
        if values.get(f"{prefix}_count"):
            out[key] = values[f"{prefix}_sum"] / values[f"{prefix}_count"]
    return out


# Totals of the sojourn server's /metrics kept where the server counted them (docs/server.md).
SERVER_TOTALS = {
    # Seconds a response waited with every write slot held (--write-concurrency).
    "sojourn_write_slots_full_seconds_total": "server_slots_full_s",
    # Times the server stopped accepting with --accept-limit connections open (the
    # connections wait in the kernel's accept queue; lingering closes count against it).
    "sojourn_accept_pauses_total": "server_accept_pauses",
    # Lingering closes (--linger-close) ended by a timeout instead of the client's close.
    "sojourn_linger_timeouts_total": "server_linger_timeouts",
}


def server_metric_totals(text: str) -> dict:
    """What the sojourn server sent, from its Prometheus text: ``server_bytes_sent`` (heads
    and bodies) and ``server_responses`` (every status); empty for other servers. Also each
    of :data:`SERVER_TOTALS` the server counted."""
    values = _prometheus_samples(text)
    if "sojourn_bytes_sent_total" not in values:
        return {}
    out = {"server_bytes_sent": values["sojourn_bytes_sent_total"], "server_responses": values.get("sojourn_requests_total", 0.0)}
    out.update({key: values[name] for name, key in SERVER_TOTALS.items() if name in values})
    return out


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return {}


def open_repetition(directory: str | Path, recompute: bool = False) -> Repetition:
    """One repetition directory (results/<experiment>/<run>/<rep>/, with its run.json);
    ``recompute`` as for :func:`load_experiment` (where it has records)."""
    directory = Path(directory)
    info = _read_json(directory / "run.json")
    rep = Repetition(run=info.get("run", directory.parent.name), rep=int(info.get("repetition", directory.name)),
                     directory=directory, status=_read_json(directory / "status.json"),
                     config=info.get("config", {}), summary=_read_json(directory / "summary.json"),
                     sweep_value=info.get("sweep_value"), variant=info.get("variant", ""),
                     index=int(info.get("index", 0)))
    # A repetition restored from its publication has no records: its stored summary stands.
    if recompute and rep.has("records.csv"):
        rep.summary = summarize_repetition(directory, rep.link_bps, rep.config.get("network", {}).get("groups"))
    return rep


def load_experiment(directory: str | Path, recompute: bool = False) -> list[Repetition]:
    """Every repetition under ``directory`` (results/<experiment>), in the spec's run
    order (run.json ``index``), then by name and repetition. With ``recompute`` the
    summaries are computed afresh from the saved records and counters (so a report
    reflects the current analysis code) instead of read from summary.json."""
    directory = Path(directory)
    if not directory.is_dir():
        raise FileNotFoundError(f"{directory} is not a results directory")
    reps = [open_repetition(run_json.parent, recompute) for run_json in directory.glob("*/*/run.json")]
    reps.sort(key=lambda r: (r.index, r.run, r.rep))
    if not reps:
        raise FileNotFoundError(f"{directory} holds no run results (expected <run>/<rep>/run.json)")
    return reps


def summaries(reps: list[Repetition]) -> pd.DataFrame:
    """One row per repetition: run, rep, state, sweep value and every scalar summary key."""
    rows = []
    for rep in reps:
        row = {"run": rep.run, "rep": rep.rep, "variant": rep.variant, "sweep_value": rep.sweep_value,
               "state": rep.status.get("state", "missing")}
        row.update({k: v for k, v in rep.summary.items() if isinstance(v, (int, float)) or v is None})
        rows.append(row)
    frame = pd.DataFrame(rows)
    for metric in TABLE_METRICS:
        if metric not in frame:
            frame[metric] = math.nan
    return frame.astype({m: float for m in TABLE_METRICS})


def run_table(reps: list[Repetition], baseline: str | None = None, order: list[str] | None = None) -> pd.DataFrame:
    """One row per run: the table metrics (mean over repetitions, with 90% CI columns
    ``<m>_lo``/``<m>_hi``), the number of repetitions, whether any is partial, and
    ``mean_ratio`` = mean response time / the baseline run's (000 §4 style). Rows follow
    ``order`` (run names, e.g. the spec's) where given, else the repetitions' order."""
    frame = summaries(reps)
    present = list(dict.fromkeys(frame["run"]))
    order = [r for r in (order or []) if r in present] + [r for r in present if r not in (order or [])]
    table = over_repetitions(frame, ["run"], list(TABLE_METRICS))
    partial = frame.groupby("run")["state"].apply(lambda s: bool((s != "complete").any()))
    table["partial"] = table["run"].map(partial)
    sweep = frame.groupby("run")["sweep_value"].first()
    table["sweep_value"] = table["run"].map(sweep)
    table["variant"] = table["run"].map(frame.groupby("run")["variant"].first())
    table = table.set_index("run").loc[order].reset_index()
    base = baseline if baseline in set(table["run"]) else table["run"].iloc[0]
    base_row = table.set_index("run").loc[base]
    table["mean_ratio"] = table["response_mean"] / base_row["response_mean"]
    table["largest_1pct_ratio"] = table["response_largest_1pct_mean"] / base_row["response_largest_1pct_mean"]
    table.attrs["baseline"] = base
    return table


class Experiment:
    """A results/<experiment> directory for notebooks (docs/analysis.md "Notebooks").

    ``records()``, ``intervals()`` and ``ideal()`` concatenate every repetition's table
    with ``run``, ``variant``, ``sweep_value`` and ``rep`` columns in front;
    ``summaries()`` and ``table()`` are :func:`summaries` and :func:`run_table`;
    ``repetitions`` are the :class:`Repetition` objects (spec order); ``spec_text`` and
    ``spec`` the spec as run (spec.toml).
    """

    def __init__(self, directory: str | Path, recompute: bool = False):
        self.directory = Path(directory)
        self.repetitions = load_experiment(self.directory, recompute=recompute)
        spec_path = self.directory / "spec.toml"
        # The spec as run (text), and parsed: description, baseline and sweep for the report.
        self.spec_text = spec_path.read_text() if spec_path.is_file() else ""
        self.spec = tomllib.loads(self.spec_text)

    def __repr__(self) -> str:
        runs = list(dict.fromkeys(r.run for r in self.repetitions))
        return f"Experiment({str(self.directory)!r}: {len(runs)} runs, {len(self.repetitions)} repetitions)"

    @property
    def runs(self) -> list[str]:
        return list(dict.fromkeys(r.run for r in self.repetitions))

    def summaries(self) -> pd.DataFrame:
        return summaries(self.repetitions)

    def table(self, baseline: str | None = None) -> pd.DataFrame:
        return run_table(self.repetitions, baseline=baseline, order=self.runs)

    def _concat(self, per_rep) -> pd.DataFrame:
        frames = []
        for rep in self.repetitions:
            frame = per_rep(rep)
            if frame is None:
                continue
            frame = frame.copy()
            for position, (column, value) in enumerate((("run", rep.run), ("variant", rep.variant),
                                                        ("sweep_value", rep.sweep_value), ("rep", rep.rep))):
                frame.insert(position, column, value)
            frames.append(frame)
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    def records(self) -> pd.DataFrame:
        """One row per request of every repetition (final attempts, derived times)."""
        return self._concat(Repetition.requests)

    def intervals(self) -> pd.DataFrame:
        """Every repetition's per-second series."""
        return self._concat(Repetition.intervals)

    def ideal(self) -> pd.DataFrame:
        """Every repetition's stored ideal PS/SRPT schedules (empty for format-1 results)."""
        return self._concat(Repetition.ideal)


def open_experiment(directory: str | Path, recompute: bool = False) -> Experiment:
    """The :class:`Experiment` in ``directory`` (results/<experiment>)."""
    return Experiment(directory, recompute=recompute)
