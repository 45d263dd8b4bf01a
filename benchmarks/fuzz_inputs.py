"""Throw generated malformed (and some valid) inputs at every file-reading ``horus`` command; count outcomes.

Usage (from the repository root; the generator is deterministic by ``--seed``)::

    PYTHONPATH=src python benchmarks/fuzz_inputs.py --cases 10000 --workers 2 --out benchmarks/results/fuzz_inputs.json

How it runs: each worker is a forked process that imports Horus once and calls ``horus.cli.main(argv)``
in-process for one case after another (stdout/stderr captured, ``SystemExit`` caught), inside a fresh
temporary directory that is also its working directory (so a default ``results/`` would land there).
The parent gives every case ``--timeout`` seconds; a worker that does not answer in time is killed and
replaced (class ``hang``). Workers run under an address-space limit (``--memory-gib``); a worker killed
by the OS or that dies is counted as ``hang`` too (runaway memory).

Every case carries a label: ``invalid`` (a value outside the documented domain: must end in a clear
error), ``valid`` (must succeed), ``warn`` (must succeed and print a ``horus: warning:`` line) or
``any`` (random byte damage: only tracebacks and hangs count). Classes:

- ``clear_error``: exit code 2, no traceback, the last stderr line starts with ``horus: error:`` or is an
  argparse ``error:`` line;
- ``traceback``: an exception escaped ``main`` (or exit code 1 / an unclear message);
- ``hang``: timeout, worker killed or died;
- ``silently_accepted``: exit 0 for an ``invalid`` case (or a ``warn`` case without its warning);
- ``accepted``: exit 0 for a ``valid``/``warn``/``any`` case;
- ``false_rejection``: a clear error for a ``valid`` case;
- ``wrote_on_failure``: a failed run left files beside its inputs (counted on top of its class).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import multiprocessing as mp
import os
import platform
import random
import resource
import shutil
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

# ----------------------------------------------------------------------------------------------------------
# cases


@dataclass
class Case:
    surface: str  # e.g. "trace-horus", "gavel:truth-fit"
    argv: list[str]  # "{d}" is replaced by the case directory
    files: dict[str, bytes] = field(default_factory=dict)
    label: str = "invalid"  # invalid | valid | warn | any
    note: str = ""


INVALID_SHARE = 0.85  # share of field mutations drawn from the invalid values (the rest check false rejections)


def _csv(header: list[str], rows: list[list[object]]) -> bytes:
    return ("\n".join(",".join(str(c) for c in r) for r in [header, *rows]) + "\n").encode()


SIM = ["simulate", "--no-progress", "--policy", "fifo-exclusive", "--out", "{d}/out"]

HORUS_HEADER = ["job_id", "submit_time", "num_gpus", "model", "batch_size", "iterations", "duration_s",
                "gpu_fraction", "gpu_type"]
HORUS_ROWS = [["j1", 0, 1, "resnet50", 64, 100, "", "", ""], ["j2", 5, 2, "", "", "", 600, "", "V100"],
              ["j3", 12.5, 1, "", "", "", 300, 0.5, ""]]

# column -> (valid values, invalid values) for horus traces (cluster: default 64 x V100)
HORUS_VALUES: dict[str, tuple[list[object], list[object]]] = {
    "job_id": (["x", "job-7", "ü"], [""]),
    "submit_time": ([0, 1.5, 86400, 3e8], [-1, "x", "nan", "inf", "1e300", "-inf", "1e12", "0x10", "True"]),
    "num_gpus": ([1, 4, 64], [0, -1, 1.5, "x", "1e300", "1e9", "nan", "inf", "True", 2**63, 65]),
    "batch_size": ([16, 32, 128], [0, -3, 1.5, "x", "1e300", "1e7", "nan"]),
    "iterations": ([1, 100, 1e6], [0, -1, "nan", "inf", "1e300", "1e-300", "1e13", "x"]),
    "duration_s": ([1, 3600, 2.5e6], [0, -5, "1e300", "1e-300", "1e10", "inf", "x"]),
    "gpu_fraction": ([0.25, 1], [0, 1.5, -0.5, "x", "nan", "1e-300"]),
    "gpu_type": (["V100", "V100|V100-32GB"], ["Z999", "v100x", "|"]),
}


def _horus_case(rng: random.Random) -> Case:
    header = list(HORUS_HEADER)
    rows = [list(r) for r in HORUS_ROWS]
    column = rng.choice(list(HORUS_VALUES))
    good, bad = HORUS_VALUES[column]
    row = rng.randrange(len(rows))
    col = header.index(column)
    label = "valid"
    if rng.random() < INVALID_SHARE:
        value, label = rng.choice(bad), "invalid"
    else:
        value = rng.choice(good)
    # keep rows coherent: work columns exclusive, fractions only for 1-GPU jobs, models with batches
    if column in ("iterations", "duration_s"):
        other = header.index("duration_s" if column == "iterations" else "iterations")
        rows[row][other] = ""
    if column == "gpu_fraction":
        rows[row][header.index("num_gpus")] = 1
    if column == "batch_size":
        rows[row][header.index("model")] = "resnet50"
    if column == "num_gpus" and rows[row][header.index("gpu_fraction")] != "":
        rows[row][header.index("gpu_fraction")] = ""
    if column == "num_gpus" and value == 65:
        label = "warn"  # larger than the cluster: rejected and counted, with a warning
    rows[row][col] = value
    return Case("trace-horus", [*SIM, "--trace", "{d}/t.csv"], {"t.csv": _csv(header, rows)}, label,
                f"{column}={value!r}")


def _text_damage(rng: random.Random, good: bytes, kind: str) -> tuple[bytes, str, str]:
    """Generic text-file damage: (bytes, label, note)."""
    lines = good.split(b"\n")
    choice = rng.choice(["non_utf8", "bom", "crlf", "huge_cell", "empty", "nul", "truncate", "bytes", "utf16",
                         "dup_header", "blank_lines", "header_only", "long_line_count", "wrong_fields"])
    if choice == "non_utf8":
        i = rng.randrange(1, max(2, len(lines) - 1))
        lines[i] = lines[i] + b"\xff\xfe\x80"
        return b"\n".join(lines), "invalid", choice
    if choice == "bom":
        return b"\xef\xbb\xbf" + good, "valid", choice
    if choice == "crlf":
        return good.replace(b"\n", b"\r\n"), "valid", choice
    if choice == "huge_cell":
        i = rng.randrange(1, max(2, len(lines) - 1))
        cells = lines[i].split(b",")
        cells[rng.randrange(len(cells))] = b"9" * rng.choice([140_000, 300_000])
        lines[i] = b",".join(cells)
        return b"\n".join(lines), "invalid", choice
    if choice == "empty":
        return rng.choice([b"", b"\n\n", b"   \n"]), "invalid", choice
    if choice == "nul":
        i = rng.randrange(len(good))
        return good[:i] + b"\x00" + good[i:], "invalid", choice
    if choice == "truncate":
        return good[: rng.randrange(1, max(2, len(good) // 3))], "any", choice
    if choice == "bytes":
        data = bytearray(good)
        for _ in range(rng.randint(1, 6)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        return bytes(data), "any", choice
    if choice == "utf16":
        return good.decode().encode("utf-16"), "invalid", choice
    if choice == "dup_header":
        cells = lines[0].split(b",")
        if len(cells) < 2:
            cells.append(cells[0])
        cells[rng.randrange(1, len(cells))] = cells[0]
        lines[0] = b",".join(cells)
        return b"\n".join(lines), "invalid", choice
    if choice == "blank_lines":
        return good.replace(b"\n", b"\n\n", 1), "valid", choice
    if choice == "header_only":
        return lines[0] + b"\n", "invalid", choice
    if choice == "wrong_fields":
        i = rng.randrange(1, max(2, len(lines) - 1))
        lines[i] = lines[i] + b",extra"
        return b"\n".join(lines), "invalid", choice
    # long_line_count: many comment lines (valid)
    return b"# comment\n" * rng.choice([10, 1000]) + good, "valid", choice


def _trace_text_case(rng: random.Random, surface: str, good: bytes, argv: list[str], name: str,
                     extra: dict[str, bytes] | None = None) -> Case:
    data, label, note = _text_damage(rng, good, surface)
    return Case(surface, argv, {name: data, **(extra or {})}, label, note)


PHILLY_HEADER = ["timestamp", "duration", "num_gpus", "gpu_time", "cluster"]
PHILLY_ROWS = [["2017-10-09 07:01:55", 66.0, 1, 66.0, "c1"], ["2017-10-09 08:13:03", 2951.0, 2, 5902.0, "c2"]]
PHILLY_VALUES: dict[str, tuple[list[object], list[object]]] = {
    "timestamp": (["2017-01-01 00:00:00", "1999-12-31 23:59:59"],
                  ["0001-01-01 00:00:00", "1677-09-22 00:12:43", "2262-04-11 23:47:16", "2017-13-01 00:00:00",
                   "x", "", "2017-10-09", "1e9", "9999-12-31 23:59:59", "1900-01-01 00:00:00"]),
    "duration": ([1, 3600.5, 86400 * 30], [0, -1, "1e300", "1e-300", "nan", "inf", "x", "", "1e10"]),
    "num_gpus": ([1, 8, 64], [0, -2, 1.5, "1e300", "1e9", "x", ""]),
}


def _philly_case(rng: random.Random) -> Case:
    argv = [*SIM, "--format", "philly", "--trace", "{d}/p.csv"]
    if rng.random() < 0.3:
        return _trace_text_case(rng, "trace-philly", _csv(PHILLY_HEADER, PHILLY_ROWS), argv, "p.csv")
    rows = [list(r) for r in PHILLY_ROWS]
    column = rng.choice(list(PHILLY_VALUES))
    good, bad = PHILLY_VALUES[column]
    invalid = rng.random() < INVALID_SHARE
    value = rng.choice(bad if invalid else good)
    rows[rng.randrange(len(rows))][PHILLY_HEADER.index(column)] = value
    return Case("trace-philly", argv, {"p.csv": _csv(PHILLY_HEADER, rows)}, "invalid" if invalid else "valid",
                f"{column}={value!r}")


POD_HEADER = ["name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec", "qos", "pod_phase",
              "creation_time", "deletion_time", "scheduled_time"]
POD_ROWS = [["pod-0", 12000, 16384, 1, 1000, "", "LS", "Running", 0, 5000, 0],
            ["pod-1", 6000, 12288, 1, 460, "V100M16|V100M32", "LS", "Running", 100, 9000, 120],
            ["pod-2", 6000, 12288, 2, 1000, "T4", "BE", "Succeeded", 300, 4000, 320]]
NODE_HEADER = ["sn", "cpu_milli", "memory_mib", "gpu", "model"]
NODE_ROWS = [["n0", 64000, 262144, 8, "V100M16"], ["n1", 64000, 262144, 4, "T4"], ["n2", 64000, 262144, 2, "V100M32"],
             ["n3", 32000, 131072, 0, ""]]
POD_VALUES: dict[str, tuple[list[object], list[object]]] = {
    "num_gpu": ([0, 1], [-1, 1.5, "1e9", "1e300", "x", "nan"]),
    "gpu_milli": ([1, 999, 1000], [0, 1001, -5, "x", 1.5]),
    "gpu_spec": (["A10|T4", "P100", ""], ["H900", "V100M16||", "v100m16"]),
    "creation_time": ([0, 50, 1e6], [-1, "1e300", "nan", "x", "", "1e11"]),
    "deletion_time": ([9999, 1e7], [-1, "1e300", "nan", "x", ""]),
    "scheduled_time": (["", 5000], [-1, "1e300", "nan", "x"]),
}
NODE_VALUES: dict[str, tuple[list[object], list[object]]] = {
    "gpu": ([1, 8, 16], [-1, 1.5, "1e9", "1e300", "x", "", 100000, 300, "nan"]),
    "model": (["A10", "G1"], ["H900", "", "v100"]),
    "sn": (["node-x"], ["", "n1"]),  # n1: duplicate name
}


def _openb_pod_case(rng: random.Random) -> Case:
    argv = [*SIM, "--format", "openb", "--trace", "{d}/pods.csv", "--cluster", "{d}/nodes.csv"]
    nodes = _csv(NODE_HEADER, NODE_ROWS)
    if rng.random() < 0.3:
        return _trace_text_case(rng, "trace-openb", _csv(POD_HEADER, POD_ROWS), argv, "pods.csv", {"nodes.csv": nodes})
    rows = [list(r) for r in POD_ROWS]
    column = rng.choice(list(POD_VALUES))
    good, bad = POD_VALUES[column]
    invalid = rng.random() < INVALID_SHARE
    value = rng.choice(bad if invalid else good)
    row = rng.randrange(len(rows))
    if column == "gpu_milli":
        rows[row][POD_HEADER.index("num_gpu")] = 1
    label = "invalid" if invalid else "valid"
    if column == "scheduled_time" and value == 5000:
        rows[row][POD_HEADER.index("creation_time")] = 0
        rows[row][POD_HEADER.index("deletion_time")] = 9000
    if column == "creation_time" and not invalid:
        rows[row][POD_HEADER.index("scheduled_time")] = value
        rows[row][POD_HEADER.index("deletion_time")] = float(value) + 100
    if column == "deletion_time" and not invalid:
        rows[row][POD_HEADER.index("scheduled_time")] = 1000
    if column == "num_gpu" and value == 0:
        label = "valid"
    rows[row][POD_HEADER.index(column)] = value
    if rng.random() < 0.15:  # scheduled before creation (a pod cannot start before it exists)
        rows[row] = list(POD_ROWS[row])
        rows[row][POD_HEADER.index("creation_time")] = 500
        rows[row][POD_HEADER.index("scheduled_time")] = 400
        rows[row][POD_HEADER.index("deletion_time")] = 900
        label, value, column = "invalid", "scheduled<creation", "scheduled_time"
    return Case("trace-openb", argv, {"pods.csv": _csv(POD_HEADER, rows), "nodes.csv": nodes}, label,
                f"{column}={value!r}")


def _openb_node_case(rng: random.Random) -> Case:
    argv = [*SIM, "--format", "openb", "--trace", "{d}/pods.csv", "--cluster", "{d}/nodes.csv"]
    pods = _csv(POD_HEADER, POD_ROWS)
    if rng.random() < 0.3:
        return _trace_text_case(rng, "openb-nodes", _csv(NODE_HEADER, NODE_ROWS), argv, "nodes.csv", {"pods.csv": pods})
    rows = [list(r) for r in NODE_ROWS]
    column = rng.choice(list(NODE_VALUES))
    good, bad = NODE_VALUES[column]
    invalid = rng.random() < INVALID_SHARE
    value = rng.choice(bad if invalid else good)
    row = rng.randrange(3)  # a GPU node
    label = "invalid" if invalid else "valid"
    if column == "model" and value == "":
        row = 3
        label = "valid"  # a node without GPUs carries no model
    rows[row][NODE_HEADER.index(column)] = value
    if column == "sn" and value == "n1" and row == 1:
        rows[row][0] = "n1"
        rows[0][0] = "n1"
    if column == "gpu" and value == 1 and row == 1:
        label = "warn"  # pod-2 asks for 2 x T4: larger than a 1-GPU T4 node, rejected with a warning
    return Case("openb-nodes", argv, {"pods.csv": pods, "nodes.csv": _csv(NODE_HEADER, rows)}, label,
                f"{column}={value!r}")


CLUSTER_YAML = """inter_node_gbps: 12.5
gpu_types:
  MyGPU: {memory_mib: 20000, speed: 1.5}
