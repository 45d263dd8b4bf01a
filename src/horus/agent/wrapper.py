"""Runs one job attempt as the leader of its own process group: ``python -S wrapper.py DIR -- CMD...``.

Standard library only and importable without Horus (the agent starts it with ``python -S``), so it
starts in milliseconds. In ``DIR`` it

* holds an exclusive ``flock`` on ``lock`` for its whole life: a second wrapper for the same attempt
  exits at once with status 75 and touches nothing, so an attempt never runs twice;
* writes ``pid`` (``<pid> <start time in clock ticks>``), atomically, so an agent restarted after
  ``kill -9`` can tell a live wrapper from a reused pid;
* runs the command with stdout and stderr appended to ``log``, in the same process group (SIGTERM
  to the group reaches both; the wrapper waits for the command and records how it ended);
* writes ``exit.json`` (``{"exit_code": N}``, negative for a signal) atomically when the command ends;
* **fences itself**: when ``DIR/lease`` exists (``<deadline> <kill_s>``, ``deadline`` on the system-wide
  monotonic clock) the wrapper checks it every ``POLL_S``; once the deadline passes (the agent has not
  renewed it: the agent is frozen, dead or cut off from the server) it sends SIGTERM to the group, and
  ``kill_s`` later records ``{"exit_code": -9, "fenced": true}`` and SIGKILLs the whole group, itself
  included. So an attempt stops before the server may run it elsewhere, whatever its agent does
  (the at-most-once contract, docs/service.md);
* with ``HORUS_RUN_AS=UID:GID`` runs the command as that user (``horus serve|agent --run-as``).
"""

import fcntl
import json
import os
import signal
import subprocess
import sys
import time

DUPLICATE = 75
POLL_S = 0.2  # how often a running wrapper reads its lease


def _write_atomic(path: str, text: str) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def start_ticks(pid: int) -> str:
    """Field 22 of /proc/PID/stat: when the process started (distinguishes a reused pid)."""
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().rsplit(")", 1)[1].split()[19]


def read_lease(path: str) -> tuple:
    """(deadline, kill_s) from a lease file, or None when it is absent or unreadable."""
    try:
        with open(path) as fh:
            deadline, kill_s = fh.read().split()
        return float(deadline), float(kill_s)
    except (OSError, ValueError):
        return None


def _fence(child: subprocess.Popen, folder: str, log, kill_s: float) -> None:
    """SIGTERM the group, wait up to ``kill_s`` for the command, record the fenced exit, SIGKILL the group
    (stragglers and the wrapper itself). Does not return."""
    log.write(f"[horus] {time.strftime('%Y-%m-%dT%H:%M:%S')} fenced: the agent's lease expired; "
              f"SIGTERM, SIGKILL in {kill_s:g} s\n".encode())
    log.flush()
    os.killpg(os.getpgid(0), signal.SIGTERM)
    try:
        code = child.wait(timeout=kill_s)
    except subprocess.TimeoutExpired:
        code = -signal.SIGKILL
    log.write(f"[horus] {time.strftime('%Y-%m-%dT%H:%M:%S')} fenced: exit code {code}\n".encode())
    log.flush()
    _write_atomic(os.path.join(folder, "exit.json"),
                  json.dumps({"exit_code": code, "fenced": True, "ended": time.time()}))
    os.killpg(os.getpgid(0), signal.SIGKILL)  # nothing of the attempt survives, the wrapper included


def _identity() -> dict:
    """``HORUS_RUN_AS=UID:GID``: the command runs as that user and group, without supplementary groups
    (the wrapper keeps the agent's identity, so the job cannot touch this folder's lease, pid or exit files)."""
    run_as = os.environ.get("HORUS_RUN_AS")
    if not run_as:
        return {}
    uid, gid = (int(x) for x in run_as.split(":"))
    return {"user": uid, "group": gid, "extra_groups": []}


def _wait(child: subprocess.Popen, folder: str, log) -> int:
    """Wait for the command's exit code, fencing the attempt (see ``_fence``) when its lease expires."""
    lease_path = os.path.join(folder, "lease")
    lease = read_lease(lease_path)
    while True:
        try:
            return child.wait(timeout=POLL_S if lease is not None else None)
        except subprocess.TimeoutExpired:
            pass
        except InterruptedError:
            continue
        lease = read_lease(lease_path) or lease  # the agent replaces it atomically; keep the last one read
        if time.monotonic() > lease[0]:
            _fence(child, folder, log, lease[1])


def main(argv: list) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: wrapper.py DIR -- COMMAND [ARG...]", file=sys.stderr)
        return 2
    folder, command = argv[0], argv[2:]
    lock = open(os.path.join(folder, "lock"), "a")
    try:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return DUPLICATE
    if os.path.exists(os.path.join(folder, "exit.json")):
        return DUPLICATE  # this attempt already ran
    pid = os.getpid()
    _write_atomic(os.path.join(folder, "pid"), f"{pid} {start_ticks(pid)}\n")
    signal.signal(signal.SIGTERM, lambda *_: None)  # the command got it too (same group): wait for it
    signal.signal(signal.SIGINT, lambda *_: None)
    log_fd = os.open(os.path.join(folder, "log"), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    with os.fdopen(log_fd, "ab") as log:
        log.write(f"[horus] {time.strftime('%Y-%m-%dT%H:%M:%S')} start: {command!r}\n".encode())
        log.flush()
        lease = read_lease(os.path.join(folder, "lease"))
        if lease is not None and time.monotonic() > lease[0]:
            log.write(f"[horus] {time.strftime('%Y-%m-%dT%H:%M:%S')} fenced before start: the agent's lease "
                      f"expired\n".encode())
            log.flush()
            _write_atomic(os.path.join(folder, "exit.json"),
                          json.dumps({"exit_code": -signal.SIGTERM, "fenced": True, "ended": time.time()}))
            return 0
        try:
            child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                     cwd=os.environ.get("HORUS_CWD") or None, **_identity())
        except (OSError, ValueError) as exc:
            log.write(f"[horus] cannot start the command: {exc}\n".encode())
            code = 127
        else:
            code = _wait(child, folder, log)
        log.write(f"[horus] {time.strftime('%Y-%m-%dT%H:%M:%S')} exit code {code}\n".encode())
    _write_atomic(os.path.join(folder, "exit.json"), json.dumps({"exit_code": code, "ended": time.time()}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
