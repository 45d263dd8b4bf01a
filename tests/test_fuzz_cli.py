"""The CLI fuzzer (benchmarks/fuzz_inputs.py) derives its cases from the argparse tree.

(a) a CI-sized campaign over every command reports no traceback and no hang; (b) a subcommand registered at
test time (not known to the fuzzer) is fuzzed from its declared NumberArg domain and its bug is reported.
Real forked workers call ``horus.cli.main`` in-process; nothing of ours is mocked.
"""

from __future__ import annotations

import argparse
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import fuzz_inputs

from horus import cli
from horus.validation import Domain, NumberArg

def test_tree_covers_every_command_and_reads_pass_through_parsers() -> None:
    commands = fuzz_inputs.cli_tree()
    names = {c.name for c in commands}
    assert {"simulate", "trace generate", "predictor train", "token create", "k8s-extender", "truth fit"} <= names
    fit = next(c for c in commands if c.name == "truth fit")
    assert fit.pass_through and {o.flag for o in fit.options} >= {"--gavel", "--seed", "--write-params"}
    cases = fuzz_inputs.cli_cases(commands)
    assert {c.command for c in cases} == {c.name for c in commands if c.options}
    # a plain float option without a declared domain: non-finite values are "invalid", and it is listed
    summary = fuzz_inputs.tree_summary(commands)
    undeclared = set(summary["options_without_domain"])
    for cmd in commands:
        for opt in cmd.options:
            if opt.role == "number" and opt.domain is None:
                assert f"{cmd.name} {opt.flag}" in undeclared
                if opt.type_name == "float":
                    assert ("nan", "invalid") in fuzz_inputs.option_values(opt)


def test_every_numeric_option_declares_its_domain() -> None:
    """A new numeric option without ``validation.NumberArg`` (or with a plain int/float type) fails here."""
    summary = fuzz_inputs.tree_summary(fuzz_inputs.cli_tree())
    assert summary["options_without_domain"] == []
    assert summary["commands_without_baseline"] == []


def test_ci_campaign_has_no_traceback_or_hang() -> None:
    report = fuzz_inputs.run_campaign(120, seed=1, workers=2, timeout=30, serve_timeout=3, cli_share=0.9,
                                      progress=False)
    assert report["cli"]["commands"] >= 25
    assert len(report["cli"]["cases_per_command"]) == report["cli"]["commands"]  # every command fuzzed
    assert report["package_files_changed"] == []
    bad = [g for g in report["distinct_failures"]
           if g["class"].split("+")[0] in ("traceback", "hang", "silently_accepted") or "wrote_on_failure" in g["class"]]
    assert not bad, bad


def _register_buggy(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("fuzz-probe", help="a throwaway command with a bug")
    p.add_argument("--ratio", type=NumberArg(Domain(0, 10, integer=True)), default=1)
    p.add_argument("--scale", type=float, default=1.0)  # no declared domain: accepts nan silently

    def run(args: argparse.Namespace) -> int:
        if args.ratio == 10:  # the bug: the documented upper bound crashes
            raise RuntimeError("upper bound of the domain breaks fuzz-probe")
        return 0

    p.set_defaults(func=run)


def test_new_subcommand_is_fuzzed_without_editing_the_fuzzer(monkeypatch: pytest.MonkeyPatch) -> None:
    module = types.ModuleType("fuzz_probe_commands")
    module.register = _register_buggy  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fuzz_probe_commands", module)
    monkeypatch.setattr(cli, "COMMAND_MODULES", (*cli.COMMAND_MODULES, "fuzz_probe_commands"))
    commands = [c for c in fuzz_inputs.cli_tree() if c.name == "fuzz-probe"]
    assert commands and {o.flag for o in commands[0].options} == {"--ratio", "--scale"}
    ratio = next(o for o in commands[0].options if o.flag == "--ratio")
    assert ratio.domain == Domain(0, 10, integer=True)
    values = dict(fuzz_inputs.option_values(ratio))
    assert values["10"] == "valid" and values["11"] == "invalid" and values["nan"] == "invalid"

    # forked workers inherit the patched COMMAND_MODULES, so horus.cli.main runs the probe
    report = fuzz_inputs.run_campaign(0, workers=2, timeout=30, commands=commands, only="cli:", exhaustive=True,
                                      progress=False)
    assert report["cli"]["cases_per_command"]["fuzz-probe"] == len(fuzz_inputs.cli_cases(commands))
    failures = {(g["option"], g["class"]) for g in report["distinct_failures"]}
    assert ("--ratio", "traceback") in failures  # the in-domain upper bound 10 crashes
    assert ("--scale", "silently_accepted") in failures  # nan/inf accepted without a domain
    assert "fuzz-probe --scale" in report["options_without_domain"]
    tracebacks = [g for g in report["distinct_failures"] if g["class"] == "traceback"]
    assert any("upper bound" in g["message"] for g in tracebacks)
