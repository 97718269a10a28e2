"""The numbers docs/overload-control.md shows, derived from one repetition's result directory
(records, run.json, load_summary.json, server_metrics.txt) into one small JSON document.

Definitions (issue 32), over the final attempt of every request (sojourn.analysis.records):

* goodput: body bytes of completed (``ok``) requests per second, and completed requests per
  second, over the run's span; and the requests completed within 000 (H)'s 10-s abort time
  per second, the ones a user who gives up after 10 s still receives;
* response time: mean and p99 of completed requests, overall and in bins of scheduled time,
  beside the share of each bin's requests that were refused; the share of it spent opening
  connections (SYN to established: a SYN or SYN-ACK lost waits out the initial RTO, 000 §6),
  and the mean without that share, the part the simulator, whose requests arrive connected,
  can be set against; and the uplink queue's mean delay (its backlog at the link rate,
  counters.csv), which a response's first byte and each further round trip wait and the
  simulator's fluid link has not; and, per request, the packets the uplink's queue dropped
  and the server's retransmission timeouts (a response's lost first segment waits out the
  RTO, at least 200 ms, RFC 6298 §2.4 as Linux bounds it), which the simulator's link never
  sets off;
* refusals (outcome ``refused``, a 503) and requests by size class (000 §3.2's band cutoffs),
  and the share of the offered body bytes refused: at load rho at least 1 - 1/rho of them
  must go unserved, so a policy refusing far more than that sheds work the link could carry;
  the refusal swing is the standard deviation of the refused share over the time bins (a
  steady policy refuses about the same share in every bin, DAGOR's AIMD level swings); and the
  share refused of the requests scheduled after the load steps (from each stretch above rho 1,
  below, to the next one or the trace's end): at a load below 1 the server could serve them
  all, so what is refused there is the backlog a step left or a limit still recovering from it
  (DAGOR's level gives back 1% a second, issue 32's complaint of limits that never recover
  after a burst), and in session mode each such refusal aborts a session the low load let
  start;
* time to settle under overload and to recover after it: the load steps are the stretches of
  consecutive periods whose target rho exceeds 1 (000 §4's one step of persistent overload,
  W4's 25-s and W7's 6-s stretches). Settle runs over each overload stretch (Breakwater's
  "stabilising at 1.4x demand"), recovery from its end to the next stretch or the trace's end
  (the complaint of limits that never recover after a burst). In bins of a sixtieth of the
  span (at least 0.1 s), the mean response time of the requests scheduled in each bin; the
  series is their running median over 5 bins, so that a bin lifted by a few of the largest
  responses (heavy-tailed sizes, a tenth of a second's bins' mean can double) does not count
  as unsettled while a climb or a slow swing still does; the level is the median over the
  span's second half; the band around it is the wider of ``[level / 1.25, level x 1.25]`` and
  ``level`` plus or minus a tenth of the step (a settling time as control engineering takes
  it, within a share of the step: after a burst the level at rho 0.4 is a few milliseconds,
  whose bins swing by several times themselves), the step being the level itself under
  overload (up from an unloaded server's response time, about nothing beside it: the 25%
  band decides) and for a recovery the overload's level less the level it recovers to (a
  policy that keeps the queue short recovers at once); the time is when
  the series enters the band to spend at least 90% of the rest of the span in it (a single
  bin of a settled series that grazes the band's edge, as the mean of ten seconds of
  heavy-tailed sizes does, does not restart the clock). A span that only settles in its last
  quarter, or whose second half still climbs or falls by more than the band (Theil-Sen slope;
  response time still climbing, as FAIR's under persistent overload, 000 §4), did not settle.
  When the run stopped with its last request (``collect.drain_s`` below the timeout), a
  request scheduled near the end completed only if it was fast, so the last ``timeout -
  drain`` seconds, or the run's p99 response time if shorter (000 §4's clients never time out),
  are left out of the span;
* completed sessions per second (003's productivity of sessions) and the share of sessions
  aborted, in session mode; and the stage pool's (003 §4): the share of the run its workers
  spent processing (each stage's completed requests times their mean processing, over the
  run and the workers: what an admission policy that sheds work the CPU could have done
  leaves idle) and the requests it dropped itself (DWFS's deadline and waiting-room drops) per
  request offered;
* the server's refusals by reason (``sojourn_admission_refusals_total``), the SYNs the
  server's host dropped (the repetition's summary: demand queued beyond the server's
  connection cap, where no admission policy of the server looks), and the mean time requests
  waited unread in the kernel, the accept queue included (``sojourn_unread_wait_seconds``,
  measured with an admission policy, which judges requests from their arrival there), and the
  mean time from there to the response's first byte handed to the kernel
  (``sojourn_first_write_wait_seconds``, admitted requests, with an admission policy): the
  server's share of the wait for the first byte; and the share of the run, up to its stop,
  with a response ready and every write slot held by a blocked response
  (``sojourn_write_slots_full_seconds_total``), and the mean time a blocked write held its
  slot (``sojourn_write_blocked_seconds``): while every slot is held, a ready response waits
  on the kernel's sockets, one slot's turnover at a time.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd
from prometheus_client.parser import text_string_to_metric_families
from scipy import stats

from sojourn.analysis.results import open_repetition, server_metric_means, server_metric_totals
from sojourn.analysis.metrics import connect_metrics, counter_metrics, run_span
from sojourn.workloads.shaping import overload_spans

# 000 §3.2's cutoffs (1 KB, 2 KB, 5 KB, 50 KB) as size classes.
SIZE_CUTOFFS = (1024, 2048, 5 * 1024, 50 * 1024)
SIZE_CLASSES = ("<1K", "1K-2K", "2K-5K", "5K-50K", ">=50K")
SETTLE_BAND = 1.25
SETTLE_SHARE = 0.1  # of the step the span settles after (module notes)
MIN_SETTLE_BIN_S = 0.1  # W7's 6-s bursts in 60 bins; about a hundred requests a bin at rho 5
SETTLE_STAY = 0.9  # share of the later bins a settled series spends in the band (module notes)
SMOOTH_BINS = 5  # running median of the settle series (module notes)
BINS = 100  # bins of the response-time-over-time series
PATIENCE_S = 10.0  # 000 (H): users abort after 10 s (Fig. 10 H's longest abort time)


def refusals_by_reason(metrics_text: str) -> dict[str, float]:
    """``sojourn_admission_refusals_total`` by reason from the server's /metrics text."""
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(metrics_text):
        if family.name == "sojourn_admission_refusals":
            for sample in family.samples:
                if sample.name.endswith("_total"):
                    out[sample.labels["reason"]] = out.get(sample.labels["reason"], 0.0) + sample.value
    return out


