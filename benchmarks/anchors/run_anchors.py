"""Horus beside the anchor simulators of the literature, on one Philly slice, in CPU seconds.

Each anchor (Tiresias, Gavel, Lucid) is run from a source checkout you obtained yourself (see
README.md beside this script; nothing is fetched here) on the same first N Philly jobs, converted
by convert.py, with a cluster of --gpus V100 GPUs in 8-GPU nodes; Horus runs ``horus simulate``
on the same slice with the comparable policy. Every run is its own child process; its CPU time is
user + sys from ``resource.getrusage(RUSAGE_CHILDREN)``, so start-up and trace reading count on
both sides. An anchor whose source (or interpreter) is absent is skipped with the reason.

    python benchmarks/anchors/run_anchors.py --max-jobs 10000 \\
        --tiresias-src /tmp/anchors_src/tiresias --gavel-src /tmp/anchors_src/gavel \\
        --lucid-src /tmp/anchors_src/lucid --python2 /path/to/python2.7 --anchor-python /tmp/anchors_venv/bin/python

Sources and interpreters may also come from HORUS_ANCHOR_{TIRESIAS,GAVEL,LUCID,BLOX}_SRC,
HORUS_ANCHOR_PYTHON2 and HORUS_ANCHOR_PYTHON. Writes benchmarks/results/anchors.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
import convert  # beside this script
from provenance import git_commit  # benchmarks/provenance.py

ROOT = HERE.parents[1]
TRACE = ROOT.parent / "shared" / "data" / "traces" / "philly" / "philly_jobs.csv"
RESULTS = ROOT / "benchmarks" / "results"
ANCHORS = ("tiresias", "gavel", "lucid", "blox")
BLOX_SKIP = ("cannot take this slice without editing its code: Blox's simulator (simulator_simple.py) draws its "
             "own workload from the raw Philly JSON job log (Poisson arrivals at --jobs-per-hour, Gavel-like drawn "
             "lengths, 1 GPU per job, jobs outside 31.6 min..166.7 h dropped) on a cluster fixed in its code "
             "(32 x 4 GPUs); README.md, 'Blox'")


@dataclass(frozen=True)
class Pair:
    """One anchor policy and the Horus policy it is set beside."""

    anchor: str
    anchor_policy: str
    horus_policy: str
    note: str


PAIRS = (
    Pair("tiresias", "fifo", "fifo-exclusive", "strict FIFO, whole GPUs, no preemption"),
    Pair("tiresias", "dlas-gpu", "tiresias", "2D-LAS on attained GPU-time (Tiresias' own; its queue thresholds "
                                             "3250/7200/18000 GPU-s vs Horus' tiresias defaults)"),
    Pair("gavel", "fifo", "fifo-exclusive", "Gavel's fifo policy, 6-minute rounds (its default)"),
    Pair("lucid", "fifo", "fifo-exclusive", "Lucid's FIFO, consolidate placement, 1-second ticks (its design)"),
    Pair("lucid", "tiresias", "tiresias", "Lucid's Tiresias baseline"),
)


def cpu_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_child(cmd: list[str], cwd: Path, timeout_s: float, env: dict[str, str] | None = None) -> dict[str, object]:
    """Run one command; CPU seconds (user + sys) of it and its children, even when stopped at the timeout."""
    before, wall0 = cpu_children(), time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout_s)
        finished = True
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)  # its own session: the child and anything it started
        out, err = proc.communicate()
        finished = False
    wall = time.perf_counter() - wall0
    return {"finished": finished, "returncode": proc.returncode, "cpu_s": round(cpu_children() - before, 3),
            "wall_s": round(wall, 3), "stdout": out, "stderr_tail": "" if finished and
            proc.returncode == 0 else err[-1500:]}


def tiresias_cmd(src: Path, work: Path, jobs: list[convert.SliceJob], policy: str, args: argparse.Namespace):
    files = convert.write_tiresias(jobs, work / "tiresias", args.gpus // 8)
    cmd = [args.python2, "run_sim.py", f"--cluster_spec={files['cluster_spec']}", "--scheme=yarn",
           f"--trace_file={files['trace']}", f"--schedule={policy}", f"--log_path={work / 'tiresias' / policy}"]
    env = {**os.environ, "PYTHONPATH": args.python2_path} if args.python2_path else None
    return cmd, src / "simulator", env


def gavel_cmd(src: Path, work: Path, jobs: list[convert.SliceJob], policy: str, args: argparse.Namespace):
    sched = src / "scheduler"
    trace = convert.write_gavel(jobs, work / "gavel" / "philly.trace", sched / "simulation_throughputs.json")
    cmd = [args.anchor_python, "scripts/drivers/simulate_scheduler_with_trace.py", "-t", str(trace), "-p", policy,
           "--throughputs_file", "simulation_throughputs.json", "-c", f"{args.gpus}:0:0",
           "--num_gpus_per_server", "8:1:1", "--seed", "0"]  # 1 GPU/server for the absent types: 0 // 0 fails
    return cmd, sched, None


def lucid_cmd(src: Path, work: Path, jobs: list[convert.SliceJob], policy: str, args: argparse.Namespace):
    convert.write_lucid(jobs, work / "lucid", args.gpus // 8)
    cmd = [args.anchor_python, str(HERE / "lucid_driver.py"), str(src), str(work / "lucid"),
           str(work / "lucid" / f"log_{policy}"), policy]
    return cmd, src, None


ADAPTERS: dict[str, tuple[str, Callable]] = {  # anchor -> (file that must exist in its checkout, command builder)
    "tiresias": ("simulator/run_sim.py", tiresias_cmd),
    "gavel": ("scheduler/scripts/drivers/simulate_scheduler_with_trace.py", gavel_cmd),
    "lucid": ("simulation/utils.py", lucid_cmd),
}


def skip_reason(anchor: str, src: Path | None, args: argparse.Namespace) -> str | None:
    if anchor == "blox":
        return BLOX_SKIP
    if src is None:
        return f"no source: pass --{anchor}-src DIR or set HORUS_ANCHOR_{anchor.upper()}_SRC"
    marker = ADAPTERS[anchor][0]
    if not (src / marker).is_file():
        return f"{src} is not a {anchor} checkout ({marker} missing)"
    if anchor == "tiresias" and not args.python2:
        return "no Python 2.7 (Tiresias' simulator is Python 2): pass --python2 or set HORUS_ANCHOR_PYTHON2"
    if anchor == "gavel" and not (src / "scheduler" / "runtime" / "rpc_stubs" / "common_pb2.py").is_file():
        return "Gavel's gRPC stubs are not built: run `make rpc_stubs` in its scheduler/ (README.md)"
    if anchor in ("gavel", "lucid") and not args.anchor_python:
        return "no interpreter with the anchor's dependencies: pass --anchor-python or set HORUS_ANCHOR_PYTHON"
    return None


def horus_run(policy: str, cluster: Path, args: argparse.Namespace, work: Path) -> dict[str, object]:
    exe = Path(sys.executable).with_name("horus")
    entry = "import sys; from horus.cli import main; sys.exit(main(sys.argv[1:]))"
    base = [str(exe)] if exe.exists() else [sys.executable, "-c", entry]
    cmd = [*base, "simulate", "--trace", str(args.trace), "--format", "philly", "--cluster", str(cluster),
           "--policy", policy, "--max-jobs", str(args.max_jobs), "--no-progress", "--json",
           "--out", str(work / "horus" / policy)]
    run = run_child(cmd, ROOT, args.timeout_s)
    if run["finished"] and run["returncode"] == 0:
        summary = json.loads(str(run["stdout"]))["policies"][policy]
        run["summary"] = {k: summary[k] for k in ("num_jobs", "jobs_completed", "mean_jct_s", "makespan_s")}
    run["command"] = ["horus", *cmd[len(base):]]
    return run


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", type=Path, default=TRACE, help="Philly CSV (philly_jobs.csv)")
    parser.add_argument("--max-jobs", type=int, default=10_000, help="first N jobs in submit order (0 = all)")
    parser.add_argument("--gpus", type=int, default=512, help="V100 GPUs, in 8-GPU nodes (default 512 = 64 nodes)")
    parser.add_argument("--timeout-s", type=float, default=600.0,
                        help="wall seconds one run may take; a run stopped there reports the CPU it had used")
    parser.add_argument("--anchors", default=",".join(ANCHORS), help="comma-separated subset of " + ", ".join(ANCHORS))
    for anchor in ANCHORS:
        parser.add_argument(f"--{anchor}-src", type=Path, default=os.environ.get(f"HORUS_ANCHOR_{anchor.upper()}_SRC"),
                            help=f"{anchor} source checkout (env HORUS_ANCHOR_{anchor.upper()}_SRC)")
    parser.add_argument("--python2", default=os.environ.get("HORUS_ANCHOR_PYTHON2") or shutil.which("python2.7"),
                        help="Python 2.7 for Tiresias (env HORUS_ANCHOR_PYTHON2)")
    parser.add_argument("--python2-path", default=os.environ.get("HORUS_ANCHOR_PYTHON2_PATH"),
                        help="PYTHONPATH for it, where its numpy is (env HORUS_ANCHOR_PYTHON2_PATH)")
    parser.add_argument("--anchor-python", default=os.environ.get("HORUS_ANCHOR_PYTHON"),
                        help="Python 3 with Gavel's and Lucid's dependencies (env HORUS_ANCHOR_PYTHON)")
    parser.add_argument("--work", type=Path, help="folder for converted traces and anchor logs (default: a temp dir)")
    parser.add_argument("--out", type=Path, default=RESULTS / "anchors.json")
    args = parser.parse_args(argv)
    if args.gpus < 8 or args.gpus % 8:
        parser.error("--gpus must be a positive multiple of 8")
    return args


def anchor_commit(src: Path | None) -> str | None:
    """The anchor checkout's commit: from git, else from an ANCHOR_COMMIT file you put there (README)."""
    if src is None:
        return None
    note = src / "ANCHOR_COMMIT"
    if note.is_file():
        return note.read_text().strip()
    done = subprocess.run(["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True, text=True, check=False)
    return done.stdout.strip() if done.returncode == 0 else "unknown"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not args.trace.exists():
        print(f"SKIP: Philly trace not found at {args.trace}")
        return 0
    chosen = [a.strip() for a in args.anchors.split(",") if a.strip()]
    work = args.work or Path(tempfile.mkdtemp(prefix="horus_anchors_"))
    work.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()
    t0 = time.process_time()
    jobs = convert.load_slice(args.trace, args.max_jobs)
    convert_cpu_s = round(time.process_time() - t0, 3)  # reading the slice through horus.traces, not counted above
    cluster = work / "cluster.yaml"
    cluster.write_text(f"inter_node_gbps: 12.5\nnodes:\n  - {{name: v100, count: {args.gpus // 8}, gpu_type: V100, "
                       f"gpus: 8, intra_link: nvlink}}\n")
    srcs = {a: getattr(args, f"{a}_src") for a in ANCHORS}
    skipped = {a: reason for a in chosen if (reason := skip_reason(a, srcs[a], args))}
    for anchor, reason in skipped.items():
        print(f"SKIP {anchor}: {reason}", flush=True)
    horus: dict[str, dict[str, object]] = {}
    rows = []
    for pair in PAIRS:
        if pair.anchor not in chosen or pair.anchor in skipped:
            continue
        if pair.horus_policy not in horus:
            horus[pair.horus_policy] = horus_run(pair.horus_policy, cluster, args, work)
        cmd, cwd, env = ADAPTERS[pair.anchor][1](srcs[pair.anchor].resolve(), work, jobs, pair.anchor_policy, args)
        run = run_child(cmd, cwd, args.timeout_s, env)
        h = horus[pair.horus_policy]
        ratio = round(float(run["cpu_s"]) / float(h["cpu_s"]), 2) if h["cpu_s"] else None
        row = {"anchor": pair.anchor, "anchor_policy": pair.anchor_policy, "horus_policy": pair.horus_policy,
               "note": pair.note, "anchor_cpu_s": run["cpu_s"], "anchor_wall_s": run["wall_s"],
               "anchor_finished": run["finished"], "anchor_returncode": run["returncode"],
               "horus_cpu_s": h["cpu_s"], "horus_wall_s": h["wall_s"], "horus_finished": h["finished"],
               "ratio_anchor_over_horus": ratio, "ratio_is_lower_bound": not run["finished"],
               "anchor_command": cmd, "anchor_cwd": str(cwd), "anchor_stdout_tail": str(run["stdout"])[-400:],
               "anchor_stderr_tail": run["stderr_tail"]}
        rows.append(row)
        state = "done" if run["finished"] and run["returncode"] == 0 else (
            f"STOPPED at {args.timeout_s:.0f} s wall" if not run["finished"] else f"FAILED rc={run['returncode']}")
        print(f"{pair.anchor:9s} {pair.anchor_policy:9s} {run['cpu_s']:9.1f} s CPU ({state})  |  horus "
              f"{pair.horus_policy:15s} {h['cpu_s']:7.1f} s CPU  |  ratio {'>= ' if not run['finished'] else ''}"
              f"{ratio}", flush=True)
    report = {
        "command": ["python", "benchmarks/anchors/run_anchors.py", *(argv if argv is not None else sys.argv[1:])],
        "git_commit": git_commit(),
        "trace": {"path": str(args.trace), "jobs": len(jobs), "first_n_in_submit_order": args.max_jobs,
                  "read_for_anchors_cpu_s": convert_cpu_s},
        "cluster": {"gpus": args.gpus, "nodes": args.gpus // 8, "gpus_per_node": 8, "gpu_type": "V100"},
        "timeout_s": args.timeout_s,
        "cpu_time": "user + sys seconds of the whole child process (resource.getrusage RUSAGE_CHILDREN), start-up "
                    "and trace reading included; a run stopped at the timeout reports what it had used (lower bound)",
        "anchors": {a: {"src": str(srcs[a]) if srcs[a] else None, "commit": anchor_commit(srcs[a]),
                        "skipped": skipped.get(a)} for a in chosen},
        "interpreters": {"python2": args.python2, "anchor_python": args.anchor_python, "horus": sys.executable},
        "horus_runs": {p: {k: v for k, v in r.items() if k != "stdout"} for p, r in horus.items()},
        "rows": rows,
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "load_before": load_before,
                    "load_after": os.getloadavg()},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
