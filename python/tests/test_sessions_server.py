"""A live session run: `sojourn-engine serve --stages` under `load sessions`
from three loopback addresses (one class each), analysed end to end. Checks
what must hold whatever the machine's speed: every class is served, FIFO never
drops (no 503), DWFS answers every request it does not serve with 503 and
counts it in the pool series."""

from __future__ import annotations

import pandas as pd
import pytest

from sojourn.analysis import sessions
from sojourn.plan import measure


@pytest.mark.parametrize("policy", ["fifo", "dwfs"])
def test_session_run_end_to_end(tmp_path, policy):
    out = measure.run_point(policy, rate=8.0, duration_s=3.0, out=tmp_path / policy)
    table, anatomy = measure.analyse_point(out)
    assert list(table["class"]) == [0, 1, 2]
    assert (table["requests"] > 0).all() and (table["sessions"] > 0).all()
    records = pd.read_csv(out / "load" / "records.csv")
    assert set(records["status"].dropna().astype(int)) <= {200, 503}
    dropped_by_server = int(anatomy["dropped"].sum())
    answered_503 = int((records["status"] == 503).sum())
    if policy == "fifo":
        assert answered_503 == 0 and dropped_by_server == 0
        assert (table["drop_rate"] == 0).all()
    else:
        # Every drop the pool counted was answered 503 (and nothing else was).
        assert answered_503 == dropped_by_server
    assert anatomy["completed"].sum() > 0
    queues = sessions.queue_lengths(sessions.read_series(out / "series.csv"))
    assert set(queues.columns) == set(measure.STAGES)
