"""Admission control outside the testbed: the spec key ``server.admission`` and its way to
``serve --admission`` (serve_toml, a real server on loopback), outcome ``refused`` in the
analysis, the overload-control specs, and docs/overload-control.md's stages (derive, publish,
doc) on hand-made results whose answers are computed by hand below."""

from __future__ import annotations

import io
import json
import math
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from rich.console import Console

from sojourn import analysis
from sojourn.overload import EXPERIMENTS, REPO, doc
from sojourn.overload.derive import (censor_horizon, derive, recovery_spans, refusals_by_reason, settle,
                                     settle_time, size_class, stage_pool_numbers, uncensored_until)
from sojourn.overload.campaign import plan, run_and_publish
from sojourn.overload.publish import publish
from sojourn.reproduce.publish import restore_published
from sojourn.runner.layout import is_complete
from sojourn.overload.simulate import as_the_testbed_ends, body_rate_bps, first_write_wait_mean, sim_args, slot_measures
from sojourn.workloads.shaping import overload_spans
from sojourn.servers import Server, ServerConfig, ServerError, SojournOptions, free_port, serve_toml
from sojourn.runner.plan import admission_arg
from sojourn.runner.spec import SpecError, load_spec, validate


def spec(**server) -> dict:
    return {"name": "t", "workload": {"rho": 0.5}, "server": server}


@pytest.mark.parametrize("value", ["gradient", "codel:target=10ms,interval=200ms", "delay:decrease=25%", "size",
                                   "size:deadline=7s,rate=10mbit"])
def test_admission_values_are_accepted(value):
    (run,) = validate(spec(admission=value)).runs
    assert run.config["server"]["admission"] == value


@pytest.mark.parametrize("raw, message", [
    # serve's own words (serve --check): the spec does not repeat its rules.
    (spec(admission="lifo"), r"--admission: unknown admission policy \"lifo\": expected one of gradient, codel, delay, size"),
    (spec(admission="codel:target"), r"--admission: admission codel: \"target\" is not KEY=VALUE"),
    (spec(kind="nginx", admission="codel"), r"server\.admission = 'codel' needs server\.kind = 'sojourn'"),
])
def test_bad_admission_is_named(raw, message):
    with pytest.raises(SpecError, match=message):
        validate(raw)


def test_size_takes_its_rate_from_the_uplink_unless_given():
    network = {"link_mbps": 10.0}
    assert admission_arg({"admission": ""}, network) is None
    assert admission_arg({"admission": "codel"}, network) == "codel"
    assert admission_arg({"admission": "size"}, network) == "size:rate=10.0mbit"
    assert admission_arg({"admission": "size:deadline=5s"}, network) == "size:deadline=5s,rate=10.0mbit"
    assert admission_arg({"admission": "size:rate=8mbit"}, network) == "size:rate=8mbit"


def test_the_serve_file_carries_admission_to_a_real_server(tmp_path):
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "a.bin").write_bytes(b"x" * 100)
    with pytest.raises(ServerError, match="apply to the sojourn server only, not nginx"):
        ServerConfig(kind="nginx", root=tmp_path / "root", port=8080, sojourn=SojournOptions(admission="codel")).validate()
    admin = free_port()
    config = ServerConfig(kind="sojourn", root=tmp_path / "root", port=free_port(),
                          sojourn=SojournOptions(admin_port=admin, admission="gradient"))
    assert 'admission = "gradient"' in serve_toml(config)
    with Server(config, log_dir=tmp_path) as peer:
        with urllib.request.urlopen(peer.url + "/a.bin", timeout=5) as response:
            assert response.read() == b"x" * 100
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{admin}/metrics", timeout=5).read().decode()
    assert refusals_by_reason(metrics) == {"concurrency_limit": 0, "codel": 0, "queueing_delay": 0, "deadline": 0}
    assert 'sojourn_admission_refusals_total{admission="gradient",reason="concurrency_limit"} 0' in metrics
    # Its first minRTT probe holds the limit at Envoy's minimum of 3.
    assert 'sojourn_admission_level{worker="0",admission="gradient"} 3' in metrics


# request 0 ok (1000 B), 1 refused (60 KiB), 2 ok (3000 B, its SYN-ACK lost: a 1-s handshake), 3 refused
# (500 B), 4 http_error.
RECORDS = """\
request_id,attempt,final,client,path,expected_size,bytes,status,scheduled_s,dispatch_s,connect_start_s,connect_end_s,sent_s,first_byte_s,last_byte_s,outcome,error
0,0,1,0,/a,1000,1000,200,0.0,0.0,0.0,0.005,0.01,0.02,1.0,ok,
1,0,1,1,/b,61440,0,503,0.5,0.5,,,0.51,0.6,0.6,refused,
2,0,1,2,/c,3000,3000,200,1.0,1.0,1.0,2.0,2.01,2.1,4.0,ok,
3,0,1,3,/d,500,0,503,1.5,1.5,,,1.51,1.6,1.6,refused,
4,0,1,0,/e,100,0,404,1.8,1.8,,,1.81,1.9,1.9,http_error,
"""