def size_class(sizes: pd.Series) -> pd.Series:
    return pd.Series(np.asarray(SIZE_CLASSES)[np.searchsorted(SIZE_CUTOFFS, sizes.fillna(0), side="right")],
                     index=sizes.index)


def scheduled_in(frame: pd.DataFrame, start: float, end: float) -> pd.Series:
    """Which of ``frame``'s rows were scheduled in ``[start, end)``."""
    return (frame["scheduled_s"] >= start) & (frame["scheduled_s"] < end)


def by_bin(frame: pd.DataFrame, start: float, end: float, width: float):
    """The bin edges of ``[start, end)`` in steps of ``width``, and ``frame``'s rows in it
    grouped by the bin of their scheduled time (every bin present, empty ones too)."""
    edges = np.arange(start, end + width, width)
    inside = frame[scheduled_in(frame, start, end)]
    return edges, inside.groupby(pd.cut(inside["scheduled_s"], edges, right=False, labels=edges[:-1]), observed=False)


def binned_response(done: pd.DataFrame, start: float, end: float, width: float) -> pd.DataFrame:
    """Mean and p99 response time of completed requests by bin of scheduled time."""
    edges, grouped = by_bin(done, start, end, width)
    response = grouped["response_s"]
    return pd.DataFrame({"t": edges[:-1], "mean": response.mean().to_numpy(),
                         "p99": response.quantile(0.99).to_numpy(), "completed": response.count().to_numpy()})


def refused_share(requests: pd.DataFrame, start: float, end: float, width: float) -> np.ndarray:
    """Share of the requests scheduled in each bin that were refused: when a policy refuses
    (a probe's burst, 000 §4's step) and whether it stops again."""
    refused = requests.assign(refused=(requests["outcome"] == "refused").astype(float))
    _, grouped = by_bin(refused, start, end, width)
    return grouped["refused"].mean().to_numpy()


