"""000 §6: the trends of the transient-overload study, on a short W1 and W7."""

from __future__ import annotations

from sojourn.theory import figures


def test_transient_trends_of_000(tmp_path):
    table = figures.transient(tmp_path, ("W1", "W7"), duration_s=300.0).set_index("workload")
    for name, row in table.iterrows():
        # Far fewer jobs build up under SRPT, and mean response time is far lower (000 §5.2: 2-8x).
        assert row["peak_in_system_ps"] > 2 * row["peak_in_system_srpt"], name
        assert row["mean_response_ratio_ps_over_srpt"] > 2, name
        # The server recuperates faster under SRPT once load drops (000 §6.3).
        assert row["mean_recovery_s_ps"] > row["mean_recovery_s_srpt"], name
        # The largest 1% of jobs are not hurt by more than 10% (000 §5.2, "Performance of large requests").
        assert row["largest_1pct_ratio_srpt_over_ps"] < 1.1, name
    assert (tmp_path / "transient.png").stat().st_size > 0
    assert (tmp_path / "transient.csv").exists()
