"""Regressions from the CLI fuzzer's campaign (issue 28): each case ended in a traceback, a hang or output left
behind before; now one clear line, exit 2, nothing written."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from cli_helpers import assert_clear, run

from horus.validation import NumberArg


def test_a_path_too_long_for_the_os_is_one_line_on_any_command(tmp_path: Path) -> None:
    long = str(tmp_path / ("x" * 5000))
    for argv in (["sweep-report", long], ["predict", "resnet50", "--batch", "8", "--gpu", "V100", "--predictor",
                                          "learned", "--predictor-dir", long],
                 ["predictor", "train", long, "--out", str(tmp_path / "o")]):
        rc, _, err = run(argv)
        assert_clear(rc, err, "path too long")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/null"])
def test_a_device_is_not_read_as_a_sweep(device: str) -> None:
    rc, _, err = run(["sweep-report", device])
    assert_clear(rc, err, device, "not a regular file")


def test_plan_pairs_creates_the_missing_parents_of_its_output(tmp_path: Path) -> None:
    solo = tmp_path / "solo.csv"
    solo.write_text("model,batch_size,precision,status,gpu_util_mean,torch_max_reserved_mib\n"
                    "resnet50,32,fp32,ok,60,3000\nncf,64,fp32,ok,20,900\n")
    out = tmp_path / "new" / "deeper" / "plan.json"
    rc, stdout, err = run(["profile", "plan-pairs", "--solo", str(solo), "--capacity-mib", "16000", "--pairs", "1",
                           "--out", str(out)])
    assert rc == 0, err
    assert out.is_file() and "wrote" in stdout


def test_profile_refuses_an_unknown_model_before_writing_a_row(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    out = tmp_path / "prof"
    rc, _, err = run(["profile", "--model", "-", "--batch", "2", "--device", "cpu", "--no-nvml", "--out", str(out)])
    assert_clear(rc, err, "unknown model '-'")
    assert not out.exists()


@pytest.mark.parametrize("text", ["1_000", "１２", "0x10", "1e3", " "])
def test_numberarg_takes_plain_ascii_numbers_only(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        NumberArg("seed")(text)
    assert NumberArg("seed")(" 12 ") == 12


def test_the_extender_refuses_a_kubeconfig_it_would_ignore(tmp_path: Path) -> None:
    config = tmp_path / "kubeconfig"
    config.write_bytes(b"\x00\xff random")
    rc, _, err = run(["k8s-extender", "--api-server", "http://127.0.0.1:9", "--kubeconfig", str(config),
                      "--port", "0"])
    assert_clear(rc, err, "--api-server", "cannot be combined with --kubeconfig")