def _settle_series(done: pd.DataFrame, start: float, end: float) -> tuple[pd.DataFrame, float]:
    """The smoothed binned mean response time of a span and its level (module notes); NaN
    level when the second half has no completed request."""
    width = max(MIN_SETTLE_BIN_S, (end - start) / 60)
    series = binned_response(done, start, end, width).dropna(subset=["mean"])
    series["smooth"] = series["mean"].rolling(SMOOTH_BINS, center=True, min_periods=1).median()
    late = series[series["t"] >= start + (end - start) / 2]
    return series, float(late["smooth"].median()) if len(late) else math.nan


class Settle(NamedTuple):
    """A span's settling time (NaN when it did not settle) and, when it did not, why:
    ``drift`` (its second half still climbs or falls by more than the band), ``swing`` (it
    never spent :data:`SETTLE_STAY` of the rest of the span in the band), ``late`` (only in
    its last quarter) or ``empty`` (no completed request in its second half)."""

    s: float
    miss: str = ""


def settle_time(done: pd.DataFrame, start: float, end: float, stepped_from: float = 0.0) -> float:
    """Seconds from ``start`` until the binned mean response time enters the settle band of
    its second-half level and spends at least :data:`SETTLE_STAY` of the rest of the span in
    it (module notes); NaN when it never does, or when the second half still drifts by more
    than the band. The step the band takes its share of runs from ``stepped_from``: an
    unloaded server's response time, about nothing beside an overload's, for a step up; the
    overload's level for a recovery, where a span whose first bins are already near its
    level recovered at once."""
    return settle(done, start, end, stepped_from).s


def settle(done: pd.DataFrame, start: float, end: float, stepped_from: float = 0.0) -> Settle:
    """:func:`settle_time` with why a span did not settle."""
    if end <= start:
        return Settle(math.nan, "empty")
    return _settled(*_settle_series(done, start, end), start, end, stepped_from)


def _settled(series: pd.DataFrame, level: float, start: float, end: float, stepped_from: float) -> Settle:
    """:func:`settle` of a span's series and level (:func:`_settle_series`)."""
    if math.isnan(level):
        return Settle(math.nan, "empty")
    late = series[series["t"] >= start + (end - start) / 2]
    step = abs(stepped_from - level)
    low, high = min(level / SETTLE_BAND, level - SETTLE_SHARE * step), max(level * SETTLE_BAND, level + SETTLE_SHARE * step)
    # A climb or a fall through the second half (Theil-Sen, robust to the spikes of single
    # bins) is no level to settle on, however long it spends near its median; one bin has
    # no slope to judge.
    if len(late) > 1:
        slope = stats.theilslopes(late["smooth"].to_numpy(), late["t"].to_numpy(dtype=float))[0]
        if abs(slope) * (end - start) / 2 > high - level:
            return Settle(math.nan, "drift")
    inside = ((series["smooth"] <= high) & (series["smooth"] >= low)).to_numpy()
    # Share of the bins from each one to the end that lie inside the band.
    stays = np.cumsum(inside[::-1])[::-1] / np.arange(len(inside), 0, -1)
    entered = np.flatnonzero(inside & (stays >= SETTLE_STAY))
    if not len(entered):
        return Settle(math.nan, "swing")
    settled = float(series["t"].iloc[entered[0]]) - start
    return Settle(settled) if settled <= 0.75 * (end - start) else Settle(math.nan, "late")


def uncensored_until(run_end: float, censor_s: float, response_p99: float) -> float:
    """The last scheduled time whose requests had time enough to complete: a run that stops
    ``collect.drain_s`` after its last request cuts short those scheduled later than
    ``censor_s`` (``timeout - drain``) before its end (only the fast ones among them
    complete); no more than 1% of them if they had the run's p99 response time."""
    return run_end - (min(censor_s, response_p99) if math.isfinite(response_p99) else censor_s)


def stop_s(requests: pd.DataFrame, drain_s: float) -> float:
    """When a run stops, in its trace's time: ``drain_s`` after its last scheduled request."""
    return float(requests["scheduled_s"].max()) + drain_s


def censor_horizon(config: dict) -> float:
    """``timeout - drain`` of a run's config: how long before its end a request may be cut."""
    return max(0.0, config["workload"]["timeout_s"] - config["collect"]["drain_s"])


