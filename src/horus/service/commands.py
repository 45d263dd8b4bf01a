"""CLI of the live service: ``horus serve``, ``agent``, ``submit``, ``jobs``, ``job``, ``cancel``, ``top``."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from typing import Any

from horus.errors import HorusInputError
from horus.jobs import OPTIMIZERS, job_type_key, normalize_precision
from horus.learn.commands import PRECISION_CHOICES
from horus.validation import LIMITS, Domain, NumberArg, path_arg

# the domains of the numeric options (argparse refuses anything else: NaN, inf, out of range; exit 2)
LIST_LIMIT = Domain(1, 100_000, True, "jobs")
JOB_ID = Domain(1, 2**62, True)
INTERVAL_S = Domain(0.1, 3600, False, "s")
PORT = Domain(1, 65535, True)
FAKE_GPUS = Domain(0, 1024, True, "GPUs")
PERIOD_S = Domain(0.01, 86400, False, "s")
FENCE_FRACTION = Domain(0.01, 1, False)
FENCE_KILL_S = Domain(0, 600, False, "s")
BATCH_SIZE = LIMITS["batch_size"]  # as the API's JobSubmit
JOB_GPUS = Domain(1, 4096, True, "GPUs")
ITERATIONS = Domain(1, 1e15, False, "iterations")


def register(subparsers: argparse._SubParsersAction) -> None:
    _serve(subparsers)
    _agent(subparsers)
    _submit(subparsers)
    _client_parser(subparsers, "jobs", "list jobs (newest first)", run_jobs,
                   lambda p: (p.add_argument("--state", action="append", help="only jobs in this state (repeatable)"),
                              p.add_argument("--limit", type=NumberArg(LIST_LIMIT), default=50, help="at most N jobs (default 50)"),
                              p.add_argument("--before", type=NumberArg(JOB_ID), metavar="ID", help="only jobs older than job ID "
                                             "(the next page)")))
    _client_parser(subparsers, "job", "show one job with its placement and events", run_job,
                   lambda p: p.add_argument("job_id", type=NumberArg(JOB_ID), help="job id"))
    _client_parser(subparsers, "cancel", "cancel a queued or running job", run_cancel,
                   lambda p: p.add_argument("job_id", type=NumberArg(JOB_ID), help="job id"))
    _client_parser(subparsers, "top", "live view of GPUs and jobs (refreshing)", run_top,
                   lambda p: (p.add_argument("--interval", type=NumberArg(INTERVAL_S), default=1.0, help="seconds between refreshes"),
                              p.add_argument("--once", action="store_true", help="print one view and exit")))


def _client_args(p: argparse.ArgumentParser) -> None:
    from horus.service.client import add_client_args

    add_client_args(p)


def _client_parser(subparsers: argparse._SubParsersAction, name: str, help_text: str, func: Any,
                   extra: Any) -> None:
    p = subparsers.add_parser(name, help=help_text, description=help_text[0].upper() + help_text[1:] + ".")
    extra(p)
    _client_args(p)
    p.set_defaults(func=func)


def _serve(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("serve", help="run the live scheduler: REST API, store, and an agent for this machine",
                              description="Run Horus as a live resource manager: an HTTP API (OpenAPI at /docs), "
                              "state in SQLite, the scheduling loop, and an agent running jobs on this machine's GPUs.")
    p.add_argument("--state-dir", type=path_arg,
                   help="data directory (default $HORUS_STATE_DIR or the user data dir)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on: an IP address or a host name of this machine (default 127.0.0.1)")
    p.add_argument("--port", type=NumberArg(PORT), default=8470, help="port (default 8470)")
    p.add_argument("--policy", default="horus", help="scheduling policy (default horus)")
    p.add_argument("--predictor", default="physical", help="predictor (default physical; analytic for "
                   "models it has no operator data for)")
    p.add_argument("--token-file", type=path_arg,
                   help="bearer token for writes (default: <state-dir>/token, created)")
    p.add_argument("--open-reads", action="store_true", help="let reads (GET) through without a token")
    p.add_argument("--tenancy", type=path_arg, metavar="FILE",
                   help="a cluster spec YAML whose 'tenancy:' section (queues, priority classes) seeds the store at "
                        "its first start; after that the store wins (`horus queue` changes it)")
    p.add_argument("--fake-gpus", type=NumberArg(FAKE_GPUS), default=0, metavar="N", help="N fake GPUs (no GPU needed; jobs run on CPU)")
    p.add_argument("--gpu-type", default="V100", help="GPU type of the fake GPUs (default V100)")
    p.add_argument("--no-agent", action="store_true", help="run no agent here (machines join with `horus agent`)")
    p.add_argument("--agent-name", help="name of this machine's agent (default: host name)")
    p.add_argument("--lease-s", type=NumberArg(PERIOD_S), default=10.0,
                   help="agent lease: a silent agent's jobs are run elsewhere after lease + fence-kill-s + 1 s")
    p.add_argument("--fence-fraction", type=NumberArg(FENCE_FRACTION), default=0.8,
                   help="an agent's jobs stop themselves when it has not renewed its lease for this fraction of "
                        "it (default 0.8; the at-most-once contract, docs/service.md)")
    p.add_argument("--fence-kill-s", type=NumberArg(FENCE_KILL_S), default=2.0,
                   help="SIGTERM to SIGKILL when a job fences itself (default 2 s)")
    p.add_argument("--run-as", metavar="USER",
                   help="run jobs as this user (the server must run as root): jobs cannot read the server's "
                        "token, job secret or store")
    p.add_argument("--heartbeat-s", type=NumberArg(PERIOD_S), default=1.0, help="agent heartbeat interval")
    p.add_argument("--grace-s", type=NumberArg(PERIOD_S), default=10.0, help="SIGTERM to SIGKILL grace period when stopping a job")
    p.add_argument("--mps", choices=("auto", "on", "off"), default="auto",
                   help="CUDA MPS limits from predictions (auto: when a daemon runs)")
    p.add_argument("--online-correction", choices=("auto", "on", "off"), default="auto",
                   help="correct later predictions of a job type from the telemetry of its runs (auto: from real "
                        "GPUs only, fake GPUs report CPU stand-ins; on: from fake GPUs too; off: raw predictions)")
    p.add_argument("--backend", default="local", help="who runs the jobs: local (default: an agent in this process)"
                   " or ray")
    p.add_argument("--ray-address", help="Ray cluster address for --backend ray (default: start or find one)")
    p.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))
    p.set_defaults(func=run_serve)


def _agent(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("agent", help="join this machine's GPUs to a Horus server",
                              description="Run a node agent: register this machine's GPUs with a Horus server and "
                              "run the jobs it places here.")
    from horus.service.client import server_arg

    p.add_argument("--server", required=True, type=server_arg, help="server URL, e.g. http://head:8470")
    how = p.add_mutually_exclusive_group(required=True)
    how.add_argument("--token-file", type=path_arg, help="this agent's token (`horus token create --role agent`), or the "
                                                     "server's admin token file")
    how.add_argument("--join-token-file", type=path_arg,
                     help="a join token (`horus token create --role join`): exchanged once for this agent's own "
                          "credential, kept in <workdir>/credential (mode 0600)")
    p.add_argument("--name", help="agent name (default: host name)")
    p.add_argument("--run-as", metavar="USER", help="run jobs as this user (the agent must run as root)")
    p.add_argument("--workdir", type=path_arg, help="job folders, logs and checkpoints (default <user data dir>/agent)")
    p.add_argument("--fake-gpus", type=NumberArg(FAKE_GPUS), default=0, metavar="N")
    p.add_argument("--gpu-type", default="V100")
    p.add_argument("--heartbeat-s", type=NumberArg(PERIOD_S), default=1.0)
    p.add_argument("--grace-s", type=NumberArg(PERIOD_S), default=10.0)
    p.add_argument("--mps", choices=("auto", "on", "off"), default="auto")
    p.set_defaults(func=run_agent)


def _submit(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("submit", help="submit a training job: horus submit [options] -- COMMAND [ARGS...]",
                              description="Submit a training job to a Horus server. Everything after -- is the "
                              "command, run without a shell.")
    p.add_argument("--model", help="zoo model name, for prediction (see `horus features --help`)")
    p.add_argument("--onnx", type=path_arg, help="upload this ONNX graph and predict from it")
    p.add_argument("--batch-size", type=NumberArg(BATCH_SIZE), help="batch size (default 32, or the ONNX graph's)")
    p.add_argument("--input-size", type=NumberArg("input_size"),
                   help="image side / sequence length / feature count, for prediction (default: the catalog's)")
    p.add_argument("--precision", choices=PRECISION_CHOICES,
                   help="fp32, tf32, amp-fp16 (amp, fp16) or bf16 (bfloat16), for prediction (default fp32)")
    p.add_argument("--optimizer", choices=OPTIMIZERS, help="the training optimizer, for prediction (default adam)")
    p.add_argument("--gpus", type=NumberArg(JOB_GPUS), default=1, dest="num_gpus")
    p.add_argument("--gpu-type", help="required GPU type")
    p.add_argument("--gpu-fraction", type=NumberArg("gpu_fraction"), help="share of one GPU")
    p.add_argument("--iterations", type=NumberArg(ITERATIONS), help="training iterations, if known")
    p.add_argument("--env", action="append", default=[], metavar="K=V", help="environment variable (repeatable)")
    p.add_argument("--secret-env", action="append", default=[], metavar="NAME",
                   help="pass this variable of your environment to the job as a secret: no read ever returns its "
                        "value (repeatable; the value is never on the command line)")
    p.add_argument("--name", help="a name for the job")
    p.add_argument("--queue", metavar="Q", help="the queue (tenant) to charge (default: the default queue; `horus "
                                               "queue list`)")
    p.add_argument("--priority", metavar="P", help="the job's priority class (default: the default class; `horus "
                                                  "priority-class list`)")
    p.add_argument("--idempotency-key", help="retrying with the same key never creates a second job")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    _client_args(p)
    p.set_defaults(func=run_submit)


# ---- implementations ------------------------------------------------------------------------------------
def run_serve(args: argparse.Namespace) -> int:
    import logging

    from horus.service.server import ServeConfig, default_state_dir, serve

    # the numbers are inside their domains (NumberArg); what remains is how they relate
    if args.heartbeat_s >= args.fence_fraction * args.lease_s:
        raise HorusInputError("--heartbeat-s", f"must be shorter than fence-fraction x lease "
                                               f"({args.fence_fraction * args.lease_s:g} s), or every job fences itself")
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s")
    config = ServeConfig(state_dir=args.state_dir or default_state_dir(), host=args.host, port=args.port,
                         policy=args.policy, predictor=args.predictor, token_file=args.token_file,
                         open_reads=args.open_reads, local_agent=not args.no_agent, fake_gpus=args.fake_gpus,
                         gpu_type=args.gpu_type, agent_name=args.agent_name, heartbeat_s=args.heartbeat_s,
                         lease_s=args.lease_s, grace_s=args.grace_s, mps=args.mps, log_level=args.log_level,
                         backend=args.backend, ray_address=args.ray_address, fence_fraction=args.fence_fraction,
                         fence_kill_s=args.fence_kill_s, run_as=run_as_ids(args.run_as), tenancy=args.tenancy,
                         online_correction=args.online_correction)
    _check_gpu_type(args.gpu_type)
    if args.agent_name is not None:
        _agent_name(args.agent_name, "--agent-name")
    return serve(config)


def _agent_name(name: str, option: str) -> str:
    """An agent's name as the API accepts it (it also names the agent's folder, so no '/' nor '..')."""
    import re

    from horus.service.schemas import NAME_PATTERN

    if not re.fullmatch(NAME_PATTERN, name):
        raise HorusInputError(option, f"expected 1-128 letters, digits, '_', '.' or '-' starting with a letter or "
                                      f"digit, got {name[:70]!r}")
    return name


def _check_gpu_type(name: str) -> None:
    from horus.gpu_types import PRESETS

    if name not in PRESETS:
        raise HorusInputError("--gpu-type", f"unknown GPU type {name!r}; presets: {', '.join(PRESETS)}")


def run_as_ids(user: str | None) -> tuple[int, int] | None:
    """(uid, gid) of ``--run-as USER`` (a name or a number); the caller must be root to use it."""
    if user is None:
        return None
    import pwd

    try:
        entry = pwd.getpwuid(int(user)) if user.isdigit() else pwd.getpwnam(user)
    except (KeyError, ValueError):
        raise HorusInputError("--run-as", f"no user {user[:60]!r} on this machine") from None
    if os.geteuid() != 0:
        raise HorusInputError("--run-as", "running jobs as another user needs root (start this as root)")
    if entry.pw_uid == 0:
        raise HorusInputError("--run-as", "jobs must not run as root")
    return entry.pw_uid, entry.pw_gid


def run_agent(args: argparse.Namespace) -> int:
    import logging
    import socket
    import threading

    from horus.agent.agent import Agent, HttpLink
    from horus.agent.gpus import discover, fake_gpus
    from horus.service.server import default_state_dir, read_token

    logging.basicConfig(level="INFO", format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # not a line per heartbeat
    name = _agent_name(args.name, "--name") if args.name else socket.gethostname().split(".")[0]
    if args.fake_gpus:
        _check_gpu_type(args.gpu_type)
        gpus = fake_gpus(args.fake_gpus, args.gpu_type, name)
    else:
        gpus, reason = discover()
        if not gpus:
            raise HorusInputError("horus agent", f"no GPU found: {reason}; use --fake-gpus N to join N fake GPUs")
    workdir = args.workdir or default_state_dir() / "agent" / name
    from horus.validation import check_output_path

    check_output_path(workdir, "--workdir", directory=True)  # job folders: writable, checked before joining
    if args.token_file is not None:
        token = read_token(args.token_file)
    else:
        from horus.agent.join import credential

        token = credential(args.server, read_token(args.join_token_file), name, workdir)
    agent = Agent(name, gpus, workdir, HttpLink(args.server, token), heartbeat_s=args.heartbeat_s,
                  grace_s=args.grace_s, mps=args.mps, run_as=run_as_ids(args.run_as))
    stop = threading.Event()
    try:
        agent.run(stop)
    except KeyboardInterrupt:
        stop.set()
    return 0


def _client(args: argparse.Namespace) -> Any:
    from horus.service.client import client_from

    return client_from(args)


def run_submit(args: argparse.Namespace) -> int:
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise HorusInputError("horus submit", "no command: put it after --, e.g. horus submit -- python train.py")
    env = {}
    for item in args.env:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise HorusInputError("--env", f"expected K=V, got {item!r}")
        env[key] = value
    secret_env = {}
    for name in args.secret_env:
        if name not in os.environ:
            raise HorusInputError("--secret-env", f"{name[:60]!r} is not set in your environment")
        secret_env[name] = os.environ[name]
    for option, value in (("--gpu-fraction", args.gpu_fraction), ("--iterations", args.iterations)):
        if value is not None and not math.isfinite(value):
            raise HorusInputError(option, f"expected a finite number, got {value!r}")
    from horus.service.queue_commands import tenant_name

    for option, value in (("--queue", args.queue), ("--priority", args.priority)):
        if value is not None:
            tenant_name(value, option)
    if not (args.model or args.onnx):
        for option, value in (("--input-size", args.input_size), ("--precision", args.precision),
                              ("--optimizer", args.optimizer)):
            if value is not None:
                raise HorusInputError(option, "describes the model's training, for its prediction; give --model "
                                              "or --onnx too")
    if args.model:
        from horus.graph.input_sizes import check_input_size

        check_input_size(args.model, args.input_size, "--input-size")
    client = _client(args)
    model, batch = args.model, args.batch_size
    if args.onnx is not None:
        if model:
            raise HorusInputError("--onnx", "give either --model or --onnx")
        uploaded = client.upload_model(args.onnx)
        model, batch = uploaded["model"], batch or uploaded["batch_size"]
    body = {"command": command, "model": model, "batch_size": batch, "num_gpus": args.num_gpus,
            "gpu_type": args.gpu_type, "gpu_fraction": args.gpu_fraction, "iterations": args.iterations,
            "env": env, "secret_env": secret_env or None, "name": args.name, "idempotency_key": args.idempotency_key,
            "cwd": os.getcwd(), "queue": args.queue, "priority": args.priority, "input_size": args.input_size,
            "precision": normalize_precision(args.precision, "--precision"), "optimizer": args.optimizer}
    job = client.submit({k: v for k, v in body.items() if v is not None})
    if args.json:
        print(json.dumps(job, indent=2))
    else:
        pred = job.get("predicted")
        extra = f"; predicted util {pred['util']:.0%}, memory {pred['mem_mib']:.0f} MiB" if pred else ""
        print(f"job {job['id']} {job['state']}{extra}")
    return 0


def run_jobs(args: argparse.Namespace) -> int:
    if args.limit < 1:
        raise HorusInputError("--limit", "expected a positive integer")
    if args.before is not None and args.before < 1:
        raise HorusInputError("--before", "expected a positive job id")
    data = _client(args).jobs(args.state, args.limit, before=args.before)
    if args.json:
        print(json.dumps(data, indent=2))
        return 0
    from rich.console import Console

    console = Console()
    console.print(_jobs_table(data["jobs"], data.get("counts", {})))
    if data.get("next"):
        states = "".join(f" --state {s}" for s in args.state or [])
        console.print(f"more: horus jobs{states} --limit {args.limit} --before {data['next']}", markup=False,
                      highlight=False)
    return 0


def run_job(args: argparse.Namespace) -> int:
    job = _client(args).job(args.job_id)
    if args.json:
        print(json.dumps(job, indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    console = Console()
    table = Table(title=f"job {job['id']}", show_header=False)
    for key in ("name", "state", "queue", "priority", "attempt", "model", "batch_size", "input_size", "precision",
                "optimizer", "num_gpus", "iterations",
                "iterations_done",
                "observed_rate", "predicted", "placement", "command", "oom_failures", "preemptions", "exit_code",
                "reason"):
        if key == "predicted" and job.get(key):
            for name, text in _prediction_rows(job):
                table.add_row(name, text)
        elif job.get(key) not in (None, [], {}):
            table.add_row(key, _fmt(job[key]))
    waiting = job.get("waiting")
    if waiting:
        table.add_row("waiting", f"{waiting['code']}: {waiting['message']}"
                                 + ("" if waiting.get("retryable", True) else " (will not start on this cluster)"))
    console.print(table)
    events = Table(title="events")
    for col in ("time", "kind", "attempt", "detail"):
        events.add_column(col)
    for e in job.get("events", []):
        detail = {k: v for k, v in e.items() if k not in ("time", "kind", "attempt")}
        events.add_row(_when(e["time"]), e["kind"], str(e["attempt"]), _fmt(detail) if detail else "")
    console.print(events)
    if job.get("log_tail"):
        console.rule(f"end of the log of attempt {job.get('log_tail_attempt')}", align="left")
        console.print(job["log_tail"].rstrip("\n"), markup=False, highlight=False, soft_wrap=True)
    return 0


def run_cancel(args: argparse.Namespace) -> int:
    job = _client(args).cancel(args.job_id)
    print(json.dumps(job, indent=2) if args.json else f"job {job['id']} {job['state']}")
    return 0


def run_top(args: argparse.Namespace) -> int:
    from rich.console import Console, Group
    from rich.live import Live

    client = _client(args)

    def frame() -> Any:
        cluster, jobs = client.cluster(), client.jobs(["running", "queued"], 30)
        if args.json:
            return {"cluster": cluster, "jobs": jobs}
        return Group(_gpu_table(cluster), _jobs_table(jobs["jobs"], jobs.get("counts", {})))

    if args.once or args.json:
        view = frame()
        if args.json:
            print(json.dumps(view, indent=2))
        else:
            Console().print(view)
        return 0
    if args.interval <= 0:
        raise HorusInputError("--interval", "expected a positive number of seconds")
    with Live(frame(), refresh_per_second=4, screen=sys.stdout.isatty()) as live:
        while True:
            time.sleep(args.interval)
            live.update(frame())


def _gpu_table(cluster: dict[str, Any]) -> Any:
    from rich.table import Table

    table = Table(title=f"GPUs — policy {cluster['policy']}, {cluster['running']} running, {cluster['queued']} queued")
    for col in ("gpu", "agent", "type", "jobs", "pred util", "obs util", "pred mem MiB", "obs mem MiB"):
        table.add_column(col, justify="right" if col not in ("agent", "type", "jobs") else "left")
    for g in cluster["gpus"]:
        table.add_row(str(g["index"]), f"{g['agent']}:{g['local_index']}", g["type"], ",".join(g["residents"]) or "-",
                      f"{g['predicted_util']:.0%}", "-" if g["observed_util"] is None else f"{g['observed_util']:.0%}",
                      f"{g['predicted_mem_mib']:.0f}",
                      "-" if g["observed_mem_mib"] is None else f"{g['observed_mem_mib']:.0f}")
    return table


def _jobs_table(jobs: list[dict[str, Any]], counts: dict[str, int]) -> Any:
    from rich.table import Table

    summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    table = Table(title=f"jobs ({summary})" if summary else "jobs")
    tenants = any(j.get("queue") for j in jobs)  # a queue column where the service has queues
    for col in ("id", "state", *(("queue",) if tenants else ()), "model", "gpus", "placement", "progress",
                "submitted", "reason"):
        table.add_column(col)
    for j in jobs:
        placement = ",".join(f"{p['agent']}:{p['gpu']}" for p in j["placement"]) or "-"
        total = j.get("iterations")
        progress = f"{j['iterations_done']:.0f}" + (f"/{total:.0f}" if total else "")
        model = job_type_key(j["model"], j["batch_size"], j.get("input_size"), j.get("precision"),
                             j.get("optimizer")) if j.get("model") else "-"
        reason = (j.get("waiting") or {}).get("code") or j.get("reason") or ""  # why it waits, else why it ended
        queue = (f"{j.get('queue') or '-'}" + (f"/{j['priority']}" if j.get("priority") not in (None, "normal") else ""),)
        table.add_row(j["id"], j["state"], *(queue if tenants else ()), model, str(j["num_gpus"]), placement, progress,
                      _when(j["submitted"]), reason)
    return table


def _when(ts: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(ts))


def _quantities(values: dict[str, Any]) -> str:
    """``util 62 %, memory 5321 MiB, iteration 0.123 s`` of a prediction or observation's values."""
    parts = []
    for key, fmt in (("util", "util {:.0%}"), ("mem_mib", "memory {:.0f} MiB"), ("iter_time_s", "iteration {:.4g} s")):
        if values.get(key) is not None:
            parts.append(fmt.format(values[key]))
    return ", ".join(parts)