METRICS = """\
# HELP sojourn_admission_refusals_total Requests refused.
# TYPE sojourn_admission_refusals_total counter
sojourn_admission_refusals_total{admission="size",reason="deadline"} 2
sojourn_admission_refusals_total{admission="size",reason="codel"} 0
# HELP sojourn_unread_wait_seconds A request's first bytes received by the host to read by the server.
# TYPE sojourn_unread_wait_seconds histogram
sojourn_unread_wait_seconds_bucket{le="0.001"} 1
sojourn_unread_wait_seconds_bucket{le="5"} 3
sojourn_unread_wait_seconds_bucket{le="+Inf"} 4
sojourn_unread_wait_seconds_sum 9
sojourn_unread_wait_seconds_count 4
# HELP sojourn_first_write_wait_seconds An admitted request's first bytes received by the host to its first byte written.
# TYPE sojourn_first_write_wait_seconds histogram
sojourn_first_write_wait_seconds_bucket{le="0.01"} 1
sojourn_first_write_wait_seconds_bucket{le="+Inf"} 2
sojourn_first_write_wait_seconds_sum 0.04
sojourn_first_write_wait_seconds_count 2
# HELP sojourn_write_blocked_seconds A write that would block to the writable event that let it write again.
# TYPE sojourn_write_blocked_seconds histogram
sojourn_write_blocked_seconds_bucket{le="0.1"} 3
sojourn_write_blocked_seconds_bucket{le="+Inf"} 4
sojourn_write_blocked_seconds_sum 0.6
sojourn_write_blocked_seconds_count 4
# HELP sojourn_bytes_sent_total Bytes sent.
# TYPE sojourn_bytes_sent_total counter
sojourn_bytes_sent_total{policy="srpt"} 5000
# HELP sojourn_write_slots_full_seconds_total Seconds with a response ready and every write slot held.
# TYPE sojourn_write_slots_full_seconds_total counter
sojourn_write_slots_full_seconds_total{policy="srpt"} 6.18
"""


TRACE = """\
arrival_s,client,path,size
0.0,0,/a,1000
0.5,1,/b,61440
1.0,2,/c,3000
1.5,3,/d,500
1.8,0,/e,100
"""


def result_dir(root: Path, run: str = "srpt-size-rho=1.2", rep: int = 0, admission: str = "size") -> Path:
    directory = root / run / str(rep)
    directory.mkdir(parents=True)
    (directory / "records.csv").write_text(RECORDS)
    (directory / "status.json").write_text(json.dumps({"state": "complete"}))
    (directory / "server_metrics.txt").write_text(METRICS)
    (directory / "load_summary.json").write_text(json.dumps({"workload": None}))
    (directory / "summary.json").write_text(json.dumps({"syn_drops": 7}))
    # The uplink's FIFO and one band, 12,500 then 37,500 bytes queued: 25,000 on average; 3
    # and 2 packets dropped there, 4 retransmission timeouts (cumulative counters).
    (directory / "counters.csv").write_text(
        "t_s,q1_20_backlog_bytes,q1_10_backlog_bytes,q1_20_dropped,q1_10_dropped,rto_timeouts\n"
        "0,12500,0,10,0,1\n1,25000,12500,13,2,5\n")
    trace = root / "trace.csv"
    trace.write_text(TRACE)
    server = {"policy": "srpt", "kernel_bands": True, "admission": admission, "stages": "", "quantum": "32K",
              "write_concurrency": 8, "write_concurrency_from": "", "notsent_lowat": "16K"}
    (directory / "run.json").write_text(json.dumps({
        "run": run, "repetition": rep, "variant": run.rsplit("-", 1)[0], "sweep_value": 1.2,
        "config": {"server": server, "network": {"link_mbps": 10, "groups": [], "tcp": {"timestamps": True}}, "workload": {"timeout_s": 60.0},
                   "collect": {"drain_s": 60.0}},
        # The records' 66,040 body bytes in 2 s at a load of 1.2: a body rate of 220 kbit/s.
        "inputs": {"trace": str(trace), "periods": [{"start_s": 0.0, "end_s": 2.0, "target_rho": 1.2,
                                                      "achieved_rho": 1.2, "bytes": 66040}]}}))
    return directory


def test_refused_is_an_outcome_of_its_own():
    requests = analysis.requests(analysis.normalize(pd.read_csv(io.StringIO(RECORDS))))
    summary = analysis.summarize(requests)
    assert summary["refused"] == 2 and summary["outcomes"]["refused"] == 2
    assert summary["errors"] == 1, "a refusal is the server's choice, not an error"
    assert summary["completed"] == 2


