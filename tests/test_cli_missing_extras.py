"""Commands whose optional extra (torch, onnx, ray...) is not installed end with one line naming the extra."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from horus.cli import main
from horus.extras import MissingExtraError, missing_extra

REPO = Path(__file__).resolve().parents[1]

BLOCK_TORCH = '''import sys

class _NoTorch:
    """Make torch look uninstalled (this test's sitecustomize)."""

    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _NoTorch())
'''


@pytest.mark.parametrize("args", [
    ["train", "resnet50", "--iterations", "2"],
    ["features", "resnet18_cifar", "--batch", "8"],
    ["profile", "--model", "resnet18_cifar", "--batch", "8", "--device", "cpu", "--no-nvml", "--out", "OUT"],
])
def test_torch_commands_without_torch_say_which_extra_to_install(tmp_path: Path, args: list[str]) -> None:
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(BLOCK_TORCH)
    out = tmp_path / "out"
    pythonpath = os.pathsep.join(p for p in (str(tmp_path / "site"), str(REPO / "src"), os.environ.get("PYTHONPATH"))
                                 if p)
    result = subprocess.run([sys.executable, "-m", "horus.cli", *[str(out) if a == "OUT" else a for a in args]],
                            capture_output=True, text=True, timeout=120, check=False,
                            env={**os.environ, "PYTHONPATH": pythonpath})
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.startswith(f"horus: error: horus {args[0]}: needs torch")
    assert "pip install -e '.[graph]'" in result.stderr
    assert not out.exists()  # nothing written before the check


def test_cli_turns_any_missing_extra_into_one_line(monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from horus.profiling import train

    def needs_ray(args: object) -> int:
        raise ModuleNotFoundError("No module named 'ray.util'", name="ray.util")

    monkeypatch.setattr(train, "run_train", needs_ray)
    assert main(["train", "resnet50"]) == 2
    assert capsys.readouterr().err == ("horus: error: horus train: needs ray, which is not installed here; "
                                       "install the ray extra: pip install -e '.[ray]'\n")

    def needs_numpy(args: object) -> int:
        raise ModuleNotFoundError("No module named 'numpy'", name="numpy")

    monkeypatch.setattr(train, "run_train", needs_numpy)
    with pytest.raises(ModuleNotFoundError):  # not an optional extra: a real error, kept as it is
        main(["train", "resnet50"])
    assert isinstance(missing_extra(ModuleNotFoundError("x", name="onnx"), "horus features"), MissingExtraError)
    assert missing_extra(ImportError("x", name="onnx"), "horus features") is None  # only a module that is absent
