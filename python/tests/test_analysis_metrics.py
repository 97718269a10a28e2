"""sojourn.analysis on hand-made records whose answers are computed by hand below."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sojourn import analysis
from sojourn.analysis.records import RecordsError

# Five requests. Request 1 was aborted once and succeeded on its retry; 3 gave up; 4 failed to connect.
RECORDS = """\
request_id,attempt,final,client,path,expected_size,bytes,status,scheduled_s,dispatch_s,sent_s,first_byte_s,last_byte_s,outcome,error
0,0,1,0,/a,100,100,200,0.0,0.001,0.01,0.02,0.10,ok,
1,0,0,1,/b,1000,300,200,0.5,0.5,0.51,0.9,1.5,aborted,
1,1,1,1,/b,1000,1000,200,0.5,1.5,1.6,2.0,2.5,ok,
2,0,1,2,/c,10000,10000,200,1.2,1.2,1.21,1.3,1.5,ok,
3,0,1,0,/a,100,0,,1.6,1.6,1.61,,3.0,gave_up,
4,0,1,3,/d,500,0,,2.0,2.0,,,2.0,connect_error,ECONNREFUSED
"""


@pytest.fixture
def write(tmp_path):
    counter = iter(range(1000))

    def write_csv(text):
        path = tmp_path / f"records{next(counter)}.csv"
        path.write_text(text)
        return path
    return write_csv


@pytest.fixture
def reqs(write):
    return analysis.requests(analysis.read_records(write(RECORDS)))


def test_derived_times(reqs):
    assert list(reqs["request_id"]) == [0, 1, 2, 3, 4]
    assert np.allclose(reqs["response_s"][:3], [0.10, 2.0, 0.3])
    assert np.allclose(reqs["ttfb_s"][:3], [0.02, 1.5, 0.1])
    assert reqs["response_s"][3:].isna().all()
    assert list(reqs["attempts"]) == [1, 2, 1, 1, 1]
    # Lag is attempt 0's dispatch minus schedule.
    assert reqs["lag_s"][0] == pytest.approx(0.001) and reqs["lag_s"][1] == pytest.approx(0.0)



def test_lag_uses_issued_when_present(write):
    # Request 1 was taken up on time (issued 0.5) but waited 0.7 s for a free connection of
    # its client (dispatch 1.2): that wait is response time, not generator lag. Request 0 left
    # 0.002 s late. Without issued_s the lag falls back to dispatch − schedule.
    with_issued = """\