def test_derive_counts_what_the_doc_shows(tmp_path):
    d = derive(result_dir(tmp_path))
    # Span 0 .. 4.0 s; completed: 4000 bytes, 2 requests.
    assert d["duration_s"] == pytest.approx(4.0)
    assert d["goodput_bps"] == pytest.approx(4000 * 8 / 4.0) and d["goodput_rps"] == pytest.approx(0.5)
    assert d["patient_rps"] == pytest.approx(0.5), "both completed within 10 s"
    assert d["response_mean"] == pytest.approx((1.0 + 3.0) / 2)
    # Handshakes of 0.005 s and 1 s in 4 s of response time; the rest is what the model sees.
    assert d["handshake_share"] == pytest.approx(1.005 / 4.0)
    assert d["response_mean_less_handshakes"] == pytest.approx((4.0 - 1.005) / 2)
    # Sent to first byte 0.01 and 0.09 s, first to last byte 0.98 and 1.9 s.
    assert d["first_byte_wait_mean"] == pytest.approx(0.05) and d["transfer_mean"] == pytest.approx(1.44)
    assert d["uplink_queue_delay"] == pytest.approx(25_000 * 8 / 10e6), "25,000 bytes at 10 Mbit/s: 20 ms"
    assert d["uplink_drops_per_request"] == pytest.approx(5 / 5), "3 + 2 drops over the run, 5 requests"
    assert d["rto_timeouts_per_request"] == pytest.approx(4 / 5)
    assert (d["requests"], d["completed"], d["refused"]) == (5, 2, 2)
    assert d["http_error_share"] == pytest.approx(1 / 5), "the 404; refusals are not errors"
    assert d["refused_bytes_share"] == pytest.approx((61440 + 500) / (1000 + 61440 + 3000 + 500 + 100))
    assert d["refused_by_size"] == {"<1K": [1, 3], "1K-2K": [0, 0], "2K-5K": [0, 1], "5K-50K": [0, 0], ">=50K": [1, 1]}
    assert d["server_refusals"] == {"deadline": 2, "codel": 0} and d["syn_drops"] == 7
    assert d["unread_wait_mean"] == pytest.approx(9 / 4)
    assert d["first_write_wait_mean"] == pytest.approx(0.02), "of the clients' 0.05 s to the first byte"
    assert d["slots_full_share"] == pytest.approx(6.18 / (1.8 + 60.0)), "up to the stop, 60 s after the last request"
    assert d["write_blocked_mean"] == pytest.approx(0.15)
    assert d["scheduler"] == "srpt+bands" and d["admission"] == "size"
    assert d["stage_busy_share"] is None and d["stage_dropped_share"] is None and d["session_abort_rate"] is None
    assert d["sessions_per_s"] is None and len(d["settle_s"]) == 1 and d["recover_s"] == [], "one step up, none down"
    assert d["refused_after_steps_share"] is None, "no step down: nothing is scheduled after one"
    # 1-s bins by scheduled time: 1 of 2 refused, then 1 of 3, then nothing scheduled.
    assert d["over_time"]["refused"] == [pytest.approx(0.5), pytest.approx(1 / 3), None, None]
    json.dumps(d, allow_nan=False)  # publishable as is


def test_the_stage_pools_busy_share_and_drops():
    """Stage runs: the share of the run the worker spent processing (completed times mean
    processing, over the run and the workers) and the pool's own drops per request offered."""
    sessions = {"anatomy": [{"completed": 100, "processing_mean_s": 0.02, "dropped": 5},
                            {"completed": 0, "processing_mean_s": math.nan, "dropped": 1}]}
    numbers = stage_pool_numbers(sessions, {"policy": "dwfs"}, 4.0, 60)
    assert numbers == {"stage_busy_share": pytest.approx(0.5), "stage_dropped_share": pytest.approx(0.1)}
    assert stage_pool_numbers(sessions, {"workers": 2}, 4.0, 60)["stage_busy_share"] == pytest.approx(0.25)
    assert all(math.isnan(v) for v in stage_pool_numbers(None, None, 4.0, 60).values())
    # In the doc they take the place of refusals by size (every stage reply is small).
    reps = [{"stage_busy_share": 0.64, "stage_dropped_share": 0.001, "refused": 30, "requests": 400,
             "session_abort_rate": 0.2, "sessions_per_s": 6.8}]
    assert "| dwfs-delay-rate=12 | 64 | 0.1 | 7.5 | 20 | 6.8 |" in doc.stage_table({"dwfs-delay-rate=12": doc.summarize(reps)})


def test_refusals_after_a_step_are_counted_apart(tmp_path):
    """The share refused of the requests scheduled after a load step, where a load below 1
    leaves the server nothing it could not serve: a limit still recovering from the step."""
    directory = result_dir(tmp_path)
    run = json.loads((directory / "run.json").read_text())
    run["inputs"]["periods"] = [{"start_s": 0.0, "end_s": 1.0, "target_rho": 2.0, "achieved_rho": 2.0, "bytes": 62440},
                                {"start_s": 1.0, "end_s": 2.0, "target_rho": 0.4, "achieved_rho": 0.4, "bytes": 3600}]
    (directory / "run.json").write_text(json.dumps(run))
    d = derive(directory)
    # After the step (1.0 s on): /c completed, /d refused, /e a 404; /b's refusal in the step is not counted.
    assert d["refused_after_steps_share"] == pytest.approx(1 / 3)
    assert d["refused"] == 2, "the run's refusals are all counted as before"


