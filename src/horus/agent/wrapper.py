"""Runs one job attempt as the leader of its own process group: ``python -S wrapper.py DIR -- CMD...``.

Standard library only and importable without Horus (the agent starts it with ``python -S``), so it
starts in milliseconds. In ``DIR`` it

* holds an exclusive ``flock`` on ``lock`` for its whole life: a second wrapper for the same attempt
  exits at once with status 75 and touches nothing, so an attempt never runs twice;
* writes ``pid`` (``<pid> <start time in clock ticks>``), atomically, so an agent restarted after
  ``kill -9`` can tell a live wrapper from a reused pid;
* runs the command with stdout and stderr appended to ``log``, in the same process group (SIGTERM
  to the group reaches both; the wrapper waits for the command and records how it ended);
* writes ``exit.json`` (``{"exit_code": N}``, negative for a signal) atomically when the command ends.
"""

import fcntl
import json
import os
import signal
import subprocess
import sys
import time

DUPLICATE = 75


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
    with open(os.path.join(folder, "log"), "ab") as log:
        log.write(f"[horus] {time.strftime('%Y-%m-%dT%H:%M:%S')} start: {command!r}\n".encode())
        log.flush()
        try:
            child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                     cwd=os.environ.get("HORUS_CWD") or None)
        except OSError as exc:
            log.write(f"[horus] cannot start the command: {exc}\n".encode())
            code = 127
        else:
            while True:
                try:
                    code = child.wait()
                    break
                except InterruptedError:
                    continue
        log.write(f"[horus] {time.strftime('%Y-%m-%dT%H:%M:%S')} exit code {code}\n".encode())
    _write_atomic(os.path.join(folder, "exit.json"), json.dumps({"exit_code": code, "ended": time.time()}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