SOURCES = {"type": "this job type, {} run(s)", "gpu": "other types on this GPU type, {}",
           "global": "other GPU types, {} type(s)"}


def _prediction_rows(job: dict[str, Any]) -> list[tuple[str, str]]:
    """``horus job``'s rows of the prediction (corrected online), the uncorrected one and what was observed."""
    pred = job["predicted"]
    rows = [("predicted", f"{_quantities(pred)} on {pred.get('gpu_type', '?')}")]
    correction = {q: c for q, c in (pred.get("correction") or {}).items() if c.get("source") != "none"}
    if correction:
        rows.append(("uncorrected", _quantities(pred.get("uncorrected") or {})))
        names = {"util": "util", "mem_mib": "memory", "iter_time_s": "iteration"}
        rows.append(("correction", ", ".join(f"{names.get(q, q)} x{c['factor']:.3g} ("
                                             f"{SOURCES.get(c['source'], '{}').format(c['observations'])})"
                                             for q, c in correction.items())))
    seen = job.get("observation")
    if seen:
        observed = {q: v["observed"] for q, v in seen.items() if isinstance(v, dict)}
        believed = {q: v["predicted"] for q, v in seen.items() if isinstance(v, dict)}
        text = (f"{_quantities(observed)} on {seen.get('gpu_type', '?')} (attempt {seen.get('attempt')}; it started "
                f"predicted at {_quantities(believed)})")
        rows.append(("observed", text))
    return rows


def _fmt(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)
