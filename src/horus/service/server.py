"""``horus serve``: store + scheduler + API + (by default) an in-process agent, in one process.

Threads: uvicorn serves the API; one scheduling thread runs ``LiveScheduler.step`` whenever
something changed (a submission, an exit, a lost agent) and at least every second; the
in-process agent heartbeats every ``heartbeat_s`` and at once when its desired state changes.
"""

from __future__ import annotations

import logging
import os
import secrets
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from horus.errors import HorusInputError

if TYPE_CHECKING:
    from horus.service.scheduler import LiveScheduler
    from horus.service.store import Store
    from horus.tenancy import Tenancy

log = logging.getLogger("horus.service")

DEFAULT_PORT = 8470


def default_state_dir() -> Path:
    """``$HORUS_STATE_DIR`` or the user's data directory (e.g. ``~/.local/share/horus``)."""
    env = os.environ.get("HORUS_STATE_DIR")
    if env:
        return Path(env)
    from platformdirs import user_data_dir

    return Path(user_data_dir("horus", appauthor=False))


def _secret_file(path: Path, nbytes: int) -> str:
    """Read a secret, creating it (mode 0600, random) the first time."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_urlsafe(nbytes) + "\n")
    return read_token(path)


def check_listen_address(host: str, port: int, host_option: str = "--host", port_option: str = "--port") -> None:
    """HorusInputError unless this process can listen on ``host``:``port``: ``host`` is an IP address or a name
    that resolves to an address of this machine, and the port is free there (a bind probe, closed at once)."""
    import errno
    import socket

    from horus.service.client import check_host

    check_host(host, host_option)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError, OSError) as exc:
        raise HorusInputError(host_option, f"cannot resolve {host!r} ({getattr(exc, 'strerror', None) or exc}); "
                                           "expected an IP address or a host name of this machine") from None
    family, kind, proto, _, address = infos[0]
    try:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(address)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise HorusInputError(port_option, f"port {port} is in use on {host}; expected a free port") from None
        if exc.errno == errno.EACCES:
            raise HorusInputError(port_option, f"no permission to listen on port {port} (ports below 1024 need "
                                               "root)") from None
        raise HorusInputError(host_option, f"cannot listen on {host} ({exc.strerror or exc}); expected an address "
                                           "of this machine (127.0.0.1, 0.0.0.0, or one of its interfaces)") from None


def check_state_dir(state_dir: Path, option: str = "--state-dir") -> None:
    """HorusInputError unless ``state_dir`` is (or can be created as) a writable directory whose ``token`` and
    ``job_secret``, where present, are files: checked before anything is written."""
    from horus.validation import check_output_path

    try:
        check_output_path(state_dir, option, directory=True)
        for name in ("token", "job_secret", "horus.db"):
            if (state_dir / name).is_dir():
                raise HorusInputError(option, f"{state_dir / name} is a directory; expected a file (or nothing)")
    except OSError as exc:  # e.g. a name longer than the file system allows
        raise HorusInputError(option, f"{str(state_dir)[:80]}...: {exc.strerror or exc}") from None


def read_token(path: Path) -> str:
    """A token file's token (at least 16 printable ASCII characters); one-line errors name the file."""
    from horus.validation import read_secret

    return read_secret(path, str(path))


@dataclass
class ServeConfig:
    state_dir: Path
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    policy: str = "horus"
    predictor: str = "physical"
    token_file: Path | None = None
    open_reads: bool = False
    local_agent: bool = True
    fake_gpus: int = 0
    gpu_type: str = "V100"
    agent_name: str | None = None
    heartbeat_s: float = 1.0
    lease_s: float = 10.0
    grace_s: float = 10.0
    mps: str = "auto"
    log_level: str = "info"
    backend: str = "local"  # horus.service.backends.BACKENDS name
    ray_address: str | None = None
    fence_fraction: float = 0.8
    fence_kill_s: float = 2.0
    run_as: tuple[int, int] | None = None  # (uid, gid) jobs run as (local backend)
    tenancy: Path | None = None  # a cluster spec YAML whose ``tenancy:`` seeds an unseeded store (horus.service.tenants)
    online_correction: str = "auto"  # auto (real GPUs' telemetry), on (fake GPUs' too) or off


def token_path(config: ServeConfig) -> Path:
    return config.token_file or config.state_dir / "token"