def test_patience_counts_only_responses_within_10_s(tmp_path):
    directory = result_dir(tmp_path)
    records = directory / "records.csv"
    records.write_text(records.read_text().replace(",2.1,4.0,ok,", ",2.1,12.0,ok,"))  # /c now takes 11 s
    d = derive(directory)
    assert d["duration_s"] == pytest.approx(12.0)
    assert d["goodput_rps"] == pytest.approx(2 / 12) and d["patient_rps"] == pytest.approx(1 / 12)


def test_runs_cut_at_their_last_request_leave_the_censored_end_out():
    config = {"workload": {"timeout_s": 60.0}, "collect": {"drain_s": 0.0}}
    assert uncensored_until(600.0, censor_horizon(config), 71.0) == 540.0
    assert uncensored_until(600.0, censor_horizon(config), 3.0) == 597.0, "requests within the p99 response time of the end"
    config["workload"]["timeout_s"] = 900.0  # 000 §4: clients never give up
    assert uncensored_until(600.0, censor_horizon(config), 71.0) == 529.0
    config["collect"]["drain_s"] = 900.0
    assert censor_horizon(config) == 0.0, "a drain of the whole timeout censors nothing"


def test_closing_note_says_what_a_lead_cost():
    nan3 = doc.Figure(math.nan, math.nan, math.nan, 0, 3)
    summaries = {
        "srpt": {key: nan3 for key, *_ in doc.METRICS} | {"response_mean": doc.Figure(0.15, 0.14, 0.16, 3, 3),
                                                          "refused_share": doc.Figure(0.0, 0.0, 0.0, 3, 3)},
        "srpt-gradient": {key: nan3 for key, *_ in doc.METRICS} | {"response_mean": doc.Figure(0.04, 0.03, 0.05, 3, 3),
                                                                   "refused_share": doc.Figure(0.19, 0.18, 0.20, 3, 3)},
    }
    # A figure measured in only some of the repetitions says so.
    assert doc.cell(doc.Figure(0.04, 0.03, 0.05, 2, 3), 1.0) == "0.04 [0.03, 0.05] (2 of 3 reps)"
    runs = {"srpt": [{"admission": "", "scheduler": "srpt+bands"}],
            "srpt-gradient": [{"admission": "gradient", "scheduler": "srpt+bands"}]}
    lines = doc.closing(EXPERIMENTS[0], "1.2", runs, summaries)
    assert lines == ["- overload-control-persistent, 1.2: best mean response s: srpt-gradient (0.04 [0.03, 0.05], refusing "
                     "19 [18, 20]% of requests); 0.267x srpt (0.15 [0.14, 0.16])."], lines
    # A best of nothing (recovered at once) is set beside the other's figure, not as a ratio.
    summaries["srpt-gradient"]["response_mean"] = doc.Figure(0.0, 0.0, 0.0, 3, 3)
    assert doc.closing(EXPERIMENTS[0], "1.2", runs, summaries)[0].endswith(
        "refusing 19 [18, 20]% of requests); against srpt (0.15 [0.14, 0.16])."), lines


def test_the_model_runs_at_the_body_rate_a_load_of_one_carried():
    periods = [{"start_s": 0.0, "end_s": 600.0, "achieved_rho": 1.2, "bytes": 787_346_413}]
    assert body_rate_bps(periods) == pytest.approx(8.748e6, rel=1e-3), "000's rho 1.2 on the wire: 8.75 Mbit/s of bodies"
    config = {"server": {"policy": "fair", "quantum": "32K", "write_concurrency": 8, "write_concurrency_from": "",
                         "notsent_lowat": "16K", "admission": "size", "stages": ""},
              "network": {"link_mbps": 10, "groups": [], "tcp": {"timestamps": True}}}
    assert sim_args(config, periods) == ["--link", "8748293", "--policy", "fair", "--quantum", "32K", "--write-concurrency",
                                         "8", "--kernel-buffer", "16K", "--kernel-overshoot", "2896",
                                         "--admission", "size:rate=10mbit"], "two 1,448-byte segments past the mark"
    config["network"] = {"link_mbps": 10, "groups": [{"mtu": 1500}, {"mtu": 1000}], "tcp": {"timestamps": False}}
    assert "1920" in sim_args(config, periods), "two segments of the smallest group's MSS"
    config["server"]["stages"] = {"policy": "dwfs"}
    assert sim_args(config, periods) is None, "the stage pool has no model"
    with pytest.raises(ValueError, match="carry no load"):
        body_rate_bps([{"start_s": 0.0, "end_s": 10.0, "achieved_rho": 0.0, "bytes": 0}])