request_id,attempt,final,client,scheduled_s,issued_s,dispatch_s,sent_s,first_byte_s,last_byte_s,outcome
0,0,1,0,0.0,0.002,0.002,0.01,0.02,0.1,ok
1,0,1,0,0.5,0.5,1.2,1.21,1.3,1.4,ok
"""
    reqs = analysis.requests(analysis.read_records(write(with_issued)))
    assert list(reqs["lag_s"]) == pytest.approx([0.002, 0.0])
    assert analysis.summarize(reqs, link_bps=8000, duration_s=2.0)["lag_p99"] < 0.002 + 1e-12
    without = with_issued.replace("issued_s,", "").replace(",0.002,0.002,", ",0.002,").replace(",0.5,0.5,", ",0.5,")
    reqs = analysis.requests(analysis.read_records(write(without)))
    assert list(reqs["lag_s"]) == pytest.approx([0.002, 0.7])

def test_summary(reqs):
    s = analysis.summarize(reqs, link_bps=8000, duration_s=3.0)
    assert (s["requests"], s["completed"], s["incomplete"], s["errors"], s["gave_up"], s["retried_requests"]) == (5, 3, 2, 1, 1, 1)
    assert s["outcomes"]["connect_error"] == 1 and s["outcomes"]["ok"] == 3
    assert s["fd_exhausted"] == 0  # ECONNREFUSED is the server's answer, not a descriptor limit
    emfile = reqs.assign(error=reqs["error"].replace("ECONNREFUSED", "Too many open files (os error 24)"))
    starved = analysis.summarize(emfile, link_bps=8000, duration_s=3.0)
    assert (starved["fd_exhausted"], starved["fd_exhausted_first_s"]) == (1, 2.0)
    assert s["response_mean"] == pytest.approx(0.8)
    assert s["response_median"] == pytest.approx(0.3)
    # Var = (0.7² + 1.2² + 0.5²)/3 = 0.726667; C² = Var / 0.8² = 1.135417.
    assert s["response_c2"] == pytest.approx(0.7266667 / 0.64, rel=1e-6)
    assert s["response_largest_1pct_mean"] == pytest.approx(0.3)  # one request: the 10000-byte one
    assert (s["size_largest_1pct_mean"], s["retried_largest_1pct_share"]) == (10000, 0.0)
    # Made the largest, request 1 (aborted once, done on its retry) is the one counted: retried.
    retried = analysis.summarize(reqs.assign(size=reqs["size"].replace(1000, 50000)), link_bps=8000, duration_s=3.0)
    assert (retried["size_largest_1pct_mean"], retried["retried_largest_1pct_share"]) == (50000, 1.0)
    assert retried["response_largest_1pct_mean"] == pytest.approx(2.0)
    # Requests 3 (100 B) and 4 (500 B) never completed; neither reaches the 99th percentile of
    # the sizes asked (9640 B, between 1000 and 10000). Made as large as request 2, 4 does.
    assert (s["incomplete_largest_1pct_share"], s["incomplete_size_median"]) == (0.0, 300)
    large = analysis.summarize(reqs.assign(size=reqs["size"].replace(500, 10000)), link_bps=8000, duration_s=3.0)
    assert (large["incomplete_largest_1pct_share"], large["incomplete_size_median"]) == (0.5, 5050)
    everything = analysis.summarize(reqs.assign(outcome="ok", completed=True), link_bps=8000, duration_s=3.0)
    assert math.isnan(everything["incomplete_largest_1pct_share"])
    # 004 Fig. 2's split at 10 KiB: all three completed responses are below it.
    assert s["response_mean_small"] == pytest.approx(0.8) and math.isnan(s["response_mean_large"])
    assert s["response_share_within_10ms"] == 0.0  # 0.1, 2.0 and 0.3 s
    bigger = analysis.summarize(reqs.assign(size=reqs["size"].replace(10000, 20000)), link_bps=8000, duration_s=3.0)
    assert (bigger["response_mean_small"], bigger["response_mean_large"]) == pytest.approx((1.05, 0.3))
    assert s["throughput_rps"] == pytest.approx(1.0)
    # Bodies of all attempts: (100 + 300 + 1000 + 10000) B x 8 / 3 s = 30400 bit/s; link 8000 bit/s.
    assert s["throughput_bps"] == pytest.approx(30400)
    assert s["body_utilization"] == pytest.approx(30400 / 8000)
    # Slowdowns 0.1/0.1 = 1, 2.0/1.0 = 2, 0.3/10 = 0.03.
    assert s["slowdown_mean"] == pytest.approx((1 + 2 + 0.03) / 3)


def test_per_second(reqs):
    table = analysis.per_second(reqs)
    assert list(table["arrivals"]) == [2, 2, 1]
    assert list(table["completed"]) == [2, 1, 0]
    assert list(table["incomplete"]) == [0, 1, 1]
    assert table["mean_response_s"][0] == pytest.approx(1.05)
    assert table["mean_response_s"][1] == pytest.approx(0.3)
    assert math.isnan(table["mean_response_s"][2])


def test_by_arrival_counts_only_what_finished_before_the_last_arrival():
    """000 Fig. 7 (§4): under persistent overload only the requests that finished before the
    final request arrived count, per bin of arrival time."""
    arrived = [0.0, 1.0, 12.0, 15.0, 30.0, 31.0]
    finished = [2.0, 35.0, 13.0, None, 30.5, 31.5]  # 35 and 31.5 s are after the last arrival (31 s): left out
    requests = pd.DataFrame({"scheduled_s": arrived, "last_byte_s": [math.nan if f is None else f for f in finished],
                             "completed": [f is not None for f in finished]})
    requests["response_s"] = (requests["last_byte_s"] - requests["scheduled_s"]).where(requests["completed"])
    requests["ttfb_s"] = requests["response_s"] / 2
    out = analysis.metrics.by_arrival(requests, bin_s=10.0)
    assert out["t_s"] == [0.0, 10.0, 20.0, 30.0]
    assert out["response_mean_s"] == [2.0, 1.0, None, 0.5] and out["ttfb_mean_s"] == [1.0, 0.5, None, 0.25]
    assert out["finished"] == [1, 1, 0, 1] and out["arrivals"] == [2, 2, 0, 2]


def test_by_size_and_ccdf(reqs):
    table = analysis.by_size(reqs, bins_per_decade=1)
    assert list(table["size_lo"]) == [100, 1000, 10000]
    assert np.allclose(table["mean_response_s"], [0.1, 2.0, 0.3])
    c = analysis.ccdf(np.array([1.0, 2.0, 2.0, 3.0]))
    assert list(c["x"]) == [1, 2, 2, 3]
    assert list(c["ccdf"]) == [0.75, 0.25, 0.25, 0.0]


def test_the_share_of_syns_dropped_lies_between_listen_drops_less_overflows_and_listen_drops():
    """ListenDrops counts SYNs and handshake ACKs dropped; ListenOverflows the drops at a full
    accept queue, of either; the SYNs received are the share's denominator."""
    assert analysis.dropped_syn_share(200, 50, 10) == (0.2, 0.25)
    # Nothing overflowed: every drop was a SYN.
    assert analysis.dropped_syn_share(200, 50, 0) == (0.25, 0.25)
    assert analysis.dropped_syn_share(200, 5, 10) == (0, 0.025)
    assert all(math.isnan(v) for v in analysis.dropped_syn_share(0, 5, 0) + analysis.dropped_syn_share(math.nan, 5, 0))
    out = analysis.counter_metrics(pd.DataFrame({"t_s": [0, 1], "syns_received": [0, 200], "listen_drops": [0, 50],
                                                 "listen_overflows": [0, 10]}))
    assert (out["syns_received"], out["syn_drop_share_min"], out["syn_drop_share_max"]) == (200, 0.2, 0.25)
    # Results from before the SYNs received were counted give no share.
    assert math.isnan(analysis.counter_metrics(pd.DataFrame({"t_s": [0, 1], "listen_drops": [0, 5]}))["syn_drop_share_min"])
    # SYN-ACKs sent less those that arrived past the uplink's queues: the queues dropped them.
    synacks = analysis.counter_metrics(pd.DataFrame({"t_s": [0, 1], "synacks_sent": [2, 50], "synacks_delivered": [2, 41]}))
    assert (synacks["synacks_sent"], synacks["synacks_dropped"]) == (48, 9)
    assert math.isnan(analysis.counter_metrics(pd.DataFrame({"t_s": [0, 1], "synacks_sent": [0, 5]}))["synacks_dropped"])


