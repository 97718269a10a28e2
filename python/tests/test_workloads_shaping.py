"""Load shaping: W1-W10 of 000 Table 1 put each period's offered rho within 5 % of its
target; persistent load, time compression and custom profiles."""

from collections import Counter

import numpy as np
import pandas as pd
import pytest

from sojourn.workloads import io, models, shaping

LINK = 10e6  # the 10 Mbit/s bottleneck of 000 §3


@pytest.fixture(scope="module")
def wc98_trace():
    # Enough bytes for several cycles of every profile at 10 Mbit/s.
    return models.make_trace("wc98", n_requests=300_000, rho=1.0, link_bps=LINK, seed=11)


# 000 Table 1, read row by row: low-load seconds, overload seconds, low rho, overload rho, average.
TABLE_1 = {
    "W1": ("alternating", 25, 25, 0.2, 1.2, 0.7),
    "W2": ("alternating", 10, 10, 0.2, 1.2, 0.7),
    "W3": ("alternating", 50, 50, 0.2, 1.6, 0.9),
    "W4": ("alternating", 25, 25, 0.4, 1.4, 0.9),
    "W5": ("alternating", 10, 10, 0.4, 1.4, 0.9),
    "W6": ("alternating", 40, 40, 0.1, 1.7, 0.9),
    "W7": ("intermittent", 63, 6, 0.4, 5, 0.8),
    "W8": ("intermittent", 63, 10, 0.45, 3, 0.8),
    "W9": ("intermittent", 20, 3, 0.735, 2, 0.9),
    "W10": ("intermittent", 13.3, 2, 0.735, 2, 0.9),
}


@pytest.mark.parametrize("name", sorted(TABLE_1))
def test_profiles_are_table_1(name):
    kind, low_s, high_s, low_rho, high_rho, average = TABLE_1[name]
    profile = shaping.PROFILES[name]
    assert (profile.kind, profile.low_s, profile.high_s, profile.low_rho, profile.high_rho) == (kind, low_s, high_s, low_rho, high_rho)
    assert profile.mean_rho == pytest.approx(average, abs=0.005)


@pytest.mark.parametrize("name", sorted(TABLE_1))
def test_every_period_within_5_percent(wc98_trace, name):
    shaped, periods = shaping.shape(wc98_trace, LINK, profile=name)
    assert len(periods) >= 4  # at least two whole cycles
    error = periods["achieved_rho"] / periods["target_rho"] - 1
    assert error.abs().max() < 0.05, periods[error.abs() >= 0.05]
    # The table agrees with the shaped trace itself.
    bins = np.searchsorted(periods["end_s"].to_numpy(), shaped["arrival_s"].to_numpy(), side="right")
    offered = np.bincount(bins, weights=shaped["size"].to_numpy(float), minlength=len(periods))[: len(periods)]
    measured = offered * 8 / (LINK * (periods["end_s"] - periods["start_s"]).to_numpy())
    np.testing.assert_allclose(measured, periods["achieved_rho"], rtol=1e-9)
    kind, low_s, high_s, low_rho, high_rho, _ = TABLE_1[name]
    assert list(periods["phase"][:2]) == ["low", "high"]
    assert periods["end_s"].iloc[1] == pytest.approx(low_s + high_s)
    io.validate_trace(shaped)


def test_shaping_keeps_the_requests(wc98_trace):
    shaped, periods = shaping.shape(wc98_trace, LINK, profile="W4")
    used = int(periods["requests"].sum())
    assert len(shaped) == used
    # Only local reordering: the shaped requests are the trace's first `used` requests
    # give or take the refill window at the last boundary.
    window = shaping.REFILL_WINDOW
    shaped_paths = Counter(shaped["path"])
    assert not Counter(wc98_trace["path"].iloc[: used - window]) - shaped_paths
    assert not shaped_paths - Counter(wc98_trace["path"].iloc[: used + window])
    assert shaped["size"].sum() == pytest.approx(periods["bytes"].sum())


def test_time_compression_keeps_each_period_rho(wc98_trace):
    shaped, periods = shaping.shape(wc98_trace, LINK, profile="W1", time_compression=5)
    assert periods["end_s"].iloc[1] == pytest.approx(10.0)  # (25 + 25) / 5
    error = periods["achieved_rho"] / periods["target_rho"] - 1
    assert error.abs().max() < 0.05


def test_persistent_rho(wc98_trace):
    shaped, periods = shaping.shape(wc98_trace, LINK, rho=1.4)
    assert len(periods) == 1 and periods["phase"][0] == "persistent"
    assert len(shaped) == len(wc98_trace)
    duration = periods["end_s"][0]
    assert shaped["size"].sum() * 8 / (LINK * duration) == pytest.approx(1.4, rel=1e-3)


def test_custom_profiles_and_duration(wc98_trace):
    profile = shaping.intermittent(8, 2, 0.3, 2.5)
    shaped, periods = shaping.shape(wc98_trace, LINK, profile=profile, duration_s=45)
    assert list(periods["end_s"]) == [8, 10, 18, 20, 28, 30, 38, 40, 45]
    assert shaped["arrival_s"].max() < 45
    assert (periods["achieved_rho"] / periods["target_rho"] - 1).abs().max() < 0.05


def test_poisson_interarrivals_are_seeded(wc98_trace):
    a, _ = shaping.shape(wc98_trace, LINK, profile="W2", interarrivals="poisson", seed=3)
    b, _ = shaping.shape(wc98_trace, LINK, profile="W2", interarrivals="poisson", seed=3)
    c, _ = shaping.shape(wc98_trace, LINK, profile="W2", interarrivals="poisson", seed=4)
    pd.testing.assert_frame_equal(a, b)
    assert not np.array_equal(a["arrival_s"], c["arrival_s"])


def test_too_short_a_trace_says_how_many_bytes_are_missing(wc98_trace):
    with pytest.raises(ValueError, match="longer trace"):
        shaping.shape(wc98_trace.iloc[:1000], LINK, profile="W3", duration_s=3600)
    with pytest.raises(ValueError, match="longer trace"):
        shaping.shape(wc98_trace.iloc[:10], LINK, profile="W7")


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(), "exactly one"),
        (dict(profile="W1", rho=1.0), "exactly one"),
        (dict(profile="W11"), "accepted: W1, W2"),
        (dict(rho=1.0, time_compression=0), "time_compression"),
        (dict(rho=1.0, interarrivals="uniform"), "accepted: scaled, poisson"),
    ],
)
def test_bad_arguments(wc98_trace, kwargs, message):
    with pytest.raises(ValueError, match=message):
        shaping.shape(wc98_trace, LINK, **kwargs)


def test_requests_for_sizes_a_trace_for_the_cycles():
    profile = shaping.PROFILES["W1"]
    n = shaping.requests_for(profile, LINK, models.wc98().mean, cycles=3, time_compression=5)
    trace = models.make_trace("wc98", n_requests=n, rate=100, seed=2)
    _, periods = shaping.shape(trace, LINK, profile=profile, time_compression=5)
    assert len(periods) >= 5
