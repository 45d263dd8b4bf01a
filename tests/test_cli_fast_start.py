"""``horus --help``, each verb's ``--help`` and argument errors import no heavy library.

The parsers of every verb are built for any invocation, so a top-level import of pandas (through the openb
trace loader), pyarrow, scikit-learn, torch, matplotlib or ray in a parser's module makes every first command
slow. Checked in a fresh interpreter per case (the wall time is measured in ``benchmarks/``, not here).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("pandas", "pyarrow", "sklearn", "torch", "matplotlib", "ray", "xgboost", "fastapi", "uvicorn", "scipy")
PROBE = """
import json, sys
from horus.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))
"""


@pytest.mark.parametrize("argv", [["--help"], ["simulate", "--help"], ["sweep", "--help"], ["serve", "--help"],
                                  ["simulate", "--no-such-option"], ["trace", "generate", "--help"], []],
                         ids=lambda a: " ".join(a) or "no-arguments")
def test_no_heavy_import(argv: list[str]) -> None:
    out = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, timeout=120)
    loaded = set(json.loads(out.stdout.strip().splitlines()[-1]))
    assert "horus" in loaded
    assert sorted(loaded.intersection(HEAVY)) == []
