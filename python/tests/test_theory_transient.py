"""000 §6: the trends of the transient-overload study, on a short W1 and W7."""

from __future__ import annotations

import json
import subprocess

import pytest

from sojourn.engine import engine_path
from sojourn.theory import figures
from sojourn.workloads.shaping import PROFILES


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_simulator_and_workloads_share_table_1(name):
    """The simulator's W1-W10 (Rust) are the workloads' (Python): same periods and loads, low first."""
    out = subprocess.run([str(engine_path()), "sim", "--sizes", "exp", "--mean", "1000", "--profile", name,
                          "--jobs", "1", "--link", "1Mbit", "--size-bins", "0"], check=True, capture_output=True, text=True)
    phases = json.loads(out.stdout)["profile"]["phases"]
    profile = PROFILES[name]
    assert phases == [{"duration_s": profile.low_s, "rho": profile.low_rho},
                      {"duration_s": profile.high_s, "rho": profile.high_rho}]


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
