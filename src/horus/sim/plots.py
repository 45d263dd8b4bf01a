"""Comparison plots of several policies' runs (matplotlib, Agg backend: no display needed).

Figures are made with the object API (``Figure`` + ``FigureCanvasAgg``), not ``pyplot``: the same pictures without
importing pyplot's machinery or keeping figures in its registry."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # as before: a pyplot imported later in the process (by a user) needs no display either
import numpy as np  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from horus.sim.engine import SimResult  # noqa: E402


def _style_cycle(ax: Axes, n: int) -> None:
    """Distinct colours for up to 20 runs (tab20), dashes on every other one, so no two policies look alike."""
    from cycler import cycler

    colors = matplotlib.colormaps["tab10" if n <= 10 else "tab20"].colors
    styles = ["-", "--"] if n > 10 else ["-"]
    count = max(n, 1)
    ax.set_prop_cycle(cycler(color=[colors[i % len(colors)] for i in range(count)])
                      + cycler(linestyle=[styles[i % len(styles)] for i in range(count)]))


def _hours(seconds: np.ndarray, origin: float) -> np.ndarray:
    return (seconds - origin) / 3600.0


def _origin(results: Mapping[str, SimResult]) -> float:
    starts = [r.timeline["time"].min() for r in results.values() if not r.timeline.empty]
    return float(min(starts)) if starts else 0.0


def _subplots(figsize: tuple[float, float]) -> tuple[Figure, Axes]:
    """``pyplot.subplots(figsize=...)`` without pyplot: one Axes on an Agg-backed Figure."""
    fig = Figure(figsize=figsize)
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot()


def _timeline_plot(results: Mapping[str, SimResult], column: str, ylabel: str, path: Path,
                   title: str | None = None) -> Path:
    origin = _origin(results)
    fig, ax = _subplots((9.5, 4))
    _style_cycle(ax, len(results))
    for name, res in results.items():
        tl = res.timeline
        ax.step(_hours(tl["time"].to_numpy(), origin), tl[column].to_numpy(), where="post", label=name, lw=1)
    ax.set_xlabel("time since first submission (h)")
    ax.set_ylabel(ylabel)
    return _save(fig, ax, path, title)


def plot_util_over_time(results: Mapping[str, SimResult], path: Path, title: str | None = None) -> Path:
    return _timeline_plot(results, "gpu_util", "mean true GPU utilization", path, title)


def plot_queue_length(results: Mapping[str, SimResult], path: Path, title: str | None = None) -> Path:
    return _timeline_plot(results, "queue_len", "queued jobs", path, title)


def plot_jct_cdf(results: Mapping[str, SimResult], path: Path, title: str | None = None) -> Path:
    fig, ax = _subplots((7.5, 4))
    _style_cycle(ax, len(results))
    for name, res in results.items():
        jct = np.sort(res.jobs["jct"].dropna().to_numpy())
        if len(jct):
            ax.step(jct / 3600.0, np.arange(1, len(jct) + 1) / len(jct), where="post", label=name)
    ax.set_xscale("log")
    ax.set_xlabel("job completion time (h)")
    ax.set_ylabel("fraction of completed jobs")
    return _save(fig, ax, path, title)


def _save(fig: Figure, ax: Axes, path: Path, title: str | None = None) -> Path:
    """Title (which trace, cluster and truth), legend, grid, layout; write the PNG."""
    if title:
        ax.set_title(title, fontsize=9)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)  # outside: no curve hidden
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return path


def plot_comparison(results: Mapping[str, SimResult], outdir: Path, title: str | None = None) -> list[Path]:
    """Write util_over_time.png, jct_cdf.png and queue_length.png into ``outdir``, each titled ``title``."""
    outdir.mkdir(parents=True, exist_ok=True)
    return [plot_util_over_time(results, outdir / "util_over_time.png", title),
            plot_jct_cdf(results, outdir / "jct_cdf.png", title),
            plot_queue_length(results, outdir / "queue_length.png", title)]