def recovery_spans(periods: list[dict]) -> list[tuple[tuple[float, float], tuple[float, float]]]:
    """Each overload stretch beside the span from its end to the next one's start, or to the
    trace's end; none after a stretch that runs to the end."""
    spans = overload_spans(periods)
    end = max((float(p["end_s"]) for p in periods), default=0.0)
    after = [(span, (span[1], following)) for span, following in zip(spans, [s for s, _ in spans[1:]] + [end])]
    return [(span, recovery) for span, recovery in after if recovery[1] > recovery[0]]


def scheduler(server: dict) -> str:
    """What orders the work, apart from admission: the stage pool's dispatch policy (003),
    else the write order and the kernel's bands (000 §3)."""
    stages = server.get("stages")
    if isinstance(stages, dict):
        return stages.get("policy", "dwfs")
    return server["policy"] + ("+bands" if server.get("kernel_bands") else "")


def request_numbers(requests: pd.DataFrame, periods: list[dict], censor_s: float) -> dict:
    """The doc's numbers of a set of requests (sojourn.analysis.records.requests), measured or
    simulated; ``censor_s`` as :func:`uncensored_until`'s (0 when every request ran out)."""
    done = requests[requests["completed"]]
    span = run_span(requests)
    refused = requests["outcome"] == "refused"
    classes = size_class(requests["size"])
    start = float(requests["scheduled_s"].min()) if len(requests) else 0.0
    width = max(1.0, span / BINS)
    over_time = binned_response(done, start, start + span, width)
    p99 = float(done["response_s"].quantile(0.99)) if len(done) else math.nan
    until = uncensored_until(start + span, censor_s, p99)
    # A span the censored end cuts away whole has nothing to judge (not a failure to settle).
    # Each overload's series is binned once: its level is also what the recovery after it
    # steps down from (a recovery is judged only after an overload the censoring left whole).
    settles, levels = [], {}
    for begin, end in overload_spans(periods):
        if until > begin:
            series, levels[begin, end] = _settle_series(done, begin, min(end, until))
            settles.append(_settled(series, levels[begin, end], begin, min(end, until), 0.0))
    after = recovery_spans(periods)
    recoveries = [settle(done, begin, min(end, until), levels[overload])
                  for overload, (begin, end) in after if until > begin]
    refused_over_time = refused_share(requests, start, start + span, width)
    after_steps = pd.Series(False, index=requests.index)
    for _, (begin, end) in after:
        after_steps |= scheduled_in(requests, begin, end)
    response_mean = float(done["response_s"].mean()) if len(done) else math.nan
    handshake_share = connect_metrics(done)["connect_share_of_response"]
    return {
        "duration_s": span, "requests": int(len(requests)), "completed": int(len(done)),
        "refused": int(refused.sum()),
        "refused_bytes_share": (float(requests.loc[refused, "size"].sum() / requests["size"].sum())
                                if requests["size"].sum() > 0 else math.nan),
        # Error responses other than admission's refusals (a 500 when the server could not
        # open a file for want of descriptors, for one).
        "http_error_share": float((requests["outcome"] == "http_error").mean()) if len(requests) else math.nan,
        "goodput_bps": float(done["bytes"].sum()) * 8 / span if span > 0 else math.nan,
        "goodput_rps": len(done) / span if span > 0 else math.nan,
        "patient_rps": int((done["response_s"] <= PATIENCE_S).sum()) / span if span > 0 else math.nan,
        "response_mean": response_mean,
        "response_p99": p99,
        "handshake_share": handshake_share,
        "response_mean_less_handshakes": response_mean * (1 - handshake_share),
        # The rest of it, in two: from the request sent to its first byte (the server's queue,
        # then the bottleneck's), and from there to its last byte (the transfer's round trips).
        "first_byte_wait_mean": float((done["first_byte_s"] - done["sent_s"]).mean()) if len(done) else math.nan,
        "transfer_mean": float((done["last_byte_s"] - done["first_byte_s"]).mean()) if len(done) else math.nan,
        "refused_by_size": {c: [int((refused & (classes == c)).sum()), int((classes == c).sum())] for c in SIZE_CLASSES},
        "settle_s": [_finite(s.s) for s in settles],
        "recover_s": [_finite(s.s) for s in recoveries],
        # Why each span that did not settle did not ("" for those that did).
        "settle_miss": [s.miss for s in settles],
        "recover_miss": [s.miss for s in recoveries],
        "over_time": {"bin_s": width, "t": [round(t - start, 3) for t in over_time["t"]],
                      "mean": [_finite(v) for v in over_time["mean"]], "p99": [_finite(v) for v in over_time["p99"]],
                      "refused": [_finite(float(v)) for v in refused_over_time]},
        "refused_swing": float(np.nanstd(refused_over_time)) if np.isfinite(refused_over_time).any() else math.nan,
        "refused_after_steps_share": float(refused[after_steps].mean()) if after_steps.any() else math.nan,
    }