nodes:
  - {name: a, count: 2, gpu_type: V100, gpus: 8, intra_link: nvlink}
  - {name: b, gpu_type: MyGPU, gpus: 4, intra_link: pcie}
"""
YAML_VALUES: dict[str, tuple[list[str], list[str]]] = {
    "gpus": (["1", "16"], ["0", "-1", "1e9", "10000000", "1000", "x", "1.5", "true", "null", "[8]", ".nan", "2e0"]),
    "count": (["1", "100"], ["0", "-3", "1000000", "x", "2.5", "true"]),
    "gpu_type": (["A100-80GB", "MyGPU"], ["Z999", "''", "1", "[V100]"]),
    "intra_link": (["pcie"], ["warp", "1", "''"]),
    "memory_mib": (["16384", "81920"], ["0", "-1", "1e12", "x", ".inf", "1000000000000", "true"]),
    "speed": (["0.5", "3"], ["0", "-1", ".nan", ".inf", "1e6", "x", "true"]),
    "inter_node_gbps": (["1", "400"], ["0", "-1", ".nan", ".inf", "1e9", "x"]),
    "name": (["node-x"], ["''", "[a]", "1", "{x: 1}"]),
}


def _cluster_case(rng: random.Random) -> Case:
    argv = [*SIM, "--cluster", "{d}/c.yaml", "--trace", "{d}/t.csv"]
    roll = rng.random()
    if roll < 0.35:
        choice = rng.choice(["deep", "dup_key", "dup_node_key", "unknown_key", "non_utf8", "bom", "tabs", "empty",
                             "alias_bomb", "list_top", "huge_doc", "multi_doc", "utf16", "nul"])
        text = CLUSTER_YAML.encode()
        label = "invalid"
        if choice == "deep":
            depth = rng.choice([1000, 10000, 100000])
            data = b"nodes: " + b"[" * depth + b"]" * depth + b"\n"
        elif choice == "dup_key":
            data = text + b"inter_node_gbps: 100\n"
        elif choice == "dup_node_key":
            data = text.replace(b"gpus: 8,", b"gpus: 8, gpus: 1,")
        elif choice == "unknown_key":
            data = text + b"nodez: []\n"
        elif choice == "non_utf8":
            data = text.replace(b"name: a", b"name: \xff\xfe")
        elif choice == "bom":
            data, label = b"\xef\xbb\xbf" + text, "valid"
        elif choice == "tabs":
            data = text.replace(b"  - ", b"\t- ")
        elif choice == "empty":
            data = rng.choice([b"", b"# nothing\n", b"---\n"])
        elif choice == "alias_bomb":
            data = (b"a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
                    b"c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
                    b"nodes: [*d, *d, *d, *d, *d, *d, *d, *d, *d]\n")
        elif choice == "list_top":
            data = b"- a\n- b\n"
        elif choice == "huge_doc":
            data = b"nodes:\n  - {name: n, gpu_type: V100, gpus: 8}\n# " + b"x" * 9_000_000 + b"\n"
            label = "valid"  # large, but under the 64 MiB limit for configuration files
        elif choice == "multi_doc":
            data = text + b"---\n" + text
        elif choice == "utf16":
            data = CLUSTER_YAML.encode("utf-16")
        else:
            data = text.replace(b"name: a", b"name: a\x00")
        return Case("cluster-yaml", argv, {"c.yaml": data, "t.csv": SMALL_TRACE}, label, choice)
    if roll < 0.45:
        data, label, note = _text_damage(rng, CLUSTER_YAML.encode(), "yaml")
        return Case("cluster-yaml", argv, {"c.yaml": data, "t.csv": SMALL_TRACE}, "any" if label != "valid" else "valid",
                    note)
    key = rng.choice(list(YAML_VALUES))
    good, bad = YAML_VALUES[key]
    invalid = rng.random() < INVALID_SHARE
    value = rng.choice(bad if invalid else good)
    text = CLUSTER_YAML
    if key in ("gpus", "count", "gpu_type", "intra_link", "name"):
        old = {"gpus": "gpus: 8", "count": "count: 2", "gpu_type": "gpu_type: V100", "intra_link": "intra_link: nvlink",
               "name": "name: a"}[key]
        text = text.replace(old, f"{key}: {value}", 1)
    elif key in ("memory_mib", "speed"):
        text = text.replace(f"{key}: {'20000' if key == 'memory_mib' else '1.5'}", f"{key}: {value}")
    else:
        text = text.replace("inter_node_gbps: 12.5", f"inter_node_gbps: {value}")
    return Case("cluster-yaml", argv, {"c.yaml": text.encode(), "t.csv": SMALL_TRACE}, "invalid" if invalid else "valid",
                f"{key}={value}")


# Gavel: synthetic throughputs (made up here, not the measured file)
GAVEL_TYPES = ["ResNet-18 (batch size 64)", "ResNet-50 (batch size 64)", "Transformer (batch size 64)",
               "LM (batch size 20)", "Recommendation (batch size 512)", "A3C", "CycleGAN"]


def gavel_document(seed: int = 0) -> dict[str, object]:
    """A small Gavel-layout document with made-up, plausible numbers (deterministic by seed)."""
    rng = random.Random(seed)
    doc: dict[str, object] = {}
    for gpu, speed in (("v100", 1.0), ("p100", 0.7), ("k80", 0.25)):
        table: dict[str, object] = {}
        solo = {t: round(speed * rng.uniform(2, 20), 4) for t in GAVEL_TYPES}
        for t in GAVEL_TYPES:
            entry: dict[str, object] = {"null": solo[t]}
            for o in GAVEL_TYPES:
                a, b = rng.uniform(0.3, 1.0), rng.uniform(0.3, 1.0)
                entry[str((o, 1))] = [round(solo[t] * a, 4), round(solo[o] * b, 4)]
            table[str((t, 1))] = entry
            table[str((t, 2))] = {"null": round(solo[t] * 1.8, 4)}
        doc[gpu] = table
    return doc


GAVEL_COMMANDS: dict[str, list[str]] = {
    "simulate": [*SIM, "--truth", "gavel", "--gavel", "{d}/g.json", "--trace", "{d}/t.csv"],
    "truth-fit": ["truth", "fit", "--gavel", "{d}/g.json"],
    "interference-train": ["interference", "train", "--gavel", "{d}/g.json", "--out", "{d}/model", "--folds", "2",
                           "--model", "iapp"],
    "interference-evaluate": ["interference", "evaluate", "--gavel", "{d}/g.json", "--protocol", "random", "--folds",
                              "2", "--models", "iapp"],
    "colocation-analyze": ["colocation", "analyze", "--gavel", "{d}/g.json"],
}
SMALL_TRACE = _csv(["job_id", "submit_time", "num_gpus", "model", "batch_size", "iterations"],
                   [["j1", 0, 1, "", "", 100], ["j2", 5, 2, "", "", 200]])


def _gavel_mutation(rng: random.Random, doc: dict) -> tuple[bytes, str, str]:
    v100 = doc["v100"]
    key = str((GAVEL_TYPES[1], 1))
    other = str((GAVEL_TYPES[3], 1))
    choice = rng.choice(["non_utf8", "utf16", "bom", "deep", "dup_key", "gpu_list", "null_zero", "null_true",
                         "null_neg", "null_nan", "null_str", "null_inf", "scale_float", "scale_bool", "scale_zero",
                         "no_batch", "unknown_type", "unknown_partner", "pair_1000x", "pair_negative", "pair_three",
                         "pair_str", "bad_key", "entry_list", "missing_null", "top_list", "no_gpu", "huge_number",
                         "pair_unmeasured_partner", "empty", "valid", "valid", "partner_scale2", "null_big_int",
                         "pair_zero", "both_at_solo"])
    label = "invalid"
    if choice == "non_utf8":
        return json.dumps(doc).encode().replace(b"ResNet-50", b"ResNet\xff50", 1), label, choice
    if choice == "utf16":
        return json.dumps(doc).encode("utf-16"), label, choice
    if choice == "bom":
        return b"\xef\xbb\xbf" + json.dumps(doc).encode(), "valid", choice
    if choice == "deep":
        depth = rng.choice([1000, 100_000])
        return b'{"v100": ' + b"[" * depth + b"]" * depth + b"}", label, choice
    if choice == "dup_key":
        text = json.dumps(doc)
        return text.replace('{"v100": {', '{"v100": {"null": 1}, "v100": {', 1).encode(), label, choice
    if choice == "empty":
        return rng.choice([b"", b"{}", b"null", b"[]"]), label, choice
    if choice == "top_list":
        return json.dumps([doc]).encode(), label, choice
    if choice == "no_gpu":
        doc.pop("v100")
    elif choice == "gpu_list":
        doc["v100"] = [1, 2]
    elif choice == "entry_list":
        v100[key] = [1.0]
    elif choice == "missing_null":
        v100[key].pop("null")
    elif choice.startswith("null_"):
        value = {"null_zero": 0, "null_true": True, "null_neg": -1.0, "null_nan": float("nan"), "null_str": "1.0",
                 "null_inf": float("inf"), "null_big_int": 10**400}[choice]
        v100[key]["null"] = value
        if choice == "null_zero":
            label = "any"  # documented as an unmeasured solo (a quirk, counted)
    elif choice in ("scale_float", "scale_bool", "scale_zero"):
        scale = {"scale_float": 1.5, "scale_bool": True, "scale_zero": 0}[choice]
        v100[f"('{GAVEL_TYPES[0]}', {scale})"] = v100.pop(str((GAVEL_TYPES[0], 1)))
    elif choice == "no_batch":
        v100["('ResNet-50', 1)"] = v100.pop(key)
    elif choice == "unknown_type":
        v100["('VGG-99 (batch size 8)', 1)"] = {"null": 3.0}
    elif choice == "unknown_partner":
        v100[key]["('VGG-99 (batch size 8)', 1)"] = [1.0, 1.0]
    elif choice == "pair_unmeasured_partner":
        v100[key]["('ResNet-50 (batch size 32)', 1)"] = [1.0, 1.0]
    elif choice == "partner_scale2":
        v100[key][str((GAVEL_TYPES[0], 2))] = [1.0, 1.0]
        label = "any"
    elif choice == "pair_1000x":
        v100[key][other] = [v100[key]["null"] * 1000, 1.0]
    elif choice == "pair_negative":
        v100[key][other] = [-1.0, 1.0]
    elif choice == "pair_three":
        v100[key][other] = [1.0, 1.0, 1.0]
    elif choice == "pair_str":
        v100[key][other] = "fast"
    elif choice == "pair_zero":
        v100[key][other] = [0, 0]
        label = "valid"  # documented quirk: unmeasured, dropped and counted
    elif choice == "both_at_solo":
        v100[key][other] = [v100[key]["null"], v100[other]["null"]]
        label = "valid"
    elif choice == "bad_key":
        v100["ResNet-50 bs 64"] = v100.pop(key)
    elif choice == "huge_number":
        return json.dumps(doc).replace(str(v100[key]["null"]), "1" + "0" * 5000, 1).encode(), label, choice
    else:
        label = "valid"
    text = json.dumps(doc, allow_nan=True)
    return text.encode(), label, choice


def _gavel_case(rng: random.Random, command: str) -> Case:
    doc = gavel_document(rng.randrange(3))
    data, label, note = _gavel_mutation(rng, doc)
    files = {"g.json": data}
    if command == "simulate":
        files["t.csv"] = SMALL_TRACE
    return Case(f"gavel:{command}", list(GAVEL_COMMANDS[command]), files, label, note)


def _fixture(*parts: str) -> bytes:
    return (Path(__file__).resolve().parents[1] / "tests" / "fixtures" / Path(*parts)).read_bytes()


def _table_case(rng: random.Random, surface: str, good: bytes, argv: list[str], name: str,
                values: dict[str, tuple[list[object], list[object]]], extra: dict[str, bytes] | None = None) -> Case:
    if rng.random() < 0.35:
        data, label, note = _text_damage(rng, good, surface)
        return Case(surface, argv, {name: data, **(extra or {})}, label, note)
    lines = good.decode().rstrip("\n").split("\n")
    header = lines[0].split(",")
    rows = [line.split(",") for line in lines[1:]]
    column = rng.choice([c for c in values if c in header])
    ok, bad = values[column]
    invalid = rng.random() < INVALID_SHARE or not ok
    value = rng.choice(bad if invalid else ok)
    rows[rng.randrange(len(rows))][header.index(column)] = str(value)
    return Case(surface, argv, {name: _csv(header, rows), **(extra or {})}, "invalid" if invalid else "valid",
                f"{column}={value!r}")


COLOC_VALUES: dict[str, tuple[list[object], list[object]]] = {
    "normalized_throughput": ([0.5, 0.99], [-0.5, "inf", 1000, "x", "1e300", 1.6]),
    "set_size": ([], [0, -1, "x", 1.5, 99]),
    "batch_size": ([8], [0, -8, "x", 1.5, "1e300"]),
    "status": (["oom"], ["OK!", "", "maybe"]),
    "solo_util_mean": ([10, 99.5, "nan"], [-1, 101, 1e9, "x", "-inf"]),
    "repeat": ([], [-1, "x", 0.5]),
    "member": ([], [-1, "x", 7]),
}
PROFILE_VALUES: dict[str, tuple[list[object], list[object]]] = {
    "gpu_util_mean": ([0, 55.5, 100], [-1, 101, 1e9, "inf", "x"]),
    "torch_max_reserved_mib": ([0, 512, 4000], [-5, "inf", "1e300", "x"]),  # 0: a CPU run
    "iter_time_s_mean": ([0.01, 2], [0, -0.1, "1e300", "1e-300", "x"]),
    "batch_size": ([16], [0, -1, 1.5, "x", "1e300"]),
    "precision": (["amp"], ["fp8", "", "FP32"]),
    "status": (["oom", "error"], ["done", "OK"]),
}


def _coloc_case(rng: random.Random) -> Case:
    return _table_case(rng, "coloc-table", _fixture("coloc_synthetic", "colocation.csv"),
                       ["colocation", "analyze", "{d}/colocation.csv"], "colocation.csv", COLOC_VALUES)


def _profile_case(rng: random.Random) -> Case:
    good = _fixture("coloc_synthetic", "solo.csv")
    argv = ["profile", "plan-pairs", "--solo", "{d}/solo.csv", "--capacity-mib", "16000", "--pairs", "2",
            "--triples", "0", "--out", "{d}/plan.json"]
    return _table_case(rng, "profile-table", good, argv, "solo.csv", PROFILE_VALUES)


FEATURE_MODELS: tuple[list[str], list[str]] = (
    ["resnet18_cifar", "a3c", "graph_factory_fixture:make"],
    ["nonexistent", "os:getcwd", "json:loads", "builtins:print", "subprocess:getoutput", "a:b", ":", "os.path:",
     "missing.onnx", "../../etc/passwd.onnx", "", "graph_factory_fixture:not_a_model", "sys:exit",
     "graph_factory_fixture:", "horus.cli:main", "shutil:rmtree"])
FEATURE_OPTIONS: tuple[list[list[str]], list[list[str]]] = (
    [["--batch", "1"], ["--batch", "32"], ["--batch", "4", "--input-size", "32"]],
    [["--batch", "0"], ["--batch", "-1"], ["--batch", "99999999999999999999"], ["--batch", "1e3"],
     ["--batch", "10000000"], ["--batch", "4", "--input-size", "-1"], ["--batch", "4", "--input-size", "0"],
     ["--batch", "4", "--input-size", "100000000"], ["--batch", "x"]])


def _onnx_bytes(kind: str) -> bytes:
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    w = helper.make_tensor("w", TensorProto.FLOAT, [8, 4], [0.1] * 32)
    node = helper.make_node("MatMul", ["x", "w"], ["y"])
    if kind == "no_inputs":
        zeros = helper.make_tensor("c", TensorProto.FLOAT, [1, 4], [0] * 4)
        const = helper.make_node("Constant", [], ["y"], value=zeros)
        graph = helper.make_graph([const], "g", [], [y])
    elif kind == "no_nodes":
        graph = helper.make_graph([], "g", [x], [y])
    else:
        graph = helper.make_graph([node], "g", [x], [y], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def _features_case(rng: random.Random) -> Case:
    roll = rng.random()
    good_models, bad_models = FEATURE_MODELS
    good_opts, bad_opts = FEATURE_OPTIONS
    if roll < 0.3:
        kind = rng.choice(["good", "no_inputs", "no_nodes", "garbage", "truncated", "empty", "good"])
        if kind in ("good", "no_inputs", "no_nodes"):
            data = _onnx_bytes(kind)
        elif kind == "garbage":
            data = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 400)))
        elif kind == "truncated":
            full = _onnx_bytes("good")
            data = full[: rng.randrange(1, len(full) - 1)]
        else:
            data = b""
        label = "valid" if kind == "good" else ("any" if kind == "truncated" else "invalid")
        opts = rng.choice(good_opts) if kind != "good" or rng.random() < 0.6 else rng.choice(bad_opts)
        if kind == "good" and opts in bad_opts:
            label = "invalid"
        return Case("features", ["features", "{d}/m.onnx", *opts], {"m.onnx": data}, label, f"onnx:{kind} {opts}")
    if roll < 0.55:
        model, opts, label = rng.choice(good_models), rng.choice(bad_opts), "invalid"
    elif roll < 0.9:
        model, opts, label = rng.choice(bad_models), rng.choice(good_opts), "invalid"
    else:
        model, opts, label = rng.choice(good_models), rng.choice(good_opts), "valid"
    return Case("features", ["features", model, *opts], {}, label, f"{model} {opts}")


def _bad_json(rng: random.Random, good: object) -> tuple[bytes, str]:
    """A damaged JSON document (always outside the documented format)."""
    kind = rng.choice(["non_utf8", "deep", "dup", "not_object", "nan", "empty", "truncated", "wrong_type"])
    text = json.dumps(good)
    if kind == "non_utf8":
        return text.encode()[:-1] + b"\xff}", kind
    if kind == "deep":
        return b'{"a": ' + b"[" * rng.choice([100, 100_000]) + b"]" * 0 + b"}", kind
    if kind == "dup":
        return text.replace("{", '{"format_version": 0, ', 1).encode(), kind
    if kind == "not_object":
        return rng.choice([b"[]", b"1", b'"x"', b"null"]), kind
    if kind == "nan":
        return text.replace("{", '{"x": NaN, ', 1).encode(), kind
    if kind == "empty":
        return b"", kind
    if kind == "truncated":
        return text.encode()[: max(1, len(text) // 2)], kind
    return json.dumps({k: [v] for k, v in good.items()}).encode(), kind  # type: ignore[union-attr]


MODEL_DIR_COMMANDS: list[tuple[list[str], str]] = [
    ([*SIM, "--trace", "{d}/t.csv", "--predictor", "learned", "--predictor-dir", "{d}/m"], "predictor_sidecar.json"),
    (["predict", "resnet50", "--batch", "64", "--gpu", "V100", "--predictor-dir", "{d}/m"], "predictor_sidecar.json"),
    ([*SIM[:3], "geng", *SIM[4:], "--trace", "{d}/t.csv", "--interference-model", "{d}/m"], "model.json"),
    (["interference", "predict", "--model-dir", "{d}/m", "resnet50/b64", "lstm_lm/b20"], "model.json"),
]


def _model_dir_case(rng: random.Random) -> Case:
    argv, sidecar = rng.choice(MODEL_DIR_COMMANDS)
    good = {"format_version": 1, "model": "iasp", "targets": {"util": {"file": "util.joblib"}}}
    data, kind = _bad_json(rng, good)
    if sidecar == "predictor_sidecar.json":
        from horus.learn.persistence import SIDECAR
        sidecar = SIDECAR
    return Case("model-dir", list(argv), {"t.csv": SMALL_TRACE, f"m/{sidecar}": data}, "invalid", f"{sidecar}:{kind}")


CAMPAIGN_BAD: list[str] = [
    "solo: 5\n", "solo: [{model: resnet18_cifar, batch: 99999999999999999999}]\n",
    "solo: [{model: resnet18_cifar, batch: 8, repeats: 1000000000}]\n", "solo: [{model: a, batch: true}]\n",
    "solo: [{model: a, batch: 8, input_size: -1}]\n", "colocate: [{set: 'a:1'}]\n", "colocate: {set: x}\n",
    "x: &a [1]\nsolo: *a\n", "solo: []\nsolo: []\n", "solo: " + "[" * 5000 + "]" * 5000 + "\n", "nope: 1\n",
    "solo: [{model: a, batch: 8, precision: fp8}]\n", "- 1\n- 2\n",
]


def _campaign_case(rng: random.Random) -> Case:
    text = rng.choice(CAMPAIGN_BAD).encode()
    if rng.random() < 0.2:
        text = text.replace(b"solo", b"s\xffolo", 1)
    name = rng.choice(["c.yaml", "c.json"])
    if name == "c.json":
        try:
            import yaml
            doc = yaml.safe_load(text)
            text = json.dumps(doc).encode() if rng.random() < 0.7 else text
        except Exception:  # noqa: BLE001 - YAML-only damage stays as text (invalid JSON then)
            pass
    argv = ["profile", "--campaign", "{d}/" + name, "--device", "cpu", "--no-nvml", "--out", "{d}/out"]
    return Case("profile-campaign", argv, {name: text}, "invalid", text[:60].decode(errors="replace"))


OPTION_CASES: list[tuple[list[str], str]] = [
    (["simulate", "--seed", "-1"], "invalid"), (["simulate", "--seed", str(2**32)], "invalid"),
    (["simulate", "--seed", str(2**64)], "invalid"), (["simulate", "--seed", "7"], "valid"),
    (["simulate", "--max-jobs", "0"], "invalid"), (["simulate", "--max-jobs", "-1"], "invalid"),
    (["simulate", "--max-jobs", "5"], "valid"), (["simulate", "--max-jobs", "1e3"], "invalid"),
    (["simulate", "--format", "philly"], "invalid"), (["simulate", "--gavel", "{d}/t.csv"], "invalid"),
    (["simulate", "--predictor-dir", "{d}"], "invalid"), (["simulate", "--policy", "nope"], "invalid"),
    (["simulate", "--sampler", "nope"], "invalid"), (["simulate", "--truth", "nope"], "invalid"),
    (["simulate", "--predictor", "nope"], "invalid"), (["simulate", "--interference-model", "{d}"], "invalid"),
    (["simulate", "--trace", "{d}/missing.csv"], "invalid"), (["simulate", "--trace", "{d}"], "invalid"),
    (["simulate", "--cluster", "{d}"], "invalid"),
    (["simulate", "--format", "nope", "--trace", "{d}/t.csv"], "invalid"),
    (["simulate", "--truth", "gavel"], "invalid"), (["simulate", "--predictor", "learned"], "invalid"),
    (["simulate", "--predictor", "learned", "--predictor-dir", "{d}/missing"], "invalid"),
    (["simulate", "--trace", "{d}/t.csv", "--max-jobs", "1"], "valid"),
    (["interference", "train", "--gavel", "{d}/g.json", "--out", "{d}/m", "--folds", "100000"], "invalid"),
    (["interference", "train", "--gavel", "{d}/g.json", "--out", "{d}/m", "--folds", "-3"], "invalid"),
    (["interference", "train", "--gavel", "{d}/g.json", "--out", "{d}/m", "--seed", "-1"], "invalid"),
    (["interference", "evaluate", "--gavel", "{d}/g.json", "--folds", "100000", "--protocol", "random"], "invalid"),
    (["interference", "evaluate", "--gavel", "{d}/g.json", "--models", "nope", "--protocol", "random"], "invalid"),
    (["interference", "evaluate", "--gavel", "{d}/g.json", "--solo-predictor", "nope", "--protocol", "random"],
     "invalid"),
    (["truth", "fit", "--gavel", "{d}/g.json", "--seed", "-1"], "invalid"),
    (["truth", "fit", "--gavel", "{d}/g.json", "--gpu", "h100"], "invalid"),
    (["truth", "fit", "--gavel", "{d}/missing.json"], "invalid"),
    (["truth", "fit", "--gavel", "{d}/g.json", "--both-at-solo", "x"], "invalid"),
    (["colocation", "analyze", "--gavel", "{d}/g.json", "--top", "-1"], "invalid"),
    (["colocation", "analyze", "--gavel", "{d}/g.json", "--proxy", "nope"], "invalid"),
    (["colocation", "analyze", "--gavel", "{d}/g.json", "--gpu", "h100"], "invalid"),
    (["colocation", "analyze"], "invalid"),
    (["predict", "resnet50", "--batch", "0", "--gpu", "V100"], "invalid"),
    (["predict", "resnet50", "--batch", "99999999999999999999", "--gpu", "V100"], "invalid"),
    (["predict", "resnet50", "--batch", "64", "--gpu", "Z9"], "invalid"),
    (["predict", "nope", "--batch", "64", "--gpu", "V100"], "invalid"),
    (["predict", "resnet50", "--batch", "64", "--gpu", "V100"], "valid"),
    (["predictor", "evaluate", "{d}/missing.csv"], "invalid"),
    (["profile", "plan-pairs", "--solo", "{d}/t.csv", "--out", "{d}/p.json", "--capacity-mib", "-1"], "invalid"),
    (["nope"], "invalid"), ([], "invalid"), (["simulate", "--bogus"], "invalid"),
]


def _option_case(rng: random.Random) -> Case:
    argv, label = rng.choice(OPTION_CASES)
    argv = list(argv)
    files = {"t.csv": SMALL_TRACE, "g.json": json.dumps(gavel_document(0)).encode(), "file": b"x"}
    if argv and argv[0] == "simulate":
        if "--out" not in argv:
            argv += ["--out", rng.choice(["{d}/out", "{d}/out", "{d}/file", "{d}/file/sub"])]
            if argv[-1] != "{d}/out":
                label = "invalid"
        argv += ["--no-progress", "--policy", "fifo-exclusive"]
        if "--trace" not in argv and label == "valid":
            argv += ["--trace", "{d}/t.csv"]
    return Case("options", argv, files, label, " ".join(argv))


SURFACES: dict[str, tuple[float, Callable[[random.Random], Case]]] = {
    "trace-horus": (0.2, _horus_case),
    "trace-philly": (0.08, _philly_case),
    "trace-openb": (0.08, _openb_pod_case),
    "openb-nodes": (0.08, _openb_node_case),
    "cluster-yaml": (0.14, _cluster_case),
    "gavel:simulate": (0.04, lambda r: _gavel_case(r, "simulate")),
    "gavel:truth-fit": (0.06, lambda r: _gavel_case(r, "truth-fit")),
    "gavel:interference-train": (0.04, lambda r: _gavel_case(r, "interference-train")),
    "gavel:interference-evaluate": (0.03, lambda r: _gavel_case(r, "interference-evaluate")),
    "gavel:colocation-analyze": (0.06, lambda r: _gavel_case(r, "colocation-analyze")),
    "coloc-table": (0.05, _coloc_case),
    "profile-table": (0.04, _profile_case),
    "features": (0.04, _features_case),
    "options": (0.06, _option_case),
    "model-dir": (0.02, _model_dir_case),
    "profile-campaign": (0.02, _campaign_case),
}


def generate(n: int, seed: int, only: str | None = None) -> Iterator[Case]:
    rng = random.Random(seed)
    names = [s for s in SURFACES if only is None or s.startswith(only)]
    weights = [SURFACES[s][0] for s in names]
    for _ in range(n):
        yield SURFACES[rng.choices(names, weights)[0]][1](rng)


# ----------------------------------------------------------------------------------------------------------
# running


def run_case(case: Case, root: Path) -> dict[str, object]:
    """Run one case in-process in a fresh directory under ``root``; classify the outcome."""
    from horus.cli import main

    d = Path(tempfile.mkdtemp(dir=root))
    for name, data in case.files.items():
        (d / name).parent.mkdir(parents=True, exist_ok=True)
        (d / name).write_bytes(data)
    before = {p.relative_to(d) for p in d.rglob("*")}
    argv = [a.replace("{d}", str(d)) for a in case.argv]
    out, err = io.StringIO(), io.StringIO()
    exc_text = ""
    old_cwd = os.getcwd()
    os.chdir(d)
    start = time.perf_counter()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = main(argv)
            except SystemExit as exc:
                rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException as exc:  # noqa: BLE001 - everything escaping main is a finding
        rc = None
        exc_text = "".join(traceback.format_exception_only(type(exc), exc)).strip().splitlines()[-1][:300]
    finally:
        os.chdir(old_cwd)
    wall = time.perf_counter() - start
    after = {p.relative_to(d) for p in d.rglob("*")}
    stderr = err.getvalue()
    lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
    last = lines[-1] if lines else ""
    if rc is None or "Traceback (most recent call last)" in stderr:
        cls = "traceback"
    elif rc == 0:
        warned = "horus: warning:" in stderr
        if case.label == "invalid" or (case.label == "warn" and not warned):
            cls = "silently_accepted"
        else:
            cls = "accepted"
    elif rc == 2 and (last.startswith("horus: error:") or " error: " in last or last.startswith("usage:")):
        cls = "false_rejection" if case.label == "valid" else "clear_error"
    else:
        cls = "traceback"  # another exit code, or no clear one-line message
        exc_text = exc_text or f"exit {rc}: {last[:200]}"
    wrote = bool(after - before) and rc != 0
    shutil.rmtree(d, ignore_errors=True)
    return {"surface": case.surface, "label": case.label, "note": case.note[:200], "class": cls, "rc": rc,
            "wrote_on_failure": wrote, "message": (exc_text or last)[:300], "wall_s": round(wall, 3),
            "argv": case.argv[:12]}


def _worker(conn: object, root: str, memory_gib: float) -> None:
    if memory_gib > 0:
        limit = int(memory_gib * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 1000))
    import horus.cli  # noqa: F401  (import once per worker)

    with contextlib.suppress(ImportError):  # warm worker: torch's import (seconds) is not charged to one case
        import torch  # noqa: F401

    while True:
        case = conn.recv()  # type: ignore[attr-defined]
        if case is None:
            return
        conn.send(run_case(case, Path(root)))  # type: ignore[attr-defined]


class Pool:
    """Workers fed one case at a time; a case that takes longer than ``timeout`` kills its worker."""

    def __init__(self, workers: int, root: Path, timeout: float, memory_gib: float) -> None:
        self.ctx = mp.get_context("fork")
        self.root, self.timeout, self.memory_gib = root, timeout, memory_gib
        self.slots = [self._spawn() for _ in range(workers)]

    def _spawn(self) -> dict[str, object]:
        parent, child = self.ctx.Pipe()
        proc = self.ctx.Process(target=_worker, args=(child, str(self.root), self.memory_gib), daemon=True)
        proc.start()
        return {"proc": proc, "conn": parent, "case": None, "since": 0.0}

    def run(self, cases: Iterator[Case], on_result: Callable[[dict[str, object]], None]) -> None:
        pending = iter(cases)
        exhausted = False
        while True:
            for i, slot in enumerate(self.slots):
                if slot["case"] is None and not exhausted:
                    case = next(pending, None)
                    if case is None:
                        exhausted = True
                        continue
                    slot["conn"].send(case)  # type: ignore[attr-defined]
                    slot["case"], slot["since"] = case, time.monotonic()
            busy = [s for s in self.slots if s["case"] is not None]
            if not busy and exhausted:
                break
            for i, slot in enumerate(self.slots):
                if slot["case"] is None:
                    continue
                conn, proc = slot["conn"], slot["proc"]
                if conn.poll(0.01):  # type: ignore[attr-defined]
                    try:
                        on_result(conn.recv())  # type: ignore[attr-defined]
                        slot["case"] = None
                        continue
                    except EOFError:
                        pass
                dead = not proc.is_alive()  # type: ignore[attr-defined]
                late = time.monotonic() - float(slot["since"]) > self.timeout  # type: ignore[arg-type]
                if dead or late:
                    case: Case = slot["case"]  # type: ignore[assignment]
                    proc.kill()  # type: ignore[attr-defined]
                    proc.join()  # type: ignore[attr-defined]
                    why = "timeout" if late else f"worker died (exit {proc.exitcode})"  # type: ignore[attr-defined]
                    on_result({"surface": case.surface, "label": case.label, "note": case.note[:200],
                               "class": "hang", "rc": None, "wrote_on_failure": False, "message": why,
                               "wall_s": round(time.monotonic() - float(slot["since"]), 3),  # type: ignore[arg-type]
                               "argv": case.argv[:12]})
                    self.slots[i] = self._spawn()

    def close(self) -> None:
        for slot in self.slots:
            try:
                slot["conn"].send(None)  # type: ignore[attr-defined]
            except (BrokenPipeError, OSError):
                pass
            slot["proc"].join(timeout=5)  # type: ignore[attr-defined]


CLASSES = ("clear_error", "traceback", "hang", "silently_accepted", "accepted", "false_rejection")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per case before it counts as a hang")
    parser.add_argument("--memory-gib", type=float, default=6.0, help="address-space limit per worker (0: none)")
    parser.add_argument("--only", help="only surfaces starting with this name")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/fuzz_inputs.json"))
    parser.add_argument("--examples", type=int, default=3, help="examples kept per (surface, class) of a finding")
    args = parser.parse_args(argv)

    results: list[dict[str, object]] = []
    start = time.time()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    live = args.out.with_suffix(".findings.jsonl").open("w")  # findings as they happen (long runs)

    def on_result(result: dict[str, object]) -> None:
        results.append(result)
        if result["class"] in ("traceback", "hang", "silently_accepted", "false_rejection") \
                or result["wrote_on_failure"]:
            live.write(json.dumps(result, default=str) + "\n")
            live.flush()
        if len(results) % 500 == 0:
            print(f"{len(results)} cases, {time.time() - start:.0f} s: "
                  f"{dict(Counter(r['class'] for r in results))}", file=sys.stderr, flush=True)

    with tempfile.TemporaryDirectory(prefix="horus-fuzz-") as root:
        pool = Pool(args.workers, Path(root), args.timeout, args.memory_gib)
        try:
            pool.run(generate(args.cases, args.seed, args.only), on_result)
        finally:
            pool.close()

    live.close()
    totals = Counter(r["class"] for r in results)
    per_surface: dict[str, Counter] = {}
    for r in results:
        per_surface.setdefault(str(r["surface"]), Counter())[str(r["class"])] += 1
    findings: dict[str, list[dict[str, object]]] = {}
    for r in results:
        if r["class"] in ("traceback", "hang", "silently_accepted", "false_rejection") or r["wrote_on_failure"]:
            key = f"{r['surface']}/{r['class']}" + ("/wrote_on_failure" if r["wrote_on_failure"] else "")
            if len(findings.setdefault(key, [])) < args.examples:
                findings[key].append(r)
    report = {
        "command": " ".join(["python", "benchmarks/fuzz_inputs.py", *(argv if argv is not None else sys.argv[1:])]),
        "cases": len(results), "seed": args.seed, "workers": args.workers, "timeout_s": args.timeout,
        "memory_gib": args.memory_gib, "wall_s": round(time.time() - start, 1),
        "totals": {c: totals.get(c, 0) for c in CLASSES},
        "wrote_on_failure": sum(1 for r in results if r["wrote_on_failure"]),
        "labels": dict(Counter(str(r["label"]) for r in results)),
        "per_surface": {s: {c: n for c, n in sorted(counts.items())} for s, counts in sorted(per_surface.items())},
        "wall_s_per_surface": {s: round(sum(float(r["wall_s"]) for r in results if r["surface"] == s), 1)
                               for s in sorted(per_surface)},
        "distinct_tracebacks": sorted({str(r["message"]) for r in results if r["class"] == "traceback"})[:100],
        "findings": findings,
        "platform": platform.platform(), "python": sys.version.split()[0],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1, default=str) + "\n")
    print(json.dumps({k: report[k] for k in ("cases", "wall_s", "totals", "wrote_on_failure")}))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # graph_factory_fixture for features
    raise SystemExit(main())
