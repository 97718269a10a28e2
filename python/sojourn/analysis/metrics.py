"""The papers' metrics over one run's requests (the output of ``records.requests``).

Pure functions of DataFrames and numbers; nothing here reads files or clocks.
Response-time statistics are over *completed* requests (outcome ``ok``); incomplete
requests are counted separately, never silently mixed in (000 §4 reports both).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from sojourn.analysis.records import ERROR_OUTCOMES, OUTCOMES


def _percentiles(values: np.ndarray, prefix: str) -> dict[str, float]:
    if values.size == 0:
        return {f"{prefix}_{name}": math.nan for name in ("mean", "median", "p5", "p95", "p99")}
    p5, median, p95, p99 = np.percentile(values, [5, 50, 95, 99])
    return {f"{prefix}_mean": float(values.mean()), f"{prefix}_median": float(median),
            f"{prefix}_p5": float(p5), f"{prefix}_p95": float(p95), f"{prefix}_p99": float(p99)}


def squared_cv(values: np.ndarray) -> float:
    """Squared coefficient of variation C² = Var/mean² (population variance)."""
    if values.size == 0 or values.mean() == 0:
        return math.nan
    return float(values.var() / values.mean() ** 2)


def largest_share_mean(requests: pd.DataFrame, share: float = 0.01, column: str = "response_s") -> float:
    """Mean response time (or another ``column``, e.g. the time to the first byte) of the
    largest ``share`` of completed requests by size (000 §4: "the largest 1% of requests");
    at least one request."""
    done = requests[requests["completed"]]
    if done.empty:
        return math.nan
    count = max(1, int(round(share * len(done))))
    order = np.argsort(-done["size"].to_numpy(), kind="stable")[:count]
    return float(done[column].to_numpy()[order].mean())


def incomplete_by_size(requests: pd.DataFrame) -> dict:
    """Which requests never completed, by size: the share of them at least as large as the
    99th percentile of all requested sizes, and their median size (000 §5.1 (J): about 0.2%
    never complete "under both" FAIR and SRPT; whether SRPT's are the largest, starved past
    every abort, or FAIR's spread over all sizes, as lost handshakes are, these tell)."""
    missing = requests.loc[~requests["completed"], "size"]
    if missing.empty:
        return {"incomplete_largest_1pct_share": math.nan, "incomplete_size_median": math.nan}
    cutoff = requests["size"].quantile(0.99)
    return {"incomplete_largest_1pct_share": float((missing >= cutoff).mean()),
            "incomplete_size_median": float(missing.median())}


def fd_exhausted(requests: pd.DataFrame) -> dict:
    """Requests whose last attempt could not open a connection for want of a file
    descriptor (EMFILE, os error 24): the load generator's limit, not the server's doing
    (docs/testbed.md "Open files"); how many, and the first one's scheduled time."""
    starved = (requests["error"].fillna("").astype(str).str.contains("(os error 24)", regex=False)
               if "error" in requests else pd.Series(False, index=requests.index))
    first = requests.loc[starved, "scheduled_s"].min() if starved.any() else math.nan
    return {"fd_exhausted": int(starved.sum()), "fd_exhausted_first_s": float(first)}


# 004 §5.1 (Fig. 2): below about 10 KB a response's time is "nearly independent of file
# size" (connection set-up dominates); above it, it grows with the size.
SMALL_RESPONSE_BYTES = 10 * 1024


def mean_by_size(done: pd.DataFrame) -> dict:
    """Mean response time of completed requests below and from SMALL_RESPONSE_BYTES."""
    small = done["size"] < SMALL_RESPONSE_BYTES
    def mean(part: pd.DataFrame) -> float:
        return float(part["response_s"].mean()) if len(part) else math.nan
    return {"response_mean_small": mean(done[small]), "response_mean_large": mean(done[~small])}


def biggest_request_mean(requests: pd.DataFrame) -> float:
    """Mean response time of the completed requests for the biggest object."""
    done = requests[requests["completed"]]
    if done.empty:
        return math.nan
    return float(done.loc[done["size"] == done["size"].max(), "response_s"].mean())


def run_span(requests: pd.DataFrame) -> float:
    """Seconds from the first scheduled request to the last byte of any request."""
    if requests.empty:
        return 0.0
    end = np.nanmax([requests["last_byte_s"].max(), requests["scheduled_s"].max()])
    return float(end - requests["scheduled_s"].min())


def summarize(requests: pd.DataFrame, link_bps: float | None = None, duration_s: float | None = None) -> dict:
    """The summary metrics of one run (the issue's list; counters-based ones are in
    :func:`counter_metrics`). ``duration_s`` defaults to :func:`run_span`."""
    done = requests[requests["completed"]]
    response = done["response_s"].to_numpy()
    duration = duration_s if duration_s is not None else run_span(requests)
    counts = requests["outcome"].value_counts()
    outcomes = {name: int(counts.get(name, 0)) for name in OUTCOMES}
    body_bytes = float(requests["bytes_all_attempts"].fillna(0).sum())
    summary = {
        "requests": int(len(requests)),
        "completed": int(len(done)),
        "incomplete": int(len(requests) - len(done)),
        "errors": int(sum(outcomes[o] for o in ERROR_OUTCOMES)),
        "gave_up": outcomes["gave_up"],
        "refused": outcomes["refused"],
        "retried_requests": int((requests["attempts"] > 1).sum()),
        **incomplete_by_size(requests),
        **fd_exhausted(requests),
        "outcomes": outcomes,
        **_percentiles(response, "response"),
        **_percentiles(done["ttfb_s"].to_numpy(), "ttfb"),
        "response_c2": squared_cv(response),
        "response_largest_1pct_mean": largest_share_mean(requests, 0.01),
        # The same requests' wait for their first byte: the rest of their time is transfer.
        "ttfb_largest_1pct_mean": largest_share_mean(requests, 0.01, "ttfb_s"),
        # Their mean size, and the share of them that completed only on a retry (a response
        # time counts from the first try, so each aborted try adds its abort time: 000 (H)).
        "size_largest_1pct_mean": largest_share_mean(requests, 0.01, "size"),
        "retried_largest_1pct_share": largest_share_mean(requests.assign(retried=requests["attempts"] > 1),
                                                         0.01, "retried"),
        "response_biggest_mean": biggest_request_mean(requests),
        **mean_by_size(done),
        # 001 §3.1 (Figs. 3-4): "Apache still delivers over 60% of its responses within" 10 ms.
        "response_share_within_10ms": float((response <= 0.010).mean()) if len(response) else math.nan,
        "lag_p99": float(np.nanpercentile(requests["lag_s"], 99)) if requests["lag_s"].notna().any() else math.nan,
        "duration_s": duration,
        "throughput_rps": len(done) / duration if duration > 0 else math.nan,
        "throughput_bps": body_bytes * 8 / duration if duration > 0 else math.nan,
    }
    summary.update(connect_metrics(done))
    # Utilization from response bodies only (headers and TCP/IP overhead excluded);
    # the link's own counters give the wire figure (counter_metrics).
    summary["body_utilization"] = summary["throughput_bps"] / link_bps if link_bps else math.nan
    if link_bps:
        # Slowdown is NaN for empty responses; no sized response at all means no slowdown.
        sized = slowdown(done, link_bps)
        sized = sized[~np.isnan(sized)]
        summary["slowdown_mean"] = float(sized.mean()) if len(sized) else math.nan
    return summary


def client_group(clients: pd.Series, groups: list[dict]) -> pd.Series:
    """The network group of each client id: client c uses source address c mod (all
    addresses), and the groups own consecutive addresses in their spec order
    (docs/experiments.md, ``network.groups``)."""
    bounds = np.cumsum([int(g["addresses"]) for g in groups])
    address = clients.to_numpy(dtype=np.int64) % int(bounds[-1])
    names = np.array([g["name"] for g in groups], dtype=object)
    return pd.Series(names[np.searchsorted(bounds, address, side="right")], index=clients.index)


def by_group(requests: pd.DataFrame, groups: list[dict]) -> dict[str, dict]:
    """Response-time statistics per client group, as 000 §5.1 (B) reports them per RTT:
    for each group its request count, completed, incomplete and response percentiles."""
    if not groups or requests.empty:
        return {}
    names = client_group(requests["client"], groups)
    out = {}
    for group in groups:
        part = requests[names == group["name"]]
        done = part[part["completed"]]
        out[group["name"]] = {"requests": int(len(part)), "completed": int(len(done)),
                              "incomplete": int(len(part) - len(done)),
                              **_percentiles(done["response_s"].to_numpy(), "response")}
    return out


def first_syn_drop_s(counters: pd.DataFrame) -> float:
    """Seconds from the start of sampling to the first sample showing a SYN drop (000 §4,
    Fig. 6 right: FAIR's first drop after ~70 s at rho 1.2); NaN if none was seen."""
    for column in ("listen_drops", "ListenDrops"):
        if column in counters and "t_s" in counters:
            drops = pd.to_numeric(counters[column], errors="coerce")
            moved = counters["t_s"][drops > drops.iloc[0]]
            return float(moved.iloc[0] - counters["t_s"].iloc[0]) if len(moved) else math.nan
    return math.nan


def connect_metrics(done: pd.DataFrame, retransmitted_s: float = 0.9) -> dict:
    """Where connection set-up goes in completed requests whose final attempt opened a
    connection: mean handshake time, the share of handshakes that took at least
    ``retransmitted_s`` (a lost SYN or SYN-ACK waits out the initial RTO: 1 s on Linux,
    3 s in 000 §2), and handshake time as a share of all response time (000 §6: FAIR's
    "packets lost in the connection setup phase incur very long delays")."""
    fresh = done[done["connect_end_s"].notna() & done["connect_start_s"].notna()]
    handshake = (fresh["connect_end_s"] - fresh["connect_start_s"]).to_numpy()
    total = float(done["response_s"].sum())
    return {
        "connect_mean": float(handshake.mean()) if handshake.size else math.nan,
        "connect_slow_share": float((handshake >= retransmitted_s).mean()) if handshake.size else math.nan,
        "connect_share_of_response": float(handshake.sum() / total) if total > 0 else math.nan,
    }


def uplink_queue_delay_s(counters: pd.DataFrame, link_bps: float | None) -> float:
    """The mean wait of a packet arriving at the bottleneck: the bytes queued in the uplink's
    queues (every band's or the FIFO's ``*_backlog_bytes``, summed) over the per-second
    samples, at the link's rate. A response's first byte waits about that much after the
    server wrote it, and so does each further round trip of its transfer; with strict
    priority bands, a higher band's packet waits only for its own band and the higher ones,
    so the sum bounds its wait from above. NaN without backlog columns or a rate."""
    backlog = [c for c in counters.columns if c.endswith("_backlog_bytes")]
    if not backlog or not link_bps or counters.empty:
        return math.nan
    return float(counters[backlog].apply(pd.to_numeric, errors="coerce").sum(axis=1).mean()) * 8 / link_bps


def dropped_syn_share(syns_received: float, listen_drops: float, listen_overflows: float) -> tuple[float, float]:
    """Bounds on the share of the SYNs received that the listener dropped (000 §6.1), from
    the counts over a span. ListenDrops counts every SYN the listener dropped (tcp_conn_request:
    a full SYN or accept queue) and every handshake-completing ACK a full accept queue dropped
    (tcp_v4_syn_recv_sock); ListenOverflows counts the drops at a full accept queue, of SYNs and
    of those ACKs alike. So the SYNs dropped lie between ListenDrops less ListenOverflows and
    ListenDrops (exact when the accept queue never overflowed). NaN without SYNs received."""
    if any(math.isnan(count) for count in (syns_received, listen_drops, listen_overflows)) or syns_received <= 0:
        return math.nan, math.nan
    return max(0.0, listen_drops - listen_overflows) / syns_received, listen_drops / syns_received


def counter_metrics(counters: pd.DataFrame, link_bps: float | None = None) -> dict:
    """SYN drops, peak connections and wire utilization from the testbed's per-second
    counters (docs/testbed.md: listen_drops, established, uplink_util, uplink_tx_bytes).
    Cumulative kernel counters are differenced over the run; columns that are absent
    give NaN rather than a guess. Utilization is the mean of the per-interval values
    (so it covers the sampled span, drain included)."""
    out: dict[str, float] = {}
    if counters is None or counters.empty:
        return {"syn_drops": math.nan, "peak_connections": math.nan, "link_utilization": math.nan}

    def delta(column: str) -> float:
        if column not in counters:
            return math.nan
        series = pd.to_numeric(counters[column], errors="coerce").dropna()
        return float(series.iloc[-1] - series.iloc[0]) if len(series) else math.nan

    # 000 §4 "SYN drops": the listen queue overflowing / SYNs dropped (ListenDrops counts both).
    drops = [delta(c) for c in ("listen_drops", "listen_overflows", "ListenDrops", "ListenOverflows")]
    drops = [d for d in drops if not math.isnan(d)]
    out["syn_drops"] = max(drops) if drops else math.nan
    out["first_syn_drop_s"] = first_syn_drop_s(counters)
    out["syn_retransmits"] = delta("syn_retrans")
    # 000 §6.1's share of incoming SYNs dropped (NaN in results from before the SYNs received
    # were counted).
    out["syns_received"] = delta("syns_received")
    out["syn_drop_share_min"], out["syn_drop_share_max"] = dropped_syn_share(
        out["syns_received"], delta("listen_drops"), delta("listen_overflows"))
    # The SYN-ACKs the server sent and those its uplink's queues dropped: counted before the
    # queues and again past them (sojourn.testbed.handshakes; NaN in results from before).
    out["synacks_sent"] = delta("synacks_sent")
    out["synacks_dropped"] = out["synacks_sent"] - delta("synacks_delivered")
    # Where packets were lost (000 §6 reads FAIR's delays as drops in the server's
    # transmit queue): retransmissions seen by TCP and drops at the uplink's queues.
    out["retransmitted_segments"] = delta("retrans_segs")
    # What set them off, and how many the receiver already had (NaN in results from before
    # these columns).
    for name in ("rto_timeouts", "loss_probes", "fast_retrans", "dsack_received", "host_queue_skips", "reordering_seen"):
        out[name] = delta(name)
    # The clients' side of the handshakes, over the span their counters were read (NaN in
    # results from before these columns).
    out["client_connects"] = delta("client_active_opens")
    out["client_syn_retransmits"] = delta("client_syn_retrans")
    out["client_connect_fails"] = delta("client_attempt_fails")
    dropped = [c for c in counters.columns if c.endswith("_dropped")]
    out["uplink_drops"] = float(sum(delta(c) for c in dropped)) if dropped else math.nan
    out["uplink_queue_delay_mean"] = uplink_queue_delay_s(counters, link_bps)
    established = [c for c in ("established", "estab", "connections_established") if c in counters]
    out["peak_connections"] = float(pd.to_numeric(counters[established[0]]).max()) if established else math.nan
    # Bytes over the sampled span, not the mean of per-interval values: a late sample
    # makes one interval's value meaningless, the total stays right.
    if link_bps and "uplink_tx_bytes" in counters and "t_s" in counters:
        span = float(counters["t_s"].iloc[-1] - counters["t_s"].iloc[0])
        out["link_utilization"] = delta("uplink_tx_bytes") * 8 / span / link_bps if span > 0 else math.nan
    elif "uplink_util" in counters:
        out["link_utilization"] = float(pd.to_numeric(counters["uplink_util"], errors="coerce").mean())
    else:
        out["link_utilization"] = math.nan
    return out


def utilization_series(counters: pd.DataFrame, link_bps: float) -> pd.DataFrame:
    """Uplink utilization per sampling interval from the byte counter and the actual
    sample times (robust to late samples, unlike a nominal interval)."""
    t = counters["t_s"].to_numpy(dtype=float)
    sent = counters["uplink_tx_bytes"].to_numpy(dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        utilization = np.diff(sent) * 8 / np.diff(t) / link_bps
    return pd.DataFrame({"t_s": t[1:], "utilization": utilization})


def per_second(requests: pd.DataFrame, bin_s: float = 1.0) -> pd.DataFrame:
    """Mean response time per bin of *arrival* (scheduled) time, as in 000 Fig. 8(a-b),
    with the counts of arrivals, completions and incompletes per bin. Bins with no
    completed request have NaN mean."""
    if requests.empty:
        return pd.DataFrame(columns=["t_s", "mean_response_s", "arrivals", "completed", "incomplete"])
    start = requests["scheduled_s"].min()
    index = np.floor((requests["scheduled_s"] - start) / bin_s).astype(int)
    frame = pd.DataFrame({"bin": index, "response_s": requests["response_s"], "completed": requests["completed"]})
    grouped = frame.groupby("bin")
    bins = np.arange(index.max() + 1)
    out = pd.DataFrame({
        "t_s": bins * bin_s,
        "mean_response_s": grouped["response_s"].mean().reindex(bins).to_numpy(),
        "arrivals": grouped.size().reindex(bins, fill_value=0).to_numpy(),
        "completed": grouped["completed"].sum().reindex(bins, fill_value=0).to_numpy().astype(int),
    })
    out["incomplete"] = out["arrivals"] - out["completed"]
    return out


def by_arrival(requests: pd.DataFrame, bin_s: float = 10.0) -> dict:
    """Mean response time and time to first byte per bin of arrival (scheduled) time,
    counting only the requests that finished before the last request arrived, as 000 §4
    did for Fig. 7 under persistent overload: ``t_s`` is each bin's start from the first
    arrival, ``arrivals`` and ``finished`` its requests and those counted; a bin with none
    finished has null means."""
    if requests.empty:
        return {"bin_s": bin_s, "t_s": [], "response_mean_s": [], "ttfb_mean_s": [], "arrivals": [], "finished": []}
    start, last = requests["scheduled_s"].min(), requests["scheduled_s"].max()
    index = np.floor((requests["scheduled_s"] - start) / bin_s).astype(int)
    finished = requests["completed"] & (requests["last_byte_s"] <= last)
    frame = pd.DataFrame({"bin": index, "response_s": requests["response_s"].where(finished),
                          "ttfb_s": requests["ttfb_s"].where(finished), "finished": finished})
    grouped = frame.groupby("bin")
    bins = np.arange(index.max() + 1)

    def series(values: pd.Series) -> list:
        return [None if math.isnan(v) else float(v) for v in values.reindex(bins).to_numpy(dtype=float)]

    return {"bin_s": bin_s, "t_s": [float(b * bin_s) for b in bins], "response_mean_s": series(grouped["response_s"].mean()),
            "ttfb_mean_s": series(grouped["ttfb_s"].mean()),
            "arrivals": [int(n) for n in grouped.size().reindex(bins, fill_value=0)],
            "finished": [int(n) for n in grouped["finished"].sum().reindex(bins, fill_value=0)]}


def ccdf(values: np.ndarray, points: int | None = 2000) -> pd.DataFrame:
    """Empirical complementary CDF P(X > x) at the sorted sample values (000 Fig. 8c),
    thinned to about ``points`` log-spaced ranks for plotting (None keeps all)."""
    values = np.sort(np.asarray(values, dtype=float)[~np.isnan(values)])
    n = values.size
    if n == 0:
        return pd.DataFrame({"x": [], "ccdf": []})
    # P(X > x_i) for the i-th smallest value: ties share the value after the last of them.
    after = np.searchsorted(values, values, side="right")
    probability = (n - after) / n
    keep = np.arange(n)
    if points is not None and n > points:
        keep = np.unique(np.concatenate([np.unique(np.geomspace(1, n, points).astype(int) - 1), [n - 1]]))
        keep = np.unique(np.concatenate([keep, n - 1 - keep]))
    return pd.DataFrame({"x": values[keep], "ccdf": probability[keep]})


def by_size(requests: pd.DataFrame, bins_per_decade: int = 4) -> pd.DataFrame:
    """Mean (and median) response time of completed requests in logarithmic size bins
    (004 Figs. 2 and 4; 000 Fig. 8d). Empty bins are omitted."""
    done = requests[requests["completed"] & (requests["size"] > 0)]
    columns = ["size_lo", "size_hi", "size_mid", "count", "mean_response_s", "median_response_s"]
    if done.empty:
        return pd.DataFrame(columns=columns)
    exponent = np.floor(np.log10(done["size"].to_numpy()) * bins_per_decade).astype(int)
    grouped = pd.DataFrame({"bin": exponent, "r": done["response_s"].to_numpy()}).groupby("bin")["r"]
    bins = np.array(sorted(grouped.groups))
    lo, hi = 10.0 ** (bins / bins_per_decade), 10.0 ** ((bins + 1) / bins_per_decade)
    return pd.DataFrame({"size_lo": lo, "size_hi": hi, "size_mid": np.sqrt(lo * hi),
                         "count": grouped.size().reindex(bins).to_numpy(),
                         "mean_response_s": grouped.mean().reindex(bins).to_numpy(),
                         "median_response_s": grouped.median().reindex(bins).to_numpy()})[columns]


def slowdown(requests: pd.DataFrame, link_bps: float) -> np.ndarray:
    """Slowdown = response time / the request's transmission time alone on the
    bottleneck (size·8 / link rate), as in 004 §6 (NaN for incomplete requests)."""
    service = requests["size"].to_numpy(dtype=float) * 8.0 / link_bps
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(service > 0, requests["response_s"].to_numpy() / service, np.nan)


def slowdown_by_size_percentile(requests: pd.DataFrame, link_bps: float, groups: int = 100) -> pd.DataFrame:
    """Mean slowdown per percentile of request size (004 Figs. 7-8)."""
    done = requests[requests["completed"]]
    if done.empty:
        return pd.DataFrame(columns=["percentile", "mean_slowdown", "count"])
    ranks = done["size"].rank(method="first").to_numpy()
    percentile = np.minimum(((ranks - 1) * groups / len(done)).astype(int), groups - 1)
    frame = pd.DataFrame({"percentile": (percentile + 1) * (100 / groups), "s": slowdown(done, link_bps)})
    grouped = frame.groupby("percentile")["s"]
    return pd.DataFrame({"mean_slowdown": grouped.mean(), "count": grouped.size()}).reset_index()