def stage_pool_numbers(sessions: dict | None, stages, span: float, requests: float) -> dict:
    """The stage pool's busy share and its own drops (module notes) from a repetition's
    session metrics (summary.json's ``sessions``, sojourn.analysis.session_metrics); NaN for a
    run without a stage pool."""
    anatomy = (sessions or {}).get("anatomy")
    if not anatomy or not isinstance(stages, dict) or span <= 0:
        return {"stage_busy_share": math.nan, "stage_dropped_share": math.nan}
    busy = sum(stage["completed"] * stage["processing_mean_s"] for stage in anatomy if stage["completed"])
    return {"stage_busy_share": busy / span / stages.get("workers", 1),
            "stage_dropped_share": sum(stage["dropped"] for stage in anatomy) / requests}


def derive(directory: str | Path) -> dict:
    """The doc's numbers for one repetition directory (results/<name>/<run>/<rep>/)."""
    rep = open_repetition(directory)
    requests = rep.requests()
    numbers = request_numbers(requests, rep.periods, censor_horizon(rep.config))
    span = numbers["duration_s"]
    workload = rep.json("load_summary.json").get("workload") or {}
    metrics = rep.text("server_metrics.txt")
    kernel = counter_metrics(rep.table("counters.csv"), rep.link_bps)
    server_means = server_metric_means(metrics) if metrics is not None else {}
    server_totals = server_metric_totals(metrics) if metrics is not None else {}
    requests_offered = numbers["requests"] or math.nan
    out = {
        "run": rep.run, "repetition": rep.rep, "variant": rep.variant,
        "sweep_value": rep.sweep_value, "state": rep.status.get("state"),
        "admission": rep.config["server"].get("admission", ""), "scheduler": scheduler(rep.config["server"]),
        **numbers,
        "session_abort_rate": workload.get("session_abort_rate", math.nan),
        **stage_pool_numbers(rep.json("summary.json").get("sessions"), rep.config["server"].get("stages"), span,
                             requests_offered),
        "sessions_per_s": (workload["sessions_completed"] / span
                           if "sessions_completed" in workload and span > 0 else None),
        "server_refusals": refusals_by_reason(metrics) if metrics is not None else {},
        # NaN where the server did not measure it (no admission policy, or a server before the measure).
        "unread_wait_mean": server_means.get("unread_wait_mean", math.nan),
        # The server's share of the wait for a first byte (the rest: the uplink's queue and
        # any retransmission timeout); NaN where not measured, as the unread wait.
        "first_write_wait_mean": server_means.get("first_write_wait_mean", math.nan),
        # Where the server's queue waits on the kernel's: the share of the run with a response
        # ready and every write slot held by a blocked one (NaN where not measured).
        "slots_full_share": server_totals.get("server_slots_full_s", math.nan) / stop_s(requests, rep.config["collect"]["drain_s"]),
        # How long a blocked write held its slot: the slots' turnover, which that wait follows.
        "write_blocked_mean": server_means.get("write_blocked_mean", math.nan),
        # 000 §4's sign that the server's queue overflowed into the kernel's: SYNs dropped.
        "syn_drops": rep.json("summary.json").get("syn_drops", math.nan),
        "uplink_queue_delay": kernel.get("uplink_queue_delay_mean", math.nan),
        "uplink_drops_per_request": kernel.get("uplink_drops", math.nan) / requests_offered,
        "rto_timeouts_per_request": kernel.get("rto_timeouts", math.nan) / requests_offered,
    }
    return {key: _finite(value) for key, value in out.items()}


def _finite(value):
    """NaN -> None (JSON has no NaN); other values as they are."""
    return None if isinstance(value, float) and math.isnan(value) else value
