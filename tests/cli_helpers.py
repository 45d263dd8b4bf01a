"""Running ``horus.cli.main`` in-process and checking that bad input ended in one clear line."""

from __future__ import annotations

import contextlib
import io
import re

from horus.cli import main


def run(argv: list[str]) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``horus ARGV`` run in this process."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as exc:
            rc = int(exc.code or 0)
    return rc, out.getvalue(), err.getvalue()


def assert_clear(rc: int, err: str, *needles: str) -> None:
    """Exit 2, no traceback, the last line ours ("horus: error:") or argparse's ("horus CMD: error:"), naming every
    needle."""
    assert rc == 2, err
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert re.match(r"horus( [a-z-]+)*: error: ", last), err
    for needle in needles:
        assert needle in last, last
