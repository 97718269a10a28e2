"""Figures of a paper's printed values beside ours, drawn from the published results into
docs/reproduction/<paper>/beside/ when the doc is written (so the comparison is seen, not
only read). A paper module describes each figure as :class:`Panel` items; this module only
draws them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from sojourn.reproduce.rows import Measure

# Paper values are drawn hollow and black; ours filled, one colour per series.
PAPER_STYLE = {"=": "o", ">": "^", ">=": "^", "<": "v", "<=": "v"}


@dataclass
class Series:
    """Ours: one measure per x (a missing value is left out)."""

    label: str
    points: dict  # x -> Measure
    color: str = "C0"


@dataclass
class Printed:
    """A value the paper prints: at x (or over [x, x_end] as a segment), with how it is
    stated (``=``, or a bound: ``>=`` drawn as an upward triangle)."""

    label: str
    x: object
    y: float
    op: str = "="
    x_end: object = None
    color: str = "C0"


@dataclass
class Band:
    """A range the paper prints for a set of points ("300 ms - 7.2 s across the workloads")."""

    label: str
    low: float
    high: float
    color: str = "C0"


@dataclass
class Panel:
    title: str
    xlabel: str
    ylabel: str
    series: list[Series] = field(default_factory=list)
    printed: list[Printed] = field(default_factory=list)
    bands: list[Band] = field(default_factory=list)
    categories: list | None = None  # categorical x (workload names), in this order
    logy: bool = False
    logx: bool = False


def _x(panel: Panel, x):
    return panel.categories.index(x) if panel.categories is not None else x


def _draw(ax, panel: Panel) -> None:
    for band in panel.bands:
        ax.axhspan(band.low, band.high, color=band.color, alpha=0.12, label=band.label)
    for series in panel.series:
        xs = sorted((x for x, m in series.points.items() if isinstance(m, Measure) and m.ok),
                    key=lambda x: _x(panel, x))
        ys = [series.points[x].value for x in xs]
        low = [y - (series.points[x].ci or (y, y))[0] for x, y in zip(xs, ys)]
        high = [(series.points[x].ci or (y, y))[1] - y for x, y in zip(xs, ys)]
        dense = len(xs) > 30  # a computed curve: a line without markers
        style = dict(color=series.color, label=series.label, markersize=0 if dense else 5)
        fmt = "s" if panel.categories else "s-"
        if any(series.points[x].ci for x in xs):
            ax.errorbar([_x(panel, x) for x in xs], ys, yerr=[low, high], fmt=fmt, capsize=3, **style)
        else:
            ax.plot([_x(panel, x) for x in xs], ys, fmt, **style)
    for mark in panel.printed:
        if mark.x_end is not None:
            ax.hlines(mark.y, _x(panel, mark.x), _x(panel, mark.x_end), colors=mark.color, linestyles="--",
                      linewidth=2, label=mark.label)
            ax.plot([_x(panel, mark.x)], [mark.y], PAPER_STYLE[mark.op], markersize=9, markerfacecolor="none",
                    markeredgecolor=mark.color, markeredgewidth=1.6)
            continue
        ax.plot([_x(panel, mark.x)], [mark.y], PAPER_STYLE[mark.op], markersize=9, markerfacecolor="none",
                markeredgecolor=mark.color, markeredgewidth=1.6, linestyle="none", label=mark.label)
    if panel.categories is not None:
        ax.set_xticks(range(len(panel.categories)), [str(c) for c in panel.categories])
    if panel.logy:
        ax.set_yscale("log")
    if panel.logx:
        ax.set_xscale("log")
    ax.set_title(panel.title, fontsize=10)
    ax.set_xlabel(panel.xlabel)
    ax.set_ylabel(panel.ylabel)
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles))
    ax.legend(unique.values(), unique.keys(), fontsize=7)


def draw(panels: list[Panel], path: Path, columns: int = 2) -> None:
    """Draws ``panels`` in a grid into ``path`` (PNG without a timestamp, so an unchanged
    result redraws the same bytes)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = (len(panels) + columns - 1) // columns
    columns = min(columns, len(panels))
    fig, axes = plt.subplots(rows, columns, figsize=(5.2 * columns, 3.8 * rows), squeeze=False)
    for ax, panel in zip(axes.flat, panels):
        _draw(ax, panel)
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90, metadata={"Software": None})
    plt.close(fig)