def test_counter_metrics():
    counters = pd.DataFrame({"t_s": [0, 1, 2], "listen_drops": [10, 15, 40], "established": [3, 9, 4],
                             "uplink_tx_bytes": [0, 500, 2500]})
    out = analysis.counter_metrics(counters, link_bps=10_000)
    assert out["syn_drops"] == 30 and out["peak_connections"] == 9
    assert math.isnan(out["uplink_drops"]) and math.isnan(out["retransmitted_segments"])
    lossy = analysis.counter_metrics(pd.DataFrame({"t_s": [0, 1], "retrans_segs": [5, 9], "syn_retrans": [1, 3],
                                                   "rto_timeouts": [2, 3], "dsack_received": [0, 1],
                                                   "q1_10_dropped": [0, 7], "q1_11_dropped": [2, 3]}))
    assert (lossy["retransmitted_segments"], lossy["syn_retransmits"], lossy["uplink_drops"]) == (4, 2, 8)
    assert (lossy["rto_timeouts"], lossy["dsack_received"]) == (1, 1) and math.isnan(lossy["loss_probes"])
    # The clients' counters are blank until the load generator runs: counted from its start.
    clients = analysis.counter_metrics(pd.DataFrame({"t_s": [0, 1, 2, 3], "client_active_opens": ["", 10, 25, ""],
                                                     "client_syn_retrans": ["", 0, 3, ""],
                                                     "client_attempt_fails": ["", 0, 1, ""]}))
    assert (clients["client_connects"], clients["client_syn_retransmits"], clients["client_connect_fails"]) == (15, 3, 1)
    assert math.isnan(lossy["client_connects"])
    # Two bands holding 1,000 and 250 bytes, then 0 and 1,250: 1,250 queued on average, 1 s at 10 kbit/s.
    queued = pd.DataFrame({"t_s": [0, 1], "q1_10_backlog_bytes": [1000, 0], "q1_11_backlog_bytes": [250, 1250]})
    assert analysis.counter_metrics(queued, link_bps=10_000)["uplink_queue_delay_mean"] == pytest.approx(1.0)
    assert math.isnan(out["uplink_queue_delay_mean"]), "no backlog columns"
    assert out["link_utilization"] == pytest.approx(2500 * 8 / 2 / 10_000)
    assert math.isnan(analysis.counter_metrics(pd.DataFrame({"t_s": [0, 1]}))["syn_drops"])
    only_util = analysis.counter_metrics(pd.DataFrame({"t_s": [0, 1, 2], "uplink_util": [0.5, 1.0, 0.9]}))
    assert only_util["link_utilization"] == pytest.approx(0.8)
    # A late sample (t = 1.5 instead of 1): per-interval values follow the real times.
    series = analysis.utilization_series(pd.DataFrame({"t_s": [0, 1.5, 2], "uplink_tx_bytes": [0, 1500, 2000]}), 8000)
    assert series["utilization"].tolist() == pytest.approx([1.0, 1.0])


