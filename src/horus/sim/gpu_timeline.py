"""Who held which GPU when: the data behind the report's GPU timeline (``SimResult.placements``).

Pure functions over the placements frame (``horus.sim.metrics.PLACEMENT_COLUMNS``); the report draws them.
Times in the payload are hours since the first submission, so every policy of a run shares one axis.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

MAX_BARS = 3000  # residencies drawn per policy; past that the view stops at the first one left out
OUTCOME_CODES = {"completed": 0, "preempted": 1, "running": 2}  # bar end as drawn (oom rows become marks)
ColocInterval = tuple[int, float, float, int]  # (gpu, start, end, residents >= 2)


def colocated_intervals(placements: pd.DataFrame) -> list[ColocInterval]:
    """Every maximal interval during which a GPU held two or more jobs, with how many, sorted by GPU then time.

    Out-of-memory rows (zero length) and zero-length residencies share nothing and are ignored."""
    stays = placements[(placements["outcome"] != "oom") & (placements["end"] > placements["start"])]
    out: list[ColocInterval] = []
    if not _ever_shared(stays):
        return out
    for gpu, rows in stays.groupby("gpu", sort=True):
        # ends before starts at the same instant: a job leaving as another arrives never overlapped it
        events = sorted([(float(t), -1) for t in rows["end"]] + [(float(t), 1) for t in rows["start"]])
        count, since = 0, 0.0
        for t, step in events:
            if count >= 2 and t > since:
                if out and out[-1][0] == gpu and out[-1][2] == since and out[-1][3] == count:
                    out[-1] = (out[-1][0], out[-1][1], t, count)
                else:
                    out.append((int(gpu), since, t, count))
            count += step
            since = t
    return out


def _ever_shared(stays: pd.DataFrame) -> bool:
    """Whether some GPU ever holds two of ``stays`` at once (the walk of ``colocated_intervals`` finds nothing
    otherwise): all GPUs' start (+1) and end (-1) events in (GPU, time) order, ends first at equal times, summed.
    Each GPU's events sum to zero, so the running sum is each GPU's own count."""
    n = len(stays)
    if n < 2:
        return False
    gpu = np.concatenate([stays["gpu"].to_numpy(np.int64)] * 2)
    time = np.concatenate([stays["end"].to_numpy(float), stays["start"].to_numpy(float)])
    step = np.repeat(np.array([-1, 1], dtype=np.int64), n)
    order = np.lexsort((step, time, gpu))
    return bool(np.cumsum(step[order]).max() >= 2)


def _hours(t: float, origin: float) -> float:
    return round((t - origin) / 3600.0, 4)


def assign_lanes(bars: list[list[Any]]) -> dict[int, int]:
    """Append to each bar ``[gpu, start, end, ...]`` its lane on its GPU (the lowest one free at its start), so
    jobs sharing a GPU are drawn one above the other; returns the number of lanes each GPU needed."""
    free_at: dict[int, list[float]] = {}  # per GPU, when each lane frees
    for bar in sorted(bars, key=lambda b: (b[1], b[2])):
        lanes = free_at.setdefault(bar[0], [])
        lane = next((i for i, t in enumerate(lanes) if t <= bar[1]), len(lanes))
        if lane == len(lanes):
            lanes.append(bar[2])
        else:
            lanes[lane] = bar[2]
        bar.append(lane)
    return {gpu: len(lanes) for gpu, lanes in free_at.items()}


def timeline_payload(placements: pd.DataFrame, origin: float, job_index: dict[str, int],
                     max_bars: int = MAX_BARS) -> dict[str, Any]:
    """Compact, JSON-ready GPU timeline of one run.

    ``bars``: ``[gpu, start_h, end_h, job index, outcome code, lane]`` (``lanes``: lanes per GPU, ``assign_lanes``);
    ``coloc``: ``[gpu, start_h, end_h, residents]``; ``marks``: ``[gpu, time_h, kind]`` with kind ``oom`` (a start
    that failed out of memory) or ``preempt`` (the policy stopped the job there: unpack, migrate or priority).
    ``job_index`` maps job ids to indices into the page's shared job list (extended here for ids it lacks). Past
    ``max_bars`` residencies the view is cut at the start of the first one left out (``until_h``); ``total`` says
    how many there were."""
    stays = placements[placements["outcome"] != "oom"]
    total = len(stays)
    until = float("inf")
    if total > max_bars:
        until = float(stays["start"].iloc[max_bars])  # sorted by start: everything drawn began before this
        stays = stays.iloc[:max_bars]
    for job_id in placements["job_id"].tolist():
        job_index.setdefault(str(job_id), len(job_index))
    bars = [[int(g), _hours(s, origin), _hours(min(e, until), origin), job_index[str(j)], OUTCOME_CODES.get(o, 0)]
            for j, g, s, e, o in stays[["job_id", "gpu", "start", "end", "outcome"]].itertuples(index=False)]
    lanes = assign_lanes(bars)
    coloc = [[g, _hours(s, origin), _hours(min(e, until), origin), n]
             for g, s, e, n in colocated_intervals(placements) if s < until]
    marks: list[list[Any]] = [[int(g), _hours(s, origin), "oom"]
                              for g, s in placements.loc[placements["outcome"] == "oom", ["gpu", "start"]]
                              .itertuples(index=False) if s < until]
    marks += [[b[0], b[2], "preempt"] for b in bars if b[4] == OUTCOME_CODES["preempted"]]
    end = float(placements["end"].max()) if len(placements) else origin
    return {"bars": bars, "lanes": {str(g): n for g, n in sorted(lanes.items())}, "coloc": coloc, "marks": marks,
            "shown": len(bars), "total": total, "until_h": _hours(min(end, until), origin), "cut": total > max_bars}


def gpu_labels(cluster: Any) -> list[str]:
    """``"<node name>/<local index>"`` per GPU of a ``Cluster``, in global GPU order."""
    return [f"{cluster.nodes[g.node].name}/{g.local}" for g in cluster.gpus]