def test_settle_time_and_size_classes():
    # Mean response 4 s for the first 10 s after the step, then 1 s: settled after 10 s of 40.
    t = [i + 0.5 for i in range(40)]
    done = pd.DataFrame({"scheduled_s": t, "response_s": [4.0 if x < 10 else 1.0 for x in t]})
    assert settle_time(done, 0.0, 40.0) == pytest.approx(10.0)
    # Still climbing at the end: never settled (NaN).
    climbing = pd.DataFrame({"scheduled_s": t, "response_s": [1.0 + x for x in t]})
    assert settle_time(climbing, 0.0, 40.0) != settle_time(climbing, 0.0, 40.0)
    # A steady 1 s after 10 s at 4 s, every fourth bin lifted to 3 s by a few large responses:
    # settled after 10 s (the spikes are not a swing).
    spiky = pd.DataFrame({"scheduled_s": t, "response_s": [4.0 if x < 10 else 3.0 if int(x) % 4 == 1 else 1.0 for x in t]})
    assert settle_time(spiky, 0.0, 40.0) == pytest.approx(10.0)
    # The same spikes on a climb: never settled.
    spiky_climb = pd.DataFrame({"scheduled_s": t, "response_s": [(1.0 + x) ** 2 * (3.0 if int(x) % 4 == 0 else 1.0) for x in t]})
    assert settle_time(spiky_climb, 0.0, 40.0) != settle_time(spiky_climb, 0.0, 40.0)
    # Settled at 1 s after 10 s at 4 s, with three seconds at 1.3 s half way: a settled series
    # grazing the band's edge (the mean of a few bins of heavy-tailed sizes) does not restart
    # the clock; it settled after 10 s, not after 33.
    t60 = [i + 0.5 for i in range(60)]
    grazing = pd.DataFrame({"scheduled_s": t60,
                            "response_s": [4.0 if x < 10 else 1.3 if 30 <= x < 33 else 1.0 for x in t60]})
    assert settle_time(grazing, 0.0, 60.0) == pytest.approx(10.0)
    # Settled at once, then falling by half over the second half: a drift, never settled.
    falling = pd.DataFrame({"scheduled_s": t60, "response_s": [1.0 if x < 30 else 1.0 - (x - 30) / 60 for x in t60]})
    assert math.isnan(settle_time(falling, 0.0, 60.0))
    # A slow swing between 0.5 and 1.5 s (period 16 s): never settled.
    swing = pd.DataFrame({"scheduled_s": t, "response_s": [1.0 + 0.5 * math.sin(x * math.pi / 8) for x in t]})
    assert settle_time(swing, 0.0, 40.0) != settle_time(swing, 0.0, 40.0)
    # Why each did not settle: the slow swing enters the band to stay only in its last quarter;
    # 4-s stretches at 2 s among 0.5-s ones, the last of them at 2 s, never stay in it.
    blocks = pd.DataFrame({"scheduled_s": t, "response_s": [2.0 if int(x) // 4 in (0, 2, 4, 7, 9) else 0.5 for x in t]})
    assert [settle(frame, 0.0, 40.0 if frame is not falling else 60.0).miss
            for frame in (done, climbing, falling, swing, blocks)] == ["", "drift", "drift", "late", "swing"]
    assert settle(done, 50.0, 60.0).miss == "empty", "no request in the span"
    # A burst that lifted the mean to 4 s, then a level of a few milliseconds whose bins swing
    # by several times themselves (heavy-tailed sizes at rho 0.4): back within a tenth of the
    # 4-s step in the bin from 7.5 s (the fall crosses 0.4 s at 7.2 s), though never within 25%
    # of its own jittery level.
    t30 = [i + 0.5 for i in range(30)]
    jitter = [0.002, 0.009, 0.004, 0.014, 0.003, 0.006]
    after = pd.DataFrame({"scheduled_s": t30, "response_s": [4.0 * (1 - x / 8) if x < 8 else jitter[int(x) % 6] for x in t30]})
    assert settle_time(after, 0.0, 30.0, stepped_from=4.0) == pytest.approx(7.5)
    assert math.isnan(settle_time(after, 0.0, 30.0, stepped_from=0.01)), "a step of 10 ms leaves a jitter of 12 ms outside"
    # Started already near its level: recovered at once.
    assert settle_time(after, 10.0, 30.0, stepped_from=4.0) < 0.5, "in its first bin with a request"
    assert list(size_class(pd.Series([0, 1023, 1024, 5120, 51199, 51200]))) == \
        ["<1K", "<1K", "1K-2K", "5K-50K", "5K-50K", ">=50K"]


def test_load_steps_are_the_stretches_above_rho_one_and_what_follows_them():
    w4 = [{"start_s": 25.0 * i, "end_s": 25.0 * (i + 1), "target_rho": 1.4 if i % 2 else 0.4} for i in range(5)]
    assert overload_spans(w4) == [(25.0, 50.0), (75.0, 100.0)]
    assert recovery_spans(w4) == [((25.0, 50.0), (50.0, 75.0)), ((75.0, 100.0), (100.0, 125.0))]
    # Adjacent periods above 1 are one stretch; persistent overload has nothing to recover in.
    persistent = [{"start_s": 0.0, "end_s": 300.0, "target_rho": 1.2}, {"start_s": 300.0, "end_s": 600.0, "target_rho": 1.4}]
    assert overload_spans(persistent) == [(0.0, 600.0)] and recovery_spans(persistent) == []


def test_doc_says_plainly_what_has_no_result(tmp_path):
    text = doc.build(tmp_path / "published", tmp_path / "doc.md")
    for experiment in EXPERIMENTS:
        assert f"**No result yet.** Nothing of `{experiment.name}` is published" in text
    assert "No experiment has a published result yet, so no combination can be said to win on any metric." in text
    assert (tmp_path / "doc.md").read_text() == text


def test_publish_then_doc_from_the_published_numbers_alone(tmp_path):
    results = tmp_path / "results" / "overload-control-persistent"
    result_dir(results, "srpt-size-rho=1.2", 0)
    result_dir(results, "srpt-size-rho=1.2", 1)
    result_dir(results, "srpt-rho=1.2", 0, admission="")
    (results / "spec.toml").write_text("")
    published = tmp_path / "published"
    destination = publish(results, published)
    assert sorted(p.relative_to(destination).as_posix() for p in destination.glob("*/*.json")) == \
        ["srpt-rho=1.2/0.json", "srpt-rho=1.2/model.json", "srpt-size-rho=1.2/0.json", "srpt-size-rho=1.2/1.json",
         "srpt-size-rho=1.2/model.json"]
    assert not any(destination.rglob("records.csv")), "the per-request records stay under results/"
    text = doc.build(published, tmp_path / "doc.md")
    # 4000 body bytes of completed responses in 4 s: 0.008 Mbit/s; both repetitions alike.
    assert "| srpt-size-rho=1.2 | 2 | 0.008 | 0.5 | 0.5 | 2 | 2.98 | 25.1 | 20 | 40 | 20 | 93.8 | 8.33 | — | 7 | 2.25 | 0 | — |" in text
    # The simulator replayed the trace on 220 kbit/s of bodies (66,040 bytes in 2 s at load
    # 1.2); the size policy, told the testbed's 10 Mbit/s, refused none of the five there.
    # Without its 1.005 s of handshakes the testbed's mean is 1.5 s; the model's has none.
    # Of the 1.5 s, 0.05 from sent to first byte and 1.44 to the last; in the model none waited for its first byte.
    # The server had every write slot held for 6.18 s of the 61.8 s up to the stop, a blocked
    # write holding its slot 0.15 s on average; the model's 8 slots were never all held by 5
    # requests, and the 60-KiB response's blocked writes waited 0.436 s each for its 16-KiB
    # mark, passed by two 1,448-byte segments (the kernel's overshoot), to drain to half at
    # 27.5 kB/s.
    # The testbed's uplink dropped 5 packets and the server timed out 4 times, for 5 requests;
    # the model has no packets to drop.
    assert ("| srpt-size-rho=1.2 | 40 / 0 | 8.33 / 0 | 0.008 / 0.184 | 2 / 0.532 | 2.98 / 2.28 | 1.5 / 0.532 | 0.05 / 0 "
            "| 0.02 / 0 | 10 / 0 | 0.15 / 0.436 | 1.44 / 0.532 | 100 / — | 80 / — |") in text
    assert "| srpt-size-rho=1.2 | 2 / 6 | 0 / 0 | 0 / 2 | 0 / 0 | 2 / 2 |" in text
    assert ("- overload-control-persistent, 1.2: best mean response s: srpt-rho=1.2 (2), tied with srpt-size-rho=1.2 "
            "(the 90% intervals overlap); 1x srpt-size-rho=1.2 (2).") in text
    assert "**Partial:** 3 of the spec's 60 repetitions are published (20 runs)" in text
    assert "best refused" not in text, "refusals describe a policy; the closing note does not rank them"
    assert "**No result yet.** Nothing of `overload-control-transient`" in text
    assert ("Without a full-scale result yet: overload-control-transient, overload-control-uncapped, "
            "overload-control-uncapped-codel, overload-control-first-write, overload-control-write-slots, overload-control-dwfs, "
            "overload-control-dwfs-transient, overload-control-dwfs-delay.") in text
    assert "The stage pool (003 §4)" not in text, "sized responses: refusals by size class instead"
    assert (published / "figures" / "overload-control-persistent-1.2.png").is_file()
    with pytest.raises(ValueError, match="not an overload-control experiment"):
        other = tmp_path / "results" / "000-baseline"
        other.mkdir()
        (other / "spec.toml").write_text("")
        publish(other, published)


def test_a_campaign_resumes_from_its_publication_in_a_new_checkout(tmp_path):
    """results/ is not kept between checkouts: what one published, the next restores and
    keeps, running and deriving only the repetitions that are new."""
    spec_text = 'name = "overload-control-persistent"\n'
    experiment = SimpleNamespace(name="overload-control-persistent", text=spec_text)
    first = tmp_path / "first" / "overload-control-persistent"
    result_dir(first, "srpt-size-rho=1.2", 0)
    (first / "spec.toml").write_text(spec_text)
    published = tmp_path / "published"
    destination = publish(first, published)
    assert json.loads((destination / "meta.json").read_text())["scale"] == "full"
    assert (destination / "spec.toml").read_text() == spec_text
    assert sorted(p.name for p in (destination / "srpt-size-rho=1.2" / "0").iterdir()) == \
        ["run.json", "status.json", "summary.json"], "the runner's files, not the per-request records"
    derived = (destination / "srpt-size-rho=1.2" / "0.json").read_text()

    second = tmp_path / "second"
    assert restore_published(experiment, destination, second, quick=False) == 1
    resumed = second / "overload-control-persistent"
    assert is_complete(resumed / "srpt-size-rho=1.2" / "0") and not (resumed / "srpt-size-rho=1.2" / "0" / "records.csv").exists()
    result_dir(resumed, "srpt-size-rho=1.2", 1)
    destination = publish(resumed, published)
    assert (destination / "srpt-size-rho=1.2" / "0.json").read_text() == derived, "carried over, not derived again"
    assert (destination / "srpt-size-rho=1.2" / "1.json").is_file() and (destination / "srpt-size-rho=1.2" / "model.json").is_file()
    assert "| srpt-size-rho=1.2 | 2 |" in doc.build(published, tmp_path / "doc.md")

    # A repetition restored from a publication that lacks its numbers is left out, not invented.
    (destination / "srpt-size-rho=1.2" / "1.json").unlink()
    third = tmp_path / "third"
    assert restore_published(experiment, destination, third, quick=False) == 2
    destination = publish(third / "overload-control-persistent", published)
    assert [p.name for p in (destination / "srpt-size-rho=1.2").glob("[0-9]*.json")] == ["0.json"]


def test_run_refuses_to_replace_a_publication_it_cannot_resume_from(tmp_path):
    """One published before publications kept the runner's files: running would replace it."""
    old = tmp_path / "published" / "overload-control-persistent" / "fair-rho=1.2"
    old.mkdir(parents=True)
    (old / "0.json").write_text("{}")
    console = Console(file=io.StringIO(), width=300)
    assert run_and_publish(console, "overload-control-persistent", tmp_path / "results",
                           published=tmp_path / "published", doc_path=tmp_path / "doc.md") == 2
    assert "move them aside" in console.file.getvalue()
    assert (old / "0.json").read_text() == "{}" and not (tmp_path / "results").exists()
    line = plan(published=tmp_path / "published")[0]
    assert "published 0 of 60," in line and "(1 repetition(s) published without runner files" in line


def test_every_overload_control_spec_is_in_the_doc():
    assert {e.spec for e in EXPERIMENTS} == {p.relative_to(REPO).as_posix()
                                           for p in (REPO / "experiments" / "overload-control").glob("*.toml")}


# The sets with a twin set isolate one factor of the persistent set's runs instead (the tests after this one),
# and the delay-threshold set one parameter of one policy.
@pytest.mark.parametrize("path", [REPO / e.spec for e in EXPERIMENTS
                                  if not e.twin_set and e.name != "overload-control-dwfs-delay"], ids=lambda p: p.name)
def test_overload_control_specs_cover_every_combination(path):
    experiment = load_spec(path)
    assert experiment.repetitions == 3
    admissions = {run.config["server"]["admission"].split(":")[0] for run in experiment.runs}
    assert admissions >= {"", "gradient", "codel", "delay"}
    for run in experiment.runs:
        workload = run.config["workload"]
        assert workload["time_compression"] == 1, "the paper's time scale"
        if workload["profile"]:
            assert workload["profile"] in ("W4", "W7")
        else:
            assert workload["duration_s"] >= 600, "at least 10 minutes of persistent overload"
    load_spec(path, quick=True)


def test_the_uncapped_set_differs_from_the_persistent_set_only_by_the_cap():
    persistent = {run.name: run.config for run in load_spec(REPO / "experiments" / "overload-control" / "persistent.toml").runs}
    uncapped = [run for spec in ("uncapped.toml", "uncapped-codel.toml")
                for run in load_spec(REPO / "experiments" / "overload-control" / spec).runs]
    assert uncapped and all(run.config["server"]["max_connections"] == 0 for run in uncapped)
    for run in uncapped:
        twin = persistent[run.name.replace("-uncapped", "")]
        assert twin["server"]["max_connections"] == 350
        assert {**run.config, "server": {**run.config["server"], "max_connections": 350}} == twin, run.name


def test_the_first_write_set_runs_persistent_runs_again_unchanged():
    persistent = {run.name: run.config for run in load_spec(REPO / "experiments" / "overload-control" / "persistent.toml").runs}
    again = load_spec(REPO / "experiments" / "overload-control" / "first-write.toml").runs
    assert {run.name for run in again} == {"fair-codel-rho=1.2", "fair-gradient-rho=1.2", "fair-delay-rho=1.2",
                                           "srpt-codel-rho=1.2"}
    assert all(run.config == persistent[run.name] for run in again)


def test_an_isolating_set_is_set_beside_its_twins(tmp_path):
    published = tmp_path / "published"
    capped = tmp_path / "results" / "overload-control-persistent"
    result_dir(capped, "fair-size-rho=1.2")
    (capped / "spec.toml").write_text("")
    uncapped = tmp_path / "results" / "overload-control-uncapped"
    directory = result_dir(uncapped, "fair-size-uncapped-rho=1.2")
    (directory / "summary.json").write_text(json.dumps({"syn_drops": 0}))  # what the cap made
    (uncapped / "spec.toml").write_text("")
    publish(uncapped, published)
    assert "are not published yet" in doc.build(published, tmp_path / "doc.md")
    publish(capped, published)
    text = doc.build(published, tmp_path / "doc.md")
    assert "Each run beside its twin in `overload-control-persistent`" in text
    # refused %, error responses %, SYN drops (this run's 0 beside the twin's 7), unread wait, handshakes ...
    assert "| fair-size-uncapped-rho=1.2 / fair-size-rho=1.2 | 40 / 40 | 20 / 20 | 0 / 7 | 2.25 / 2.25 | 25.1 / 25.1 | 2 / 2 |" in text
    assert "the same but for this set's one change" in text
    # A set that runs its twins again unchanged is set beside them under the same name.
    again = tmp_path / "results" / "overload-control-first-write"
    result_dir(again, "fair-size-rho=1.2")
    (again / "spec.toml").write_text("")
    publish(again, published)
    text = doc.build(published, tmp_path / "doc.md")
    assert "the same run again, in another sitting" in text
    assert "| fair-size-rho=1.2 / fair-size-rho=1.2 | 40 / 40 | 20 / 20 | 7 / 7 |" in text


def test_the_model_ends_requests_as_the_testbed_run_does():
    requests = pd.DataFrame({"scheduled_s": [0.0, 1.0, 2.0, 10.0], "completed": [True, True, True, False],
                             "response_s": [5.0, 70.0, 9.0, np.nan], "last_byte_s": [5.0, 71.0, 11.0, np.nan],
                             "outcome": ["ok", "ok", "ok", "refused"]})
    # Timeout 60 s; the run stops 0 s after its last request (at 10 s).
    out = as_the_testbed_ends(requests, timeout_s=60.0, drain_s=0.0)
    assert list(out["outcome"]) == ["ok", "timeout", "interrupted", "refused"]
    assert list(out["completed"]) == [True, False, False, False]
    assert out["response_s"].isna().tolist() == [False, True, True, True]
    # With 1 s of drain the third completes in time.
    assert list(as_the_testbed_ends(requests, 60.0, 1.0)["outcome"]) == ["ok", "timeout", "ok", "refused"]


def test_the_models_first_write_wait_counts_what_the_server_would_have_written():
    # As the server's histogram: every request not refused whose first byte was written
    # before the run stopped (10 s after the last request), complete or not.
    requests = pd.DataFrame({"scheduled_s": [0.0, 1.0, 2.0, 3.0], "sent_s": [0.0, 1.0, 2.0, 3.0],
                             "first_byte_s": [0.5, 2.0, 25.0, 3.1], "outcome": ["ok", "timeout", "ok", "refused"]})
    assert first_write_wait_mean(requests, drain_s=10.0) == pytest.approx((0.5 + 1.0) / 2)
    assert first_write_wait_mean(requests, drain_s=30.0) == pytest.approx((0.5 + 1.0 + 23.0) / 3)


def test_the_models_write_slot_measures_are_cut_where_the_run_stops():
    # Per simulated second: seconds with every write slot held, blocked writes unblocked and
    # the seconds they held their slots. The run stopped at 2.5 s: two whole seconds and half
    # of the third count, the fourth (after the stop) does not.
    slots = {"full_s": [0.2, 1.0, 0.6, 1.0], "unblocked": [2, 4, 2, 10], "blocked_s": [0.1, 0.4, 0.2, 9.0]}
    measures = slot_measures(slots, 2.5)
    assert measures["slots_full_share"] == pytest.approx((0.2 + 1.0 + 0.3) / 2.5)
    assert measures["write_blocked_mean"] == pytest.approx((0.1 + 0.4 + 0.1) / (2 + 4 + 1))
    assert slot_measures(slots, 10.0)["slots_full_share"] == pytest.approx(2.8 / 10.0), "past the simulated seconds: nothing more"
    assert all(math.isnan(v) for v in slot_measures(None, 2.5).values()), "no write-slot limit: not measured"


def test_the_doc_says_why_load_steps_did_not_settle():
    """The settle column's "never" is told apart: per run, the steps up not settled and the
    steps down not recovered, summed over repetitions, with each reason; runs whose steps all
    settled, and repetitions that do not record why, add no row."""
    from sojourn.overload.doc import unsettled_table

    runs = {"dwfs-profile=W4": [{"settle_miss": ["", "swing", "swing"], "recover_miss": ["", ""]},
                                {"settle_miss": ["drift", "", ""], "recover_miss": ["late", ""]}],
            "fair-profile=W4": [{"settle_miss": ["", ""], "recover_miss": [""]}],
            "srpt-profile=W4": [{}]}
    lines = unsettled_table(runs)
    assert lines[4:] == ["| dwfs-profile=W4 | 3 of 6 (still climbing or falling 1, never stayed in the band 2) | "
                         "1 of 4 (only in the last quarter 1) |", ""]
    assert unsettled_table({name: reps for name, reps in runs.items() if name != "dwfs-profile=W4"}) == []