def test_bad_records_are_named(write):
    with pytest.raises(RecordsError, match="missing required column.*outcome"):
        analysis.read_records(write("request_id,final,scheduled_s,last_byte_s\n0,1,0,1\n"))
    with pytest.raises(RecordsError, match="unknown outcome.*teleported"):
        analysis.read_records(write("request_id,final,scheduled_s,last_byte_s,outcome\n0,1,0,1,teleported\n"))
    double = analysis.read_records(write("request_id,final,scheduled_s,last_byte_s,outcome\n0,1,0,1,ok\n0,1,0,2,ok\n"))
    with pytest.raises(RecordsError, match="request_id 0 has more than one final"):
        analysis.requests(double)
    none = analysis.read_records(write("request_id,final,scheduled_s,last_byte_s,outcome\n0,0,0,1,aborted\n"))
    with pytest.raises(RecordsError, match="request_id 0 has no final"):
        analysis.requests(none)


# --- service inversion (001 eq. 3) -------------------------------------------------------

def test_inversion_paper_example():
    # Sizes a<b<c<d<e finish in the order b, c, a, d, e: distances 2,1,1,0,0 -> 4/12 (001 §3.3).
    sizes = [1, 2, 3, 4, 5]
    finish_times = [3, 1, 2, 4, 5]
    assert analysis.service_inversion_index(sizes, finish_times) == pytest.approx(4 / 12)
    assert analysis.service_inversion_index(sizes, [1, 2, 3, 4, 5]) == 0.0
    assert analysis.service_inversion_index(sizes, [5, 4, 3, 2, 1]) == 1.0


