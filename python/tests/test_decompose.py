"""The response-time decomposition against the ideal schedule, on hand-checked records."""

from __future__ import annotations

import pandas as pd
import pytest

from sojourn.analysis.decompose import PHASES, against_ideal, phases


def requests() -> pd.DataFrame:
    # Request 0: new connection; 1: reused connection (no handshake); 2: failed (left out).
    return pd.DataFrame({
        "request_id": [0, 1, 2], "size": [500, 100_000, 700], "completed": [True, True, False],
        "scheduled_s": [0.0, 1.0, 2.0], "connect_start_s": [0.1, float("nan"), 2.0],
        "connect_end_s": [0.2, float("nan"), float("nan")], "sent_s": [0.2, 1.05, float("nan")],
        "first_byte_s": [0.5, 1.25, float("nan")], "last_byte_s": [0.6, 2.05, float("nan")],
        "response_s": [0.6, 1.05, float("nan")]})


def test_phases_add_up_to_the_response_time():
    p = phases(requests())
    assert list(p["request_id"]) == [0, 1]
    assert p.loc[0, list(PHASES)].tolist() == pytest.approx([0.1, 0.1, 0.3, 0.1])
    assert p.loc[1, list(PHASES)].tolist() == pytest.approx([0.05, 0.0, 0.2, 0.8])
    assert (p[list(PHASES)].sum(axis=1) - p["response_s"]).abs().max() < 1e-12


def test_against_ideal_per_size_bin():
    ideal = pd.DataFrame({"request_id": [0, 1, 0, 1], "policy": ["srpt", "srpt", "ps", "ps"],
                          "response_s": [0.2, 0.85, 0.3, 0.9]})
    table = against_ideal(requests(), ideal).set_index("size_bin")
    assert list(table.index) == ["<1K", ">=50K", "all"]
    small = table.loc["<1K"]
    assert small["ratio"] == pytest.approx(3.0)
    # Excess 0.4: wait 0.1, handshake 0.1, first byte 0.3, transfer 0.1 - 0.2 (the ideal's whole time).
    assert [small[f"{p}_excess_share"] for p in PHASES] == pytest.approx([0.25, 0.25, 0.75, -0.25])
    assert table.loc["all", "requests"] == 2
    with pytest.raises(ValueError, match="no completed request has an ideal 'las'"):
        against_ideal(requests(), ideal, policy="las")
