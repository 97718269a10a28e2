"""Trace statistics (000 §2.1's list) and the CCDF figure (000 Fig. 1)."""

import numpy as np
import pandas as pd
import pytest

from sojourn.workloads import models, stats


def trace_of(sizes, duration=10.0):
    n = len(sizes)
    return pd.DataFrame(
        {
            "arrival_s": np.linspace(0, duration, n),
            "client": np.zeros(n, dtype=np.uint32),
            "path": [f"/o/{i % 7}" for i in range(n)],
            "size": np.asarray(sizes, dtype=np.uint64),
        }
    )


def test_describe_small_hand_made_trace():
    sizes = [100] * 97 + [10_000] * 3  # the largest 3 % carry 300 of 397 hundred-bytes
    described = stats.describe(trace_of(sizes), link_bps=8000)
    assert (described.requests, described.objects, described.min, described.max) == (100, 7, 100, 10_000)
    assert described.mean == pytest.approx(397.0)
    assert described.median == 100 and described.p90 == 100
    assert described.share_top_3pct == pytest.approx(30_000 / 39_700)
    assert described.share_top_1pct == pytest.approx(10_000 / 39_700)
    # 39700 bytes over 10 s on 8000 bit/s: rho = 39700 * 8 / 80000.
    assert described.offered_rho == pytest.approx(3.97)


def test_tail_alpha_recovers_a_pareto_tail():
    for alpha in (0.9, 1.2, 1.6):
        sizes = models.sample(models.bounded_pareto(k=1000, p=1e12, alpha=alpha), 400_000, np.random.default_rng(4))
        assert stats.tail_alpha(np.sort(sizes)) == pytest.approx(alpha, rel=0.08)


def test_describe_without_link_and_empty():
    described = stats.describe(trace_of([5, 6, 7]))
    assert described.offered_rho is None
    assert any(name.startswith("tail alpha") for name, _ in described.rows())
    with pytest.raises(ValueError, match="empty"):
        stats.describe(trace_of([]))


def test_ccdf_figure_is_a_png(tmp_path):
    trace = models.make_trace("wc98", n_requests=20_000, rate=100, seed=1)
    path = tmp_path / "ccdf.png"
    stats.plot_ccdf({"wc98": trace, "nasa": models.make_trace("nasa", n_requests=20_000, rate=100, seed=1)}, path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert path.stat().st_size > 10_000


def test_a_gap_dominating_the_duration_is_warned_about():
    trace = trace_of([100] * 20)
    assert stats.describe(trace).warnings() == []
    trace["arrival_s"] = np.concatenate([np.linspace(0, 1, 10), np.linspace(100, 101, 10)])
    described = stats.describe(trace)
    assert described.largest_gap_s == pytest.approx(99.0) and described.largest_gap_at_s == pytest.approx(1.0)
    assert "is 98% of the trace's 101.000 s" in described.warnings()[0]
