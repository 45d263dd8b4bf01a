"""What the fault campaign measured (``benchmarks/fault_campaign.py``): pure functions of its records.

* **Overlap**: the jobs' own records (``benchmarks/fault_job.py``: one file per process) give each process of a
  job an interval [first t, last t]; two processes of one job (two attempts, or two processes of one attempt)
  alive at the same time for longer than ``tolerance`` (the record period) are concurrent attempts.
* **Lost**: a submission acknowledged with an id that the final job list lacks, or that never reached a final
  state.
* **Duplicated**: an idempotency key that produced two job ids, or a job Horus finished twice (jobs whose
  records show two processes that ran to completion are counted apart: at-least-once execution).
* **5xx**: every response >= 500 a campaign client got, per endpoint.
* **Lease misses caused by an upload**: an agent the server declared lost while an upload was in flight, that
  was neither stopped nor killed then and with no server restart under way.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

FINAL_STATES = ("finished", "failed", "cancelled")
LOST_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) \S+ WARNING agent (\S+) lost \((.*)\)")
ERROR_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} \S+ ERROR (.*)$")
EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit)\b")

Window = tuple[float, float]


@dataclass(frozen=True)
class Interval:
    """One process of one job, as its own records saw it."""

    job: str
    attempt: int
    pid: int
    start: float
    end: float
    agent: str = ""
    completed: bool = False  # it wrote ``end`` with reason ``done`` (ran its whole length)


# ---- the jobs' records -------------------------------------------------------------------------------------
def read_records(folder: Path) -> list[dict[str, Any]]:
    """Every record line under ``folder`` (``*.jsonl``); a line cut off by ``kill -9`` is skipped."""
    lines: list[dict[str, Any]] = []
    for path in sorted(folder.glob("*.jsonl")):
        for text in path.read_text(errors="replace").splitlines():
            try:
                line = json.loads(text)
            except ValueError:
                continue
            if isinstance(line, dict) and {"job", "attempt", "pid", "t"} <= line.keys():
                lines.append(line)
    return lines


def intervals(records: Iterable[Mapping[str, Any]]) -> dict[str, list[Interval]]:
    """Per job, one interval per (attempt, pid), sorted by start."""
    spans: dict[tuple[str, int, int], dict[str, Any]] = {}
    for r in records:
        key = (str(r["job"]), int(r["attempt"]), int(r["pid"]))
        t = float(r["t"])
        span = spans.setdefault(key, {"start": t, "end": t, "agent": str(r.get("agent", "")), "completed": False})
        span["start"], span["end"] = min(span["start"], t), max(span["end"], t)
        if r.get("event") == "end" and r.get("reason") == "done":
            span["completed"] = True
    by_job: dict[str, list[Interval]] = defaultdict(list)
    for (job, attempt, pid), s in spans.items():
        by_job[job].append(Interval(job, attempt, pid, s["start"], s["end"], s["agent"], s["completed"]))
    return {job: sorted(ivs, key=lambda iv: (iv.start, iv.attempt, iv.pid)) for job, ivs in by_job.items()}


def union_length(windows: Iterable[Window]) -> float:
    """Length of the union of closed intervals."""
    total, current = 0.0, None
    for start, end in sorted(windows):
        if current is None or start > current[1]:
            if current is not None:
                total += current[1] - current[0]
            current = [start, end]
        else:
            current[1] = max(current[1], end)
    if current is not None:
        total += current[1] - current[0]
    return total


def job_overlaps(ivs: Sequence[Interval], tolerance: float) -> list[dict[str, Any]]:
    """Pairs of processes of one job alive together for longer than ``tolerance`` seconds."""
    found = []
    for i, a in enumerate(ivs):
        for b in ivs[i + 1:]:
            together = min(a.end, b.end) - max(a.start, b.start)
            if together > tolerance:
                found.append({"attempts": [a.attempt, b.attempt], "pids": [a.pid, b.pid], "agents": [a.agent, b.agent],
                              "from": max(a.start, b.start), "to": min(a.end, b.end), "seconds": together,
                              "same_attempt": a.attempt == b.attempt})
    return found


def overlap_summary(by_job: Mapping[str, Sequence[Interval]], tolerance: float, examples: int = 5) -> dict[str, Any]:
    """Jobs with concurrent processes, total seconds during which a job had two or more (union per job), the
    pairs (across attempts / within one attempt), and the longest examples."""
    per_job: dict[str, float] = {}
    pairs: list[dict[str, Any]] = []
    for job, ivs in by_job.items():
        found = job_overlaps(ivs, tolerance)
        if found:
            per_job[job] = union_length((p["from"], p["to"]) for p in found)
            pairs += [{"job": job, **p} for p in found]
    pairs.sort(key=lambda p: -p["seconds"])
    return {"jobs_with_overlap": len(per_job), "overlap_s": round(sum(per_job.values()), 3),
            "max_job_overlap_s": round(max(per_job.values(), default=0.0), 3),
            "pairs_across_attempts": sum(not p["same_attempt"] for p in pairs),
            "pairs_within_an_attempt": sum(p["same_attempt"] for p in pairs),
            "tolerance_s": tolerance, "longest": pairs[:examples]}


def completed_runs(by_job: Mapping[str, Sequence[Interval]]) -> dict[str, int]:
    """Per job, how many of its processes ran to completion (only jobs with at least one)."""
    counts = {job: sum(iv.completed for iv in ivs) for job, ivs in by_job.items()}
    return {job: n for job, n in counts.items() if n}


# ---- the service's view ------------------------------------------------------------------------------------
def lost_jobs(acked: Mapping[str, int], final: Mapping[int, str]) -> dict[str, list[int]]:
    """Acknowledged job ids (``acked``: idempotency key -> id) missing from the final list (``final``: id ->
    state), and those present but not in a final state."""
    missing = sorted({i for i in acked.values() if i not in final})
    unfinished = sorted({i for i in acked.values() if i in final and final[i] not in FINAL_STATES})
    return {"missing": missing, "not_final": unfinished}


def duplicates(ids_per_key: Mapping[str, Iterable[int]], finished_events: Mapping[int, int],
               completions: Mapping[str, int]) -> dict[str, Any]:
    """``ids_per_key``: every id seen for an idempotency key (answers and the final list); ``finished_events``:
    job id -> its ``finished`` events; ``completions``: job id -> its processes that ran to completion (records).
    ``jobs``: distinct duplicated jobs (the extra ids of a key, and jobs Horus finished twice).
    ``completed_twice_in_records`` (not in ``jobs``): jobs whose command ran to its end twice, as at-least-once
    execution does when an agent is cut off while its job ends and the job is run again."""
    several = {key: sorted(set(ids)) for key, ids in ids_per_key.items() if len(set(ids)) > 1}
    finished_twice = sorted(j for j, n in finished_events.items() if n > 1)
    extra_ids = {i for ids in several.values() for i in ids[1:]}
    return {"jobs": len(extra_ids | set(finished_twice)), "keys_with_several_ids": several,
            "finished_twice_by_horus": finished_twice,
            "completed_twice_in_records": sorted(int(j) for j, n in completions.items() if n > 1 and str(j).isdigit())}


def endpoint(method: str, path: str) -> str:
    """``POST /v1/jobs/{id}/cancel``-style name of a request (ids and agent names replaced)."""
    path = path.split("?", 1)[0]
    path = re.sub(r"^/v1/agents/[^/]+/", "/v1/agents/{name}/", path)
    return f"{method.upper()} {re.sub(r'/[0-9]+(?=/|$)', '/{id}', path)}"


def count_5xx(responses: Iterable[tuple[str, str, int | None]]) -> dict[str, int]:
    """5xx responses per endpoint from (method, path, status or None for a transport error)."""
    counts = Counter(endpoint(m, p) for m, p, status in responses if status is not None and status >= 500)
    return dict(sorted(counts.items()))


# ---- lost agents and what was going on then ------------------------------------------------------------------
def parse_agent_losses(log_text: str) -> list[tuple[float, str, str]]:
    """(time, agent, reason) of every "agent X lost (...)" warning in a ``horus serve`` log (local time)."""
    out = []
    for line in log_text.splitlines():
        match = LOST_LINE.match(line)
        if match:
            when = datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
            out.append((when, match.group(2), match.group(3)))
    return out


def _inside(t: float, windows: Iterable[Window]) -> bool:
    return any(start <= t <= end for start, end in windows)


def classify_losses(losses: Iterable[tuple[float, str, str]], disrupted: Mapping[str, Sequence[Window]],
                    server_down: Sequence[Window], uploads: Sequence[Window]) -> dict[str, list[dict[str, Any]]]:
    """Split agent losses into those explained by a fault of that agent (stopped or killed: ``disrupted``) or a
    server restart (``server_down``), and the rest; of the rest, those during an upload (``uploads``) are
    lease misses caused by an upload. Windows are closed (start, end) times, slack included by the caller."""
    out: dict[str, list[dict[str, Any]]] = {"explained": [], "unexplained": [], "during_upload": []}
    for t, agent, reason in losses:
        item = {"t": t, "agent": agent, "reason": reason}
        if _inside(t, disrupted.get(agent, ())) or _inside(t, server_down):
            out["explained"].append(item)
            continue
        out["unexplained"].append(item)
        if _inside(t, uploads):
            out["during_upload"].append(item)
    return out


def log_errors(log_text: str) -> dict[str, dict[str, int]]:
    """ERROR lines of a ``horus serve`` log (by message) and the exceptions of their tracebacks (by last line)."""
    errors: Counter[str] = Counter()
    exceptions: Counter[str] = Counter()
    for line in log_text.splitlines():
        match = ERROR_LINE.match(line)
        if match:
            errors[match.group(1)] += 1
        elif EXCEPTION_LINE.match(line):
            exceptions[line[:200]] += 1
    return {"errors": dict(errors), "exceptions": dict(exceptions)}


def events_out_of_order(events: Mapping[int, list[Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """Jobs whose event history is not a possible one: times going backwards, or an attempt's ``started`` before
    the ``requeued:*`` that ended the previous attempt (the audit once saw ``requeued:lost`` stamped after the next
    attempt's start)."""
    bad = []
    for job_id, evs in sorted(events.items()):
        times = [float(e["time"]) for e in evs]
        if any(b < a for a, b in zip(times, times[1:])):
            bad.append({"job": job_id, "why": "times go backwards", "kinds": [e["kind"] for e in evs]})
            continue
        ended: set[int] = set()
        for e in evs:
            attempt = int(e.get("attempt") or 0)
            if e["kind"] == "started" and attempt > 1 and attempt - 1 not in ended:
                bad.append({"job": job_id, "why": f"attempt {attempt} started before attempt {attempt - 1} ended",
                            "kinds": [x["kind"] for x in evs]})
                break
            if e["kind"].startswith("requeued:") or e["kind"] in ("finished", "failed", "cancelled"):
                ended.add(attempt)
    return bad