def brute_force_inversion(sizes, times):
    n = len(sizes)
    ideal = sorted(range(n), key=lambda i: (sizes[i], times[i]))
    observed = sorted(range(n), key=lambda i: (times[i], sizes[i]))
    distance = sum(abs(observed.index(i) - ideal.index(i)) for i in range(n))
    return distance / (n * n // 2)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 8), st.integers(0, 8)), min_size=2, max_size=40))
def test_inversion_matches_definition(pairs):
    sizes = [p[0] for p in pairs]
    times = [p[1] for p in pairs]
    index = analysis.service_inversion_index(sizes, times)
    assert index == pytest.approx(brute_force_inversion(sizes, times))
    assert 0.0 <= index <= 1.0


@given(st.integers(2, 500))
def test_reverse_order_is_exactly_one(n):
    sizes = np.arange(n)
    assert analysis.service_inversion_index(sizes, -sizes.astype(float)) == 1.0


def test_random_order_scores_two_thirds():
    # E[Σ|π(i) − i|] = (n² − 1)/3 for a random permutation: the index tends to 2/3.
    rng = np.random.default_rng(2)
    sizes = np.arange(200_000)
    assert analysis.service_inversion_index(sizes, rng.permutation(sizes).astype(float)) == pytest.approx(2 / 3, abs=0.005)


def test_inversion_on_a_million():
    rng = np.random.default_rng(1)
    sizes = rng.integers(1, 1000, 1_000_000)
    # Served in size order with ties: exactly 0.
    assert analysis.service_inversion_index(sizes, sizes * 0.001) == 0.0


def test_decile_composition():
    frame = pd.DataFrame({"size": np.arange(1, 21), "response_s": np.arange(1, 21) * 0.1, "completed": True})
    table = analysis.decile_composition(frame)
    assert table.loc[0].tolist() == [1.0, 0.0, 0.0, 0.0]
    assert table.loc[2].tolist() == [0.5, 0.5, 0.0, 0.0]
    assert table.loc[9].tolist() == [0.0, 0.0, 0.0, 1.0]
    series = table.attrs["series"]
    assert [(s["min"], s["max"]) for s in series] == [(1, 5), (6, 10), (11, 15), (16, 20)]
    # Equal sizes never split: six 1s and one each of 2 and 3 in two series.
    assert analysis.size_series(np.array([1, 1, 1, 1, 1, 1, 2, 3]), 2).tolist() == [0] * 6 + [1, 1]


# --- across runs -------------------------------------------------------------------------

def test_confidence_interval_and_capacity():
    mean, low, high = analysis.confidence_interval([1.0, 2.0, 3.0])
    # t(0.95; 2 d.f.) = 2.919986, s = 1, n = 3: half-width 1.685854.
    assert mean == 2.0
    assert (high - mean) == pytest.approx(2.919986 / math.sqrt(3), rel=1e-5)
    assert low == pytest.approx(2 * mean - high)
    assert analysis.confidence_interval([4.0]) == (4.0, 4.0, 4.0)
    sweep = pd.DataFrame({"clients": [8, 16, 32, 64], "throughput_rps": [100, 180, 170, 150]})
    assert analysis.capacity(sweep, "clients") == {"capacity": 180.0, "at_load": 16, "at_sweep_end": False}
    table = analysis.over_repetitions(pd.DataFrame({"run": ["a", "a", "a", "b"], "m": [1.0, 2.0, 3.0, 5.0]}), ["run"], ["m"])
    assert list(table["n"]) == [3, 1] and table["m_hi"][1] == 5.0


def test_by_group_splits_clients_by_their_source_address(reqs):
    # Groups own consecutive addresses: "near" addresses 0-1, "far" address 2; client c uses
    # address c mod 3, so clients 0, 1 are near and 2 is far; client 3 (address 0) is near.
    groups = [{"name": "near", "addresses": 2}, {"name": "far", "addresses": 1}]
    assert list(analysis.client_group(reqs["client"], groups)) == ["near", "near", "far", "near", "near"]
    out = analysis.by_group(reqs, groups)
    # near: requests 0 (0.1 s), 1 (2.0 s), 3 (gave up), 4 (connect error); far: request 2 (0.3 s).
    assert (out["near"]["requests"], out["near"]["completed"], out["near"]["incomplete"]) == (4, 2, 2)
    assert out["near"]["response_mean"] == pytest.approx(1.05)
    assert (out["far"]["requests"], out["far"]["completed"]) == (1, 1)
    assert out["far"]["response_mean"] == pytest.approx(0.3)
    assert analysis.by_group(reqs, []) == {}


def test_first_syn_drop_time():
    counters = pd.DataFrame({"t_s": [5.0, 6.0, 7.0, 8.0], "listen_drops": [3, 3, 3, 9]})
    assert analysis.counter_metrics(counters)["first_syn_drop_s"] == pytest.approx(3.0)
    assert math.isnan(analysis.first_syn_drop_s(pd.DataFrame({"t_s": [0, 1], "listen_drops": [2, 2]})))


def test_connect_metrics():
    done = pd.DataFrame({"connect_start_s": [0.0, 1.0, np.nan, 2.0], "connect_end_s": [0.01, 2.0, np.nan, 2.03],
                         "response_s": [0.5, 1.5, 0.2, 0.8]})
    out = analysis.connect_metrics(done)
    # Three fresh connections: 0.01, 1.0 (a SYN retransmitted after 1 s) and 0.03 s.
    assert out["connect_mean"] == pytest.approx(1.04 / 3)
    assert out["connect_slow_share"] == pytest.approx(1 / 3)
    assert out["connect_share_of_response"] == pytest.approx(1.04 / 3.0)


def test_server_metric_means_from_prometheus_text():
    from sojourn.analysis.results import server_metric_means

    text = ("# TYPE sojourn_epoll_ready_events histogram\nsojourn_epoll_ready_events_bucket{le=\"+Inf\"} 4\n"
            "sojourn_epoll_ready_events_sum 10\nsojourn_epoll_ready_events_count 4\n"
            "sojourn_service_time_seconds_sum 0.5\nsojourn_service_time_seconds_count 2\n")
    assert server_metric_means(text) == {"events_per_wait_mean": 2.5, "server_service_time_mean": 0.25}
    assert server_metric_means("Active connections: 1\n") == {}
    # What came after an earlier scrape: 6 events over 2 waits, 0.5 s over 1 response.
    earlier = ("sojourn_epoll_ready_events_sum 4\nsojourn_epoll_ready_events_count 2\n"
               "sojourn_service_time_seconds_sum 0\nsojourn_service_time_seconds_count 1\n")
    assert server_metric_means(text, before=earlier) == {"events_per_wait_mean": 3.0, "server_service_time_mean": 0.5}
    # Nothing between the two: no mean rather than a division by zero.
    assert server_metric_means(text, before=text) == {}


def test_server_metric_totals_sum_every_status():
    from sojourn.analysis.results import server_metric_totals
    text = ('sojourn_bytes_sent_total{policy="srpt"} 1500\n'
            'sojourn_requests_total{status="200"} 5\nsojourn_requests_total{status="404"} 1\n'
            'sojourn_request_seconds_bucket{le="1"} 9\n')
    assert server_metric_totals(text) == {"server_bytes_sent": 1500.0, "server_responses": 6.0}
    assert server_metric_totals("Active connections: 1\n") == {}
    held = text + ('sojourn_accept_pauses_total{policy="fair"} 7\n'
                   'sojourn_linger_timeouts_total{policy="fair"} 3\n')
    assert server_metric_totals(held) == {"server_bytes_sent": 1500.0, "server_responses": 6.0,
                                          "server_accept_pauses": 7.0, "server_linger_timeouts": 3.0}


def test_the_ideal_schedules_give_each_policys_mean_and_largest_1pct():
    """summary.json's ``ideal``: per policy of ideal.parquet, the mean response time and the
    mean of the largest 1% of requests by size (000 §5.2), and their wait for the first byte
    (here the ideal SRPT's largest wait half their time, PS's none)."""
    import pandas as pd

    from sojourn.analysis.results import ideal_metrics
    sizes = list(range(1, 201))
    response = [s / 100 for s in sizes] + [s / 200 for s in sizes]
    ideal = pd.DataFrame({"policy": ["ps"] * 200 + ["srpt"] * 200, "size": sizes * 2, "scheduled_s": 0.0,
                          "first_byte_s": [0.0] * 200 + [r / 2 for r in response[200:]], "response_s": response})
    assert ideal_metrics(ideal) == {
        "ps": {"response_mean": pytest.approx(1.005), "response_largest_1pct_mean": 1.995, "ttfb_largest_1pct_mean": 0},
        "srpt": {"response_mean": pytest.approx(0.5025), "response_largest_1pct_mean": 0.9975,
                 "ttfb_largest_1pct_mean": pytest.approx(0.49875)}}
    # Users aborting after 1.5 s (000 Table 2 (H)): PS keeps sizes 151-200 past it, SRPT none.
    aborting = ideal_metrics(ideal, abort_after_s=1.5)
    assert aborting["ps"]["share_past_abort"] == 0.25 and aborting["srpt"]["share_past_abort"] == 0
    assert "share_past_abort_on_path" not in aborting["ps"]
    # A path carrying 400 size units a second adds size / 400 s: past 0.9 s SRPT keeps sizes from
    # 181 alone, on the path those from 121 (121/200 + 121/400 = 0.9075 s); PS from 73 on the
    # path (0.73 + 0.1825 = 0.9125 s).
    on_path = ideal_metrics(ideal, abort_after_s=0.9, path_rate=400)
    assert on_path["srpt"]["share_past_abort_on_path"] == 0.4 and on_path["srpt"]["share_past_abort"] == 0.1
    assert on_path["ps"]["share_past_abort_on_path"] == pytest.approx(0.64)


def test_one_connection_over_a_lossy_path_carries_what_mathis_gives():
    """000 (J)'s path, 100 ms and 5% loss at a 1500-byte MTU: 1448 / 0.1 * sqrt(1.5 / 0.05)
    bytes/s; none for several groups, or a path without loss, where the link limits."""
    from sojourn.analysis.results import path_bytes_per_s
    assert path_bytes_per_s([{"rtt_ms": 100.0, "loss": 0.05, "mtu": 1500}]) == pytest.approx(1448 / 0.1 * math.sqrt(30))
    assert path_bytes_per_s([{"rtt_ms": 100.0, "loss": 0.0, "mtu": 1500}]) is None
    assert path_bytes_per_s([{"rtt_ms": 100.0, "loss": 0.05}] * 2) is None


def test_capacity_levels_in_requests_and_bits_per_second():
    """002 §4.4's capacity is the most requests/s over the levels; 001 §3.1 quotes the same
    in Mb/s: the level's completed body bits per second, after its warm-up."""
    from sojourn.analysis.sweeps import capacity_of_levels, window_throughput

    requests = pd.DataFrame({"scheduled_s": [0.0, 0.5, 1.0, 2.0], "last_byte_s": [0.4, 1.5, 2.5, 3.5],
                             "completed": [True, True, True, False], "bytes": [100, 1000, 3000, 0],
                             "response_s": [0.4, 1.0, 1.5, math.nan]})
    window = window_throughput(requests, 1.0, 3.0)  # the last bytes at 1.5 and 2.5 s; 3.5 s is outside
    assert window == {"throughput_rps": 1.0, "throughput_bps": (1000 + 3000) * 8 / 2, "response_mean": 1.25,
                      "errors": 0}
    levels = [{"users": 8, "throughput_rps": 10.0, "throughput_bps": 1e6},
              {"users": 64, "throughput_rps": 30.0, "throughput_bps": 3e6},
              {"users": 512, "throughput_rps": 20.0, "throughput_bps": 4e6}]
    best = capacity_of_levels(levels)
    assert (best["capacity_rps"], best["capacity_bps"], best["capacity_users"]) == (30.0, 3e6, 64)
    assert not best["capacity_at_last_level"]


def test_the_capacity_probe_doubles_its_users_until_the_throughput_falls():
    """002 §4.4 takes the maximum over a curve: after the listed levels the probe goes on,
    doubling the users, only while the newest level sustained the most, and at most
    ``until_fall`` levels more."""
    from sojourn.analysis.sweeps import next_level

    def probe(throughput_at: dict[int, float], listed: list[int], until_fall: int) -> list[int]:
        levels = []
        while (users := next_level(levels, listed, until_fall)) is not None:
            levels.append({"users": users, "throughput_rps": throughput_at[users]})
        return [level["users"] for level in levels]

    rising = {n: float(n) for n in (8, 16, 32, 64, 128)}
    assert probe(rising, [8, 16], 0) == [8, 16]
    assert probe(rising, [8, 16], 2) == [8, 16, 32, 64], "still rising: stops at its limit"
    peaked = {8: 5.0, 16: 9.0, 32: 8.0, 64: 20.0}
    assert probe(peaked, [8, 16], 3) == [8, 16, 32], "fell past 16: no more levels"
    assert probe(peaked, [16, 32], 3) == [16, 32], "a last listed level below the best ends it too"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0, 1e4), min_size=1, max_size=6), st.integers(0, 4))
def test_a_probe_that_stopped_before_its_limit_has_its_maximum_below_its_last_level(throughput, until_fall):
    """Whatever the curve, the probe ends with its most requests/s at a level before its
    last one, or else having run every level it may."""
    from sojourn.analysis.sweeps import capacity_of_levels, next_level

    listed = [8 * 2 ** i for i in range(len(throughput) // 2 + 1)]
    levels = []
    while (users := next_level(levels, listed, until_fall)) is not None:
        levels.append({"users": users, "throughput_rps": throughput[len(levels) % len(throughput)]})
    assert len(levels) == len(listed) + until_fall or not capacity_of_levels(levels)["capacity_at_last_level"]
