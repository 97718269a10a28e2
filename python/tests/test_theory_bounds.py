"""sojourn.theory.bounds.ideal: ideal PS and SRPT on a run's own arrivals."""

from __future__ import annotations

import pandas as pd
import pytest

from sojourn.theory.bounds import ideal, ratios, summary

# Sizes 4, 1, 2 bytes at t = 10, 11, 12 on an 8 bit/s (1 byte/s) link: worked by hand.
TRACE = pd.DataFrame({"arrival_s": [10.0, 11.0, 12.0], "client": 0, "path": "/a", "size": [4, 1, 2]})


def test_ideal_on_a_trace_by_hand(tmp_path):
    frame = ideal(TRACE, 8.0)
    ps = frame[frame.policy == "ps"].set_index("request_id")
    srpt = frame[frame.policy == "srpt"].set_index("request_id")
    assert list(ps["last_byte_s"]) == pytest.approx([17.0, 13.5, 16.5])
    assert list(srpt["last_byte_s"]) == pytest.approx([17.0, 12.0, 14.0])
    assert list(srpt["slowdown"]) == pytest.approx([1.75, 1.0, 1.0])
    assert summary(frame) == pytest.approx({"ps": 14 / 3, "srpt": 10 / 3})
    path = tmp_path / "trace.csv"
    TRACE.to_csv(path, index=False)
    assert ideal(path, 8.0).equals(frame)


def test_ideal_on_records_keeps_ids_and_uses_final_requests():
    # Request 7 was retried: both attempts share the first scheduled time; unordered rows.
    records = pd.DataFrame({
        "request_id": [9, 7, 7, 8], "attempt": [0, 0, 1, 0], "final": [1, 0, 1, 1],
        "scheduled_s": [12.0, 10.0, 10.0, 11.0], "expected_size": [2.0, 4.0, 4.0, None], "bytes": [2, 1, 4, 1],
    })
    frame = ideal(records, 8.0, policies=("srpt",)).set_index("request_id")
    assert sorted(frame.index) == [7, 8, 9]
    assert frame.loc[8, "size"] == 1.0  # bytes where expected_size is unknown
    assert frame.loc[7, "last_byte_s"] == pytest.approx(17.0)
    assert frame.loc[9, "response_s"] == pytest.approx(2.0)


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="arrival_s"):
        ideal(pd.DataFrame({"x": [1]}), 8.0)
    with pytest.raises(ValueError, match="link_bps"):
        ideal(TRACE, 0)


def test_ratios_measured_over_ideal():
    frame = ideal(TRACE, 8.0)
    # A run twice as slow as ideal SRPT for every request; request 2 never completed.
    srpt = frame[frame.policy == "srpt"].set_index("request_id")["response_s"]
    measured = pd.DataFrame({"request_id": [0, 1, 2], "response_s": [2 * srpt[0], 2 * srpt[1], float("nan")]})
    table = ratios(measured, frame).set_index("policy")
    assert table.loc["srpt", "requests"] == 2
    assert table.loc["srpt", "mean_ratio"] == pytest.approx(2.0)
    assert table.loc["srpt", "ratio_of_means"] == pytest.approx(2.0)
    assert table.loc["ps", "ideal_mean_response_s"] == pytest.approx((7.0 + 2.5) / 2)