def serve(config: ServeConfig) -> int:
    """Run until interrupted. Returns the exit code."""
    import uvicorn

    from horus.plugins import load_all
    from horus.predict.base import PREDICTORS
    from horus.service.api import create_app
    from horus.service.metrics import ServiceMetrics
    from horus.service.backends import BACKENDS
    from horus.core import create_policy
    from horus.service.scheduler import LiveScheduler
    from horus.service.store import Store, StoreError

    create_policy(config.policy)  # refused before anything starts: unknown, or an oracle
    load_all("horus.predict")
    if config.predictor not in PREDICTORS:
        raise HorusInputError("--predictor", f"unknown predictor {config.predictor!r}; known: "
                                             f"{', '.join(PREDICTORS.names())}")
    load_all("horus.service.backends")
    if config.backend not in BACKENDS:
        raise HorusInputError("--backend", f"unknown backend {config.backend!r}; known: {', '.join(BACKENDS.names())}")
    backend = BACKENDS.create(config.backend)
    # bad input fails here, before anything is written: the address, the token file, the state directory
    check_listen_address(config.host, config.port)
    given_token = read_token(config.token_file) if config.token_file else None
    from horus.service import tenants

    tenancy = tenants.read_file(config.tenancy) if config.tenancy is not None else None
    state_dir = config.state_dir
    check_state_dir(state_dir)
    backend.prepare(config)  # fails fast (no GPU, no Ray...) before anything is written
    state_dir.mkdir(parents=True, exist_ok=True)
    # the token, the job secret, the store and the jobs' logs: the server's user only (with --run-as, the jobs' user
    # may pass through to its own progress file and checkpoints, see horus.agent.processes)
    state_dir.chmod(0o711 if config.run_as else 0o700)
    token = given_token or _secret_file(state_dir / "token", 32)
    job_secret = _secret_file(state_dir / "job_secret", 32).encode()
    try:
        store = Store(state_dir / "horus.db")
    except StoreError as exc:
        raise HorusInputError("--state-dir", str(exc)) from None
    for suffix in ("", "-wal", "-shm"):  # SQLite gives its side files the database file's mode
        path = state_dir / f"horus.db{suffix}"
        if path.exists():
            path.chmod(0o600)
    if tenancy is not None:
        _seed_tenancy(store, tenancy, config.tenancy)
    metrics = ServiceMetrics()
    url = f"http://{config.host}:{config.port}"
    scheduler = LiveScheduler(store, PREDICTORS.create(config.predictor), policy=config.policy,
                              lease_s=config.lease_s, server_url=url, job_secret=job_secret, metrics=metrics,
                              fence_fraction=config.fence_fraction, fence_kill_s=config.fence_kill_s,
                              online_correction=config.online_correction)
    metrics.bind(scheduler)
    app = create_app(scheduler, token, open_reads=config.open_reads)
    stop = threading.Event()
    threading.Thread(target=_scheduling_loop, args=(scheduler, stop), name="horus-scheduler", daemon=True).start()
    backend.start(scheduler, config, stop)
    log.info("horus serve: %s, policy %s, backend %s, state %s, token file %s", url, config.policy, config.backend,
             state_dir / "horus.db", token_path(config))
    server = uvicorn.Server(uvicorn.Config(app, host=config.host, port=config.port, log_level=config.log_level,
                                           access_log=config.log_level == "debug"))
    try:
        server.run()
    finally:
        stop.set()
        backend.close()
        store.close()
    return 0


def _seed_tenancy(store: Store, tenancy: Tenancy, path: Path | None) -> None:
    """``--tenancy FILE`` seeds the store once; after that the store (changed through the API) wins."""
    import time

    from horus.service import tenants
    from horus.service.store import StoreUnavailable

    try:
        seeded = tenants.seed(store, tenancy, time.time())
    except StoreUnavailable as exc:
        raise HorusInputError("--state-dir", str(exc)) from None
    if seeded:
        log.info("tenancy of %s stored: %d queues", path, len(tenancy.queues))
    else:
        log.warning("--tenancy %s ignored: this store was seeded before and keeps its queues and priority classes "
                    "(change them with `horus queue` or the API)", path)


def _scheduling_loop(scheduler: LiveScheduler, stop: threading.Event) -> None:
    from horus.service.store import StoreUnavailable

    seen_failures = 0
    while not stop.is_set():
        scheduler.wake_scheduler.wait(scheduler.tick_s())
        scheduler.wake_scheduler.clear()
        try:
            if not _store_writable(scheduler, seen_failures):
                stop.wait(1.0)
                continue
            seen_failures = scheduler.store.write_failures
            scheduler.step()
        except StoreUnavailable as exc:  # one line: /healthz says "degraded" until the store writes again
            log.warning("scheduling step: %s", exc)
        except Exception:  # noqa: BLE001 - a policy bug must be seen, and must not stop the service
            log.exception("scheduling step failed")
            stop.wait(1.0)


def _store_writable(scheduler: LiveScheduler, seen_failures: int) -> bool:
    """False while the store cannot write (a probe a second). After writes failed, the in-memory view may be
    ahead of the store (a step or heartbeat cut short): it is rebuilt from the store once writes work again."""
    store = scheduler.store
    if store.write_error is not None and not store.probe():
        return False
    if store.write_failures != seen_failures:
        log.warning("the store writes again: scheduler state rebuilt from it")
        scheduler.rebuild()
    return True
