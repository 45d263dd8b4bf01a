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
import math
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


# ----------------------------------------------------------------------------------------------------------
# the CLI tree: every (sub)command and option, read from horus.cli.build_parser(); cases derived from it


@dataclass
class OptionSpec:
    """One argparse action of a command, as the fuzzer sees it."""

    flag: str  # "--seed", or the dest of a positional
    positional: bool
    action: str  # store | append | store_true | store_false | store_const | count
    type_name: str  # NumberArg | int | float | Path | str
    domain: object | None  # a validation.Domain when type is a NumberArg
    choices: list[str] | None
    nargs: object
    default: object
    required: bool
    metavar: object
    help: str
    role: str  # number | choice | flag | input | output | string

    def describe(self) -> dict[str, object]:
        domain = self.domain
        return {"option": self.flag, "action": self.action, "type": self.type_name, "role": self.role,
                "domain": None if domain is None else [domain.low, domain.high, domain.integer],  # type: ignore
                "choices": self.choices, "nargs": self.nargs, "required": self.required,
                "default": repr(self.default)[:60]}


@dataclass
class CommandSpec:
    path: tuple[str, ...]  # ("trace", "generate")
    options: list[OptionSpec]
    pass_through: bool = False  # its options belong to an inner parser found by calling its func
    inner_gap: str = ""  # why an inner parser could not be read

    @property
    def name(self) -> str:
        return " ".join(self.path)


OUTPUT_WORDS = ("out", "output", "write", "checkpoint-dir", "workdir", "state-dir")
PATH_WORDS = ("dir", "file", "path", "trace", "cluster", "gavel", "profiles", "colocation", "solo", "campaign",
              "onnx", "reference", "kubeconfig", "source", "data", "datasets", "gpumemnet",
              "params", "workdir")


def _role(flag: str, action: argparse.Action) -> str:
    """number / choice / flag / input / output / string, from what the action declares (names for paths)."""
    if action.nargs == 0:
        return "flag"
    if hasattr(action.type, "domain") or action.type in (int, float):
        return "number"
    if action.choices:
        return "choice"
    name = flag.lstrip("-").lower()
    words = f"{name} {action.metavar or ''} {action.help or ''}".lower()
    type_name = getattr(action.type, "__name__", "")
    last = name.split("-")[-1]  # "predictor-dir" is a path, "solo-predictor" is not
    path_like = (action.type is Path or "path" in type_name or name == "out" or name.startswith("tls-")
                 or last in PATH_WORDS or name in PATH_WORDS
                 or str(action.metavar) in ("PATH", "DIR", "FILE", "SWEEP", "DATA"))
    if not path_like:
        return "string"
    if name.startswith(("out", "write")) or any(name == w or name.startswith(w) for w in OUTPUT_WORDS) \
            or "output" in words.split("(")[0]:
        return "output"
    return "input"


def _options(parser: argparse.ArgumentParser) -> list[OptionSpec]:
    specs = []
    for a in parser._actions:
        if isinstance(a, (argparse._HelpAction, argparse._VersionAction, argparse._SubParsersAction)):
            continue
        positional = not a.option_strings
        flag = a.dest if positional else max(a.option_strings, key=len)
        kind = type(a).__name__.strip("_").replace("Action", "").lower() or "store"
        kind = {"store": "store", "append": "append", "storetrue": "store_true", "storefalse": "store_false",
                "storeconst": "store_const", "count": "count", "appendconst": "store_const"}.get(kind, kind)
        if hasattr(a.type, "domain"):
            type_name = "NumberArg"
        elif a.type in (int, float):
            type_name = a.type.__name__
        elif a.type is Path:
            type_name = "Path"
        else:
            type_name = "str" if a.type is None else getattr(a.type, "__name__", str(a.type))
        specs.append(OptionSpec(flag, positional, kind, type_name, getattr(a.type, "domain", None),
                                [str(c) for c in a.choices] if a.choices else None, a.nargs, a.default, a.required,
                                a.metavar, a.help or "", _role(flag, a)))
    return specs


class _Captured(Exception):
    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self.parser = parser


def _inner_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser | None:
    """The parser a pass-through command hands its arguments to: call its ``func`` with no arguments while
    ``ArgumentParser.parse_args``/``parse_known_args`` raise with the parser they were called on."""
    func = parser.get_default("func")
    if func is None:
        return None
    saved = argparse.ArgumentParser.parse_args, argparse.ArgumentParser.parse_known_args

    def capture(self: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        raise _Captured(self)

    argparse.ArgumentParser.parse_args = capture  # type: ignore[method-assign,assignment]
    argparse.ArgumentParser.parse_known_args = capture  # type: ignore[method-assign,assignment]
    try:
        func(argparse.Namespace(rest=[], command=None))
    except _Captured as got:
        return got.parser
    except BaseException:  # noqa: BLE001 - a func that works before parsing: its inner parser stays unknown
        return None
    finally:
        argparse.ArgumentParser.parse_args, argparse.ArgumentParser.parse_known_args = saved
    return None


def cli_tree(parser: argparse.ArgumentParser | None = None) -> list[CommandSpec]:
    """Every runnable (sub)command of ``horus`` with its options (pass-through commands: the inner parser's)."""
    if parser is None:
        from horus.cli import build_parser

        parser = build_parser()
    commands: list[CommandSpec] = []

    def walk(p: argparse.ArgumentParser, path: tuple[str, ...]) -> None:
        subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
        if path and p.get_default("func") is not None:
            if p.get_default("pass_through"):
                inner = _inner_parser(p)
                commands.append(CommandSpec(path, _options(inner) if inner else [], True,
                                            "" if inner else "its func does not call an ArgumentParser first"))
            else:
                commands.append(CommandSpec(path, _options(p)))
        for s in subs:
            seen: set[int] = set()
            for name, sp in s.choices.items():
                if id(sp) not in seen:  # aliases share a parser
                    seen.add(id(sp))
                    walk(sp, (*path, name))

    walk(parser, ())
    return commands


# Baselines: arguments known to work for a command ({f}: the campaign's fixture directory, prepared once;
# {d}: the case's own directory; {port}: a free local port). "expect" is "ok" (exit 0), "error" (ends in
# a known clear error: clients against an unreachable server, whose options must be checked before the
# connection), or "serve" (a server: running past the case's --serve-timeout counts as started = exit 0).
# A command without an entry gets its required options filled from what the tree declares.
UNREACHABLE = "http://127.0.0.1:9"
CLIENT = {"--server": UNREACHABLE, "--token-file": "{f}/token"}


@dataclass
class Baseline:
    args: dict[str, object]  # option (or positional dest) -> value (str, list of str, or True for a flag)
    expect: str = "ok"
    companions: dict[tuple[str, str], dict[str, object]] = field(default_factory=dict)  # (option, value) -> extra


SIM_BASE = {"--no-progress": True, "--policy": "fifo-exclusive", "--trace": "{f}/trace.csv", "--out": "{d}/out"}
BASELINES: dict[str, Baseline] = {
    "simulate": Baseline(dict(SIM_BASE), companions={
        ("--truth", "gavel"): {"--gavel": "{f}/g.json"},
        ("--truth", "measured"): {"--profiles": "{f}/m_solo.csv", "--colocation": "{f}/m_coloc.csv",
                                  "--trace": "{f}/m_trace.csv"},
        ("--format", "philly"): {"--trace": "{f}/philly.csv"},
        ("--format", "openb"): {"--trace": "{f}/pods.csv", "--cluster": "{f}/nodes.csv"},
        ("--predictor", "learned"): {"--predictor-dir": "{f}/learned"},
        ("--policy", "geng"): {"--interference-model": "{f}/imodel"}}),
    "truth fit": Baseline({"--gavel": "{f}/g.json"}),
    # GPUMemNet's and the reference measurements are not shippable: these end in "file not found" (after the
    # option checks), like the clients below
    "truth fit-memory": Baseline({"--gpumemnet": "{f}/gpumemnet"}, expect="error"),
    "trace generate": Baseline({"--jobs": "20", "--out": "{d}/trace.csv"}),
    "features": Baseline({"model": "resnet18_cifar", "--batch": "1"}),
    "predictor train": Baseline({"data": "{f}/profiles.csv", "--folds": "2", "--candidates": "mean,ridge",
                                 "--out": "{d}/learned"}),
    "predictor evaluate": Baseline({"data": "{f}/profiles.csv", "--folds": "2", "--candidates": "mean,ridge"}),
    "predictor calibrate": Baseline({"--reference": "{f}/reference"}, expect="error"),
    "predict": Baseline({"model": "resnet50", "--batch": "64", "--gpu": "V100"}),
    "profile": Baseline({"--device": "cpu", "--no-nvml": True, "--model": "resnet18_cifar", "--batch": "2",
                         "--warmup-iters": "0", "--warmup-s": "0", "--window-s": "0.2", "--out": "{d}/prof"}),
    "profile colocate": Baseline({"--device": "cpu", "--no-nvml": True, "--set": "resnet18_cifar:2,a3c:4",
                                  "--warmup-iters": "0", "--warmup-s": "0", "--window-s": "0.2",
                                  "--out": "{d}/coloc"}),
    "profile plan-pairs": Baseline({"--solo": "{f}/m_solo.csv", "--pairs": "2", "--triples": "0",
                                    "--capacity-mib": "16000", "--out": "{d}/plan.json"}),
    "train": Baseline({"model": "resnet18_cifar", "--batch-size": "2", "--iterations": "1", "--device": "cpu",
                       "--checkpoint-dir": "{d}/ckpt"}),
    "colocation analyze": Baseline({"data": "{f}/coloc_fixture.csv"},
                                   companions={("--proxy", "solo"): {"--solo": "{f}/coloc_solo.csv"}}),
    "interference train": Baseline({"--gavel": "{f}/g.json", "--model": "iapp", "--folds": "2",
                                    "--out": "{d}/imodel"}),
    "interference evaluate": Baseline({"--gavel": "{f}/g.json", "--protocol": "random", "--folds": "2",
                                       "--models": "iapp"}),
    "interference predict": Baseline({"--model-dir": "{f}/imodel", "job_types": ["resnet50/b64", "lstm_lm/b20"]}),
    "serve": Baseline({"--state-dir": "{d}/state", "--port": "{port}", "--fake-gpus": "1", "--log-level": "error"},
                      expect="serve"),
    "agent": Baseline({"--server": UNREACHABLE, "--token-file": "{f}/token", "--workdir": "{d}/agent",
                       "--fake-gpus": "1", "--heartbeat-s": "0.5"}, expect="serve"),
    "submit": Baseline({**CLIENT, "--model": "resnet18_cifar", "--batch-size": "8", "command": ["true"]},
                       expect="error"),
    "jobs": Baseline(dict(CLIENT), expect="error"),
    "job": Baseline({**CLIENT, "job_id": "1"}, expect="error"),
    "cancel": Baseline({**CLIENT, "job_id": "1"}, expect="error"),
    "top": Baseline({**CLIENT, "--once": True}, expect="error"),
    "queue create": Baseline({**CLIENT, "name": "team-a", "--guaranteed": "2"}, expect="error"),
    "queue list": Baseline(dict(CLIENT), expect="error"),
    "queue delete": Baseline({**CLIENT, "name": "team-a"}, expect="error"),
    "priority-class create": Baseline({**CLIENT, "name": "high", "--value": "10"}, expect="error"),
    "priority-class list": Baseline(dict(CLIENT), expect="error"),
    "priority-class delete": Baseline({**CLIENT, "name": "high"}, expect="error"),
    "token create": Baseline({"--name": "fuzz", "--role": "user", "--state-dir": "{d}/state",
                              "--out": "{d}/tok"}),
    "token list": Baseline({"--state-dir": "{f}/state"}),
    "token revoke": Baseline({"name": "fuzz-setup", "--state-dir": "{d}/state"}),
    "sweep": Baseline({"--no-ray": True, "--policy": "fifo-exclusive", "--trace": "{f}/trace.csv", "--max-jobs": "5",
                       "--out": "{d}/sweep"}),
    "sweep-report": Baseline({"source": "{f}/sweep", "--out": "{d}/report"}),
    # the extender lists the API server before it listens: unreachable, it ends in a known clear error
    "k8s-extender": Baseline({"--port": "{port}", "--log-level": "error", "--api-server": UNREACHABLE}, expect="error"),
}
# Commands whose baseline copies a prepared state ({f}/state) into the case directory first.
COPY_STATE = ("token create", "token revoke", "serve")


def prepare_fixtures(f: Path, commands: list[CommandSpec] | None = None) -> dict[str, str]:
    """Write the baselines' input files into ``f`` and run the setup commands (subprocesses) that make model
    directories, a state store and a sweep; returns {what: error} for setups that failed (their commands'
    baselines then fail too and are reported as such)."""
    import subprocess

    f.mkdir(parents=True, exist_ok=True)
    profiles = _fixture("synthetic_profiles", "SYNTHETIC_profiles.csv")
    files = {
        "trace.csv": SMALL_TRACE, "g.json": json.dumps(gavel_document(0)).encode(),
        "philly.csv": _csv(PHILLY_HEADER, PHILLY_ROWS), "pods.csv": _csv(POD_HEADER, POD_ROWS),
        "nodes.csv": _csv(NODE_HEADER, NODE_ROWS), "cluster.yaml": CLUSTER_YAML.encode(),
        "m_solo.csv": MEASURED_SOLO, "m_coloc.csv": MEASURED_COLOC, "m_trace.csv": MEASURED_TRACE,
        "profiles.csv": profiles, "coloc_fixture.csv": _fixture("coloc_synthetic", "colocation.csv"),
        "coloc_solo.csv": _fixture("coloc_synthetic", "solo.csv"), "token": b"fuzz-token-" + b"x" * 40 + b"\n",
        "file": b"x", "empty": b"", "random.bin": bytes(random.Random(1).randrange(256) for _ in range(512)),
    }
    for name, data in files.items():
        (f / name).write_bytes(data)
    for name in ("reference", "gpumemnet", "emptydir"):
        (f / name).mkdir(exist_ok=True)
    py = [sys.executable]
    env = {**os.environ, "HOME": str(f), "XDG_DATA_HOME": str(f / "xdg")}
    setups = {
        "imodel": [*py, "-m", "horus.cli", "interference", "train", "--gavel", "g.json", "--model", "iapp",
                   "--folds", "2", "--out", "imodel"],
        "learned": [*py, "-m", "horus.cli", "predictor", "train", "profiles.csv", "--folds", "2", "--candidates",
                    "mean,ridge", "--out", "learned"],
        "sweep": [*py, "-m", "horus.cli", "sweep", "--no-ray", "--policy", "fifo-exclusive", "--trace", "trace.csv",
                  "--max-jobs", "5", "--out", "sweep"],
        "state": [*py, "-c", ("import pathlib, sys; from horus.service.store import Store; "
                  "pathlib.Path('state').mkdir(exist_ok=True); Store(pathlib.Path('state') / 'horus.db')"
                  ".close(); from horus.cli import main; "
                  "sys.exit(main(['token', 'create', '--name', 'fuzz-setup', '--role', 'user', '--state-dir', 'state', "
                  "'--out', 'fuzz-setup.token']))")],  # token revoke's baseline revokes it
    }
    failed = {}
    needed = None
    if commands is not None:  # only the setups the given commands' baselines name
        needed = json.dumps([[BASELINES[c.name].args, [list(x.items()) for x in BASELINES[c.name].companions.values()]]
                             for c in commands if c.name in BASELINES] + [COPY_STATE if any(
                                 c.name in COPY_STATE for c in commands) else []])
    for what, argv in setups.items():
        if (f / what).exists() and any((f / what).iterdir()):
            continue
        if needed is not None and f"{{f}}/{what}" not in needed and not (what == "state" and "state" in needed):
            continue
        proc = subprocess.run(argv, cwd=f, env=env, capture_output=True, text=True, timeout=300, check=False)
        if proc.returncode != 0:
            failed[what] = (proc.stderr.strip().splitlines() or ["?"])[-1][:200]
    return failed


MEASURED_SOLO_HEADER = ["config_id", "model", "family", "batch_size", "input_size", "precision", "repeat", "gpu_name",
                        "status", "error", "gpu_util_mean", "torch_max_reserved_mib", "iter_time_s_mean",
                        "throughput_samples_s"]
MEASURED_SOLO_ROWS = [["resnet50-b64-fp32-r0", "resnet50", "cnn", 64, 224, "fp32", 0, "V100", "ok", "", 80, 9000, 0.25,
                       256],
                      ["a3c-b16-fp32-r0", "a3c", "rl", 16, 42, "fp32", 0, "V100", "ok", "", 30, 300, 0.01, 1600],
                      ["lstm_lm-b20-fp32-r0", "lstm_lm", "rnn", 20, 35, "fp32", 0, "V100", "ok", "", 55, 2000, 0.05,
                       400]]
MEASURED_SOLO = _csv(MEASURED_SOLO_HEADER, MEASURED_SOLO_ROWS)
MEASURED_COLOC_HEADER = ["set_id", "set_size", "member", "model", "batch_size", "precision", "normalized_throughput",
                         "status", "error", "repeat", "solo_util_mean"]
MEASURED_COLOC_ROWS = [["s1", 2, 0, "resnet50", 64, "fp32", 0.6, "ok", "", 0, 80],
                       ["s1", 2, 1, "a3c", 16, "fp32", 0.9, "ok", "", 0, 30],
                       ["s2", 2, 0, "a3c", 16, "fp32", 0.95, "ok", "", 0, 30],
                       ["s2", 2, 1, "lstm_lm", 20, "fp32", 0.8, "ok", "", 0, 55],
                       ["s3", 2, 0, "resnet50", 64, "fp32", 0.5, "ok", "", 0, 80],
                       ["s3", 2, 1, "lstm_lm", 20, "fp32", 0.7, "ok", "", 0, 55],
                       ["s4", 3, 0, "resnet50", 64, "fp32", 0.45, "ok", "", 0, 80],
                       ["s4", 3, 1, "a3c", 16, "fp32", 0.8, "ok", "", 0, 30],
                       ["s4", 3, 2, "lstm_lm", 20, "fp32", 0.6, "ok", "", 0, 55]]  # every set of the trace measured
MEASURED_COLOC = _csv(MEASURED_COLOC_HEADER, MEASURED_COLOC_ROWS)
MEASURED_TRACE = _csv(["job_id", "submit_time", "num_gpus", "model", "batch_size", "iterations"],
                      [["j1", 0, 1, "resnet50", 64, 100], ["j2", 5, 1, "a3c", 16, 200], ["j3", 6, 1, "lstm_lm", 20, 50]])


def _measured_mutation(rng: random.Random) -> tuple[bytes, bytes, str, str]:
    """(solo table, co-location table, label, note) for ``--truth measured``."""
    solo = [list(r) for r in MEASURED_SOLO_ROWS]
    coloc = [list(r) for r in MEASURED_COLOC_ROWS]
    solo_header, coloc_header = list(MEASURED_SOLO_HEADER), list(MEASURED_COLOC_HEADER)
    choice = rng.choice(["one_member_set", "no_precision_column", "nan_throughput", "empty_throughput",
                         "wrong_set_size", "duplicate_member", "unmeasured_model", "nan_solo_util", "member_too_big",
                         "solo_no_ok_rows", "solo_inf_iter_time", "negative_throughput", "valid", "valid",
                         "failed_status_nan", "solo_precision_amp_only", "three_member_set"])
    label = "invalid"
    c = coloc_header.index
    s = solo_header.index
    if choice == "one_member_set":
        coloc = [r for r in coloc if not (r[0] == "s1" and r[2] == 1)]
        coloc[0][c("set_size")] = 1
    elif choice == "no_precision_column":
        i = c("precision")
        coloc_header.pop(i)
        for r in coloc:
            r.pop(i)
        label = "any"  # precision is a required column of the co-location table
    elif choice == "nan_throughput":
        coloc[1][c("normalized_throughput")] = "nan"
    elif choice == "empty_throughput":
        coloc[1][c("normalized_throughput")] = ""
    elif choice == "negative_throughput":
        coloc[1][c("normalized_throughput")] = -0.5
    elif choice == "failed_status_nan":
        coloc[0][c("status")], coloc[1][c("status")] = "oom", "oom"
        coloc[0][c("normalized_throughput")] = coloc[1][c("normalized_throughput")] = ""
        label = "any"  # an unmeasured (failed) set carries no throughput; refused when the trace needs that set
    elif choice == "wrong_set_size":
        coloc[0][c("set_size")] = coloc[1][c("set_size")] = 3
    elif choice == "duplicate_member":
        coloc[1][c("member")] = 0
    elif choice == "member_too_big":
        coloc[1][c("member")] = 5
    elif choice == "unmeasured_model":
        coloc[1][c("model")], coloc[1][c("batch_size")] = "resnet18", 32
    elif choice == "three_member_set":  # the triple alone: unmeasured pairs get the fitted curve (too few sets)
        coloc = [r for r in coloc if r[0] == "s4"]
        label = "any"
    elif choice == "nan_solo_util":
        solo[0][s("gpu_util_mean")] = "nan"
    elif choice == "solo_inf_iter_time":
        solo[1][s("iter_time_s_mean")] = "inf"
    elif choice == "solo_no_ok_rows":
        for r in solo:
            r[s("status")] = "oom"
    elif choice == "solo_precision_amp_only":
        for r in solo:
            r[s("precision")] = "amp"
    else:
        label = "valid"
    return _csv(solo_header, solo), _csv(coloc_header, coloc), label, choice


def _measured_case(rng: random.Random) -> Case:
    solo, coloc, label, note = _measured_mutation(rng)
    if rng.random() < 0.2:  # generic damage of one of the two tables
        target = rng.choice(["solo", "coloc"])
        data, label, note2 = _text_damage(rng, solo if target == "solo" else coloc, "measured")
        solo, coloc = (data, MEASURED_COLOC) if target == "solo" else (MEASURED_SOLO, data)
        note = f"{target}:{note2}"
    argv = [*SIM, "--truth", "measured", "--profiles", "{d}/solo.csv", "--colocation", "{d}/coloc.csv", "--trace",
            "{d}/t.csv"]
    return Case("measured-truth", argv, {"solo.csv": solo, "coloc.csv": coloc, "t.csv": MEASURED_TRACE}, label, note)


# -- values per option, from what the tree declares ---------------------------------------------------

FULLWIDTH_12 = "\uff11\uff12"
CONTROL = "a\x01b\x1b[31mc\x7f"


def _num(x: float, integer: bool) -> str:
    if integer:
        return str(int(x))
    return repr(float(x))


# Options that set an amount of work (iterations, seconds of measurement, jobs): valid values far above their
# default are legitimate but would run past the per-case timeout, so only values up to 10x the default are tried.
WORK_WORDS = ("iterations", "budget", "window", "repeats", "warmup", "jobs")


def number_values(opt: OptionSpec) -> list[tuple[str, str]]:
    """(value, label) for a numeric option: from its Domain when declared, else only non-finite/huge values are
    ``invalid`` and the rest ``any`` (no option should accept a non-finite number)."""
    dom = opt.domain
    out: list[tuple[str, str]] = []
    if dom is not None:
        lo, hi, integer = float(dom.low), float(dom.high), bool(dom.integer)  # type: ignore[attr-defined]
        valid = {lo, hi}
        if math.isfinite(lo) and math.isfinite(hi):
            valid.add(lo + (hi - lo) / 2 if not integer else math.floor(lo + (hi - lo) / 2))
            valid.add(min(hi, lo + 1))
        if isinstance(opt.default, (int, float)) and not isinstance(opt.default, bool) \
                and dom.contains(opt.default):  # type: ignore[attr-defined]
            valid.add(float(opt.default))
        if any(w in opt.flag for w in WORK_WORDS):  # an amount of work: its domain's top is valid but runs for hours
            default = float(opt.default) if isinstance(opt.default, (int, float)) and opt.default else 10.0
            valid = {v for v in valid if v <= max(lo + 1, 10 * default)}
        out += [(_num(v, integer), "valid") for v in sorted(valid) if math.isfinite(v)]
        candidates = ["nan", "inf", "-inf", "1e308", "-1e308", str(2**70), "", "x", FULLWIDTH_12, "0x10", " ",
                      "1_000", "+-1", "1e", "--1"]
        if math.isfinite(lo):
            candidates += [_num(lo - 1, integer), _num(lo - 1e-6, False) if not integer else _num(lo - 1, True)]
        if math.isfinite(hi):
            candidates += [_num(hi * 10 if hi > 0 else hi + 10, integer), _num(hi + 1, integer)]
        if integer:
            candidates += [repr(lo + 0.5) if math.isfinite(lo) else "1.5", "1e3"]
        for text in candidates:
            try:
                value = int(text) if integer else float(text)
                inside = text.isascii() and "_" not in text and dom.contains(value)  # type: ignore[attr-defined]
            except ValueError:
                inside = False
            if text == "1e3" and integer:
                inside = False  # an integer option takes digits only
            out.append((text, "valid" if inside else "invalid"))
        return out
    huge = [str(2**70), "-" + str(2**70), "9" * 400]
    if opt.type_name == "float":
        out += [(v, "invalid") for v in ("nan", "inf", "-inf", "1e308", "-1e308", *huge)]
        out += [(v, "any") for v in ("-1", "0", "1e-300", "0.5", "", "x", FULLWIDTH_12, "1e3")]
    else:
        out += [(v, "invalid") for v in huge]
        out += [(v, "any") for v in ("-1", "0", "1", FULLWIDTH_12, "", "x", "1.5", "nan")]
    return out


def string_values() -> list[tuple[str, str]]:
    return [(v, "any") for v in ("", "x" * 100_000, "\u00fc\u65e5\u672c\U0001f600", "|", CONTROL, "-", " ", "..",
                                 "a,b,,", "{}", "%s%n", "../../etc/passwd")]


def path_values(opt: OptionSpec) -> list[tuple[str, str]]:
    dir_like = "dir" in opt.flag.lower() or str(opt.metavar) in ("DIR", "SWEEP") or "directory" in opt.help.lower()
    if opt.role == "output":  # a --state-dir must hold a state for some commands: a fresh one is "any" there
        return [("{d}/new_out", "any" if "state" in opt.flag else "valid"), ("/proc/horus-fuzz/x", "invalid"), ("{d}/file/sub", "invalid"),
                ("", "invalid"), ("{d}/file", "any"), ("{d}/newdir/deeper/x", "any"), ("{d}", "any"),
                ("/dev/null", "any"), ("x" * 5000, "invalid")]
    out = [("{d}/missing", "invalid"), ("{d}/empty", "invalid"), ("{d}/random.bin", "invalid"), ("", "invalid"),
           ("/proc/self/mem", "invalid"), ("/dev/zero", "invalid"), ("x" * 5000, "invalid")]
    out += [("{d}/file", "invalid"), ("{d}/emptydir", "any")] if dir_like else [("{d}/emptydir", "invalid")]
    return out


def option_values(opt: OptionSpec) -> list[tuple[str | None, str]]:
    """Every (value, label) the fuzzer tries for ``opt`` (``None``: a flag given / left out)."""
    if opt.role == "flag":
        return [(None, "any")]
    if opt.role == "number":
        return list(number_values(opt))
    if opt.role == "choice":
        assert opt.choices is not None
        out: list[tuple[str | None, str]] = [(c, "valid") for c in opt.choices]
        folds_case = opt.type_name in ("lower", "casefold")  # the option declares itself case-insensitive
        bad = ["nope", "", opt.choices[0].upper() if opt.choices[0].upper() != opt.choices[0] and not folds_case
               else opt.choices[0] + "x", opt.choices[0] + " "]
        return out + [(b, "invalid") for b in bad if b not in opt.choices]
    if opt.role in ("input", "output"):
        return list(path_values(opt))
    return list(string_values())


def _baseline_for(cmd: CommandSpec) -> Baseline:
    """The table's baseline, else one made from the tree: required options filled with a declared value."""
    if cmd.name in BASELINES:
        return BASELINES[cmd.name]
    args: dict[str, object] = {}
    for opt in cmd.options:
        if not opt.required:
            continue
        values = [v for v, label in option_values(opt) if label == "valid" and v is not None]
        if opt.role == "output":
            value = "{d}/new_out"
        elif opt.role == "input":
            value = "{f}/file"
        else:
            value = values[0] if values else "x"
        args[opt.flag] = [value] if opt.nargs in ("+", "*", argparse.REMAINDER) else value
    return Baseline(args)


def build_argv(cmd: CommandSpec, args: dict[str, object]) -> list[str]:
    """argv for ``cmd`` from an option -> value mapping (options first, then positionals in parser order)."""
    argv = list(cmd.path)
    positionals: list[str] = []
    by_flag = {o.flag: o for o in cmd.options}
    for key, value in args.items():
        opt = by_flag.get(key)
        if value is None or value is False:
            continue
        if opt is not None and opt.positional:
            continue
        if value is True:
            argv.append(key)
        elif isinstance(value, list):
            for v in value:
                argv += [key, str(v)] if not (opt and opt.nargs in ("+", "*")) else [key, *value]
                if opt and opt.nargs in ("+", "*"):
                    break
        else:
            argv.append(f"{key}={value}" if str(value).startswith("-") else key)
            if not str(value).startswith("-"):
                argv.append(str(value))
    for opt in cmd.options:
        if opt.positional and opt.flag in args and args[opt.flag] is not None:
            value = args[opt.flag]
            values = [str(v) for v in value] if isinstance(value, list) else [str(value)]
            if opt.nargs == argparse.REMAINDER:
                positionals += ["--", *values]
            else:
                positionals += (["--"] if values and values[0].startswith("-") and not positionals else []) + values
    return argv + positionals


@dataclass
class CliCase(Case):
    command: str = ""
    option: str = ""
    value: str = ""
    expect: str = "ok"
    copy_state: bool = False


def option_case(cmd: CommandSpec, opt: OptionSpec, value: str | None, label: str) -> CliCase:
    base = _baseline_for(cmd)
    args = dict(base.args)
    if opt.role == "flag":  # given on top of the baseline (a baseline's own flags, --no-ray, --once..., stay)
        args[opt.flag] = True
    else:
        args.pop(opt.flag, None)
        for key in (opt.flag,):
            args[key] = [value] if opt.nargs in ("+", "*", argparse.REMAINDER) or opt.action == "append" else value
        for extra_key, extra in base.companions.get((opt.flag, str(value)), {}).items():
            args[extra_key] = extra
    files = {"file": b"x", "empty": b"", "random.bin": bytes(random.Random(2).randrange(256) for _ in range(256))}
    argv = build_argv(cmd, args)
    case = CliCase(f"cli:{cmd.name}", argv, files, label, f"{opt.flag}={str(value)[:80]!r}" if value is not None
                   else f"toggle {opt.flag}", command=cmd.name, option=opt.flag,
                   value="" if value is None else str(value)[:120], expect=base.expect,
                   copy_state=cmd.name in COPY_STATE)
    return case


def baseline_case(cmd: CommandSpec) -> CliCase:
    base = _baseline_for(cmd)
    return CliCase(f"cli:{cmd.name}", build_argv(cmd, dict(base.args)),
                   {"file": b"x", "empty": b"", "random.bin": b"\x00\xff" * 64}, "valid", "baseline",
                   command=cmd.name, option="(baseline)", expect=base.expect, copy_state=cmd.name in COPY_STATE)


def cli_cases(commands: list[CommandSpec]) -> list[CliCase]:
    """All derived cases: every value of every option of every command (plus each baseline), in tree order."""
    cases: list[CliCase] = []
    for cmd in commands:
        cases.append(baseline_case(cmd))
        for opt in cmd.options:
            for value, label in option_values(opt):
                cases.append(option_case(cmd, opt, value, label))
    return cases


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
    "measured-truth": (0.06, _measured_case),
}


CLI_SHARE = 0.5  # share of cases derived from the argparse tree (the rest: the file-format surfaces above)


def generate(n: int, seed: int, only: str | None = None, commands: list[CommandSpec] | None = None,
             cli_share: float = CLI_SHARE, weights_by_command: dict[str, float] | None = None) -> Iterator[Case]:
    """``n`` cases, deterministic by ``seed``: a ``cli_share`` of them one option of one command mutated on its
    baseline (commands in turn, so every command is covered; option and value drawn at random), the rest from
    the file-format surfaces (``only``: surfaces, or ``cli:<command>``, starting with this name)."""
    rng = random.Random(seed)
    names = [s for s in SURFACES if only is None or s.startswith(only)]
    weights = [SURFACES[s][0] for s in names]
    cmds = [c for c in (commands or []) if c.options and (only is None or f"cli:{c.name}".startswith(only))]
    # each command in turn, a slow one (its baseline's seconds, weights_by_command) less often, but at least once
    wbc = weights_by_command or {}
    first = list(cmds)  # one case of every command before any command's second (a short campaign covers all)
    rng.shuffle(first)
    rest = [c for c in cmds for _ in range(max(1, round(8 * wbc.get(c.name, 1.0))) - 1)]
    rng.shuffle(rest)
    order = first + rest
    k = 0
    for _ in range(n):
        if order and (not names or rng.random() < cli_share):
            cmd = order[k % len(order)]
            k += 1
            opt = rng.choice(cmd.options)
            value, label = rng.choice(option_values(opt))
            yield option_case(cmd, opt, value, label)
        elif names:
            yield SURFACES[rng.choices(names, weights)[0]][1](rng)


# ----------------------------------------------------------------------------------------------------------
# running

FIXTURES = Path("/nonexistent")  # the campaign's prepared fixture directory ({f}); set before workers fork


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _normalize(line: str, d: Path) -> str:
    return line.replace(str(d), "{d}").replace(str(FIXTURES), "{f}")


def run_case(case: Case, root: Path) -> dict[str, object]:
    """Run one case in-process in a fresh directory under ``root``; classify the outcome."""
    from horus.cli import main

    d = Path(tempfile.mkdtemp(dir=root))
    for name, data in case.files.items():
        (d / name).parent.mkdir(parents=True, exist_ok=True)
        (d / name).write_bytes(data)
    cli = isinstance(case, CliCase)
    if cli:
        (d / "emptydir").mkdir(exist_ok=True)
        if case.copy_state and (FIXTURES / "state").is_dir():  # type: ignore[union-attr]
            shutil.copytree(FIXTURES / "state", d / "state")
    before = {p.relative_to(d) for p in d.rglob("*")}
    port = str(_free_port()) if any("{port}" in a for a in case.argv) else ""
    argv = [a.replace("{d}", str(d)).replace("{f}", str(FIXTURES)).replace("{port}", port) for a in case.argv]
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
    clear = rc == 2 and (last.startswith(("horus: error:", "usage:")) or " error: " in last)
    same_as_baseline = bool(cli and clear and case.expect == "error"  # type: ignore[union-attr]
                            and _normalize(last, d)[:300] == getattr(case, "expected_message", None))
    if rc is None or "Traceback (most recent call last)" in stderr:
        cls = "traceback"
    elif rc == 0 or same_as_baseline or rc in DOCUMENTED_EXITS.get(str(getattr(case, "command", "")), ()):
        # same_as_baseline: got as far as the baseline (past every option check); a documented exit code: success
        warned = "horus: warning:" in stderr
        if case.label == "invalid" or (case.label == "warn" and not warned):
            cls = "silently_accepted"
        else:
            cls = "accepted"
    elif clear:
        cls = "false_rejection" if case.label == "valid" else "clear_error"
    else:
        cls = "traceback"  # another exit code, or no clear one-line message
        exc_text = exc_text or f"exit {rc}: {last[:200]}"
    wrote = bool(after - before) and cls not in ("accepted", "silently_accepted")
    shutil.rmtree(d, ignore_errors=True)
    result: dict[str, object] = {
        "surface": case.surface, "label": case.label, "note": case.note[:200], "class": cls, "rc": rc,
        "wrote_on_failure": wrote, "message": _normalize(exc_text or last, d)[:300], "wall_s": round(wall, 3),
        "argv": [a[:200] for a in case.argv[:24]]}
    if cli:
        result.update(command=case.command, option=case.option, value=case.value)  # type: ignore[union-attr]
    return result


def _worker(conn: object, root: str, memory_gib: float) -> None:
    if memory_gib > 0:
        limit = int(memory_gib * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 1000))
    os.environ["HOME"] = root  # defaults such as the user data dir land in the campaign's directory
    os.environ["XDG_DATA_HOME"] = os.path.join(root, "xdg")
    os.environ.pop("HORUS_STATE_DIR", None)
    os.environ.pop("HORUS_SERVER", None)
    import horus.cli  # noqa: F401  (import once per worker)

    with contextlib.suppress(ImportError):  # warm worker: torch's import (seconds) is not charged to one case
        import torch  # noqa: F401

    parent = os.getppid()
    while True:
        while not conn.poll(2.0):  # type: ignore[attr-defined]
            if os.getppid() != parent:  # the campaign was killed: siblings hold its pipe, so recv() would wait forever
                return
        try:
            case = conn.recv()  # type: ignore[attr-defined]
        except EOFError:
            return
        if case is None:
            return
        conn.send(run_case(case, Path(root)))  # type: ignore[attr-defined]


class Pool:
    """Workers fed one case at a time; a case that takes longer than ``timeout`` kills its worker (a server
    command's case gets ``serve_timeout``: running that long counts as started, i.e. exit 0)."""

    def __init__(self, workers: int, root: Path, timeout: float, memory_gib: float, serve_timeout: float = 6.0) -> None:
        self.ctx = mp.get_context("fork")
        self.root, self.timeout, self.memory_gib, self.serve_timeout = root, timeout, memory_gib, serve_timeout
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
                case: Case = slot["case"]  # type: ignore[assignment]
                serve = getattr(case, "expect", "") == "serve"
                dead = not proc.is_alive()  # type: ignore[attr-defined]
                late = time.monotonic() - float(slot["since"]) > (self.serve_timeout if serve else self.timeout)  # type: ignore[arg-type]
                if dead or late:
                    proc.kill()  # type: ignore[attr-defined]
                    proc.join()  # type: ignore[attr-defined]
                    why = "timeout" if late else f"worker died (exit {proc.exitcode})"  # type: ignore[attr-defined]
                    cls = "hang"
                    if serve and late:  # a server still running: it started
                        cls = "silently_accepted" if case.label == "invalid" else "accepted"
                        why = "server started (still running)"
                    result: dict[str, object] = {
                        "surface": case.surface, "label": case.label, "note": case.note[:200], "class": cls,
                        "rc": None, "wrote_on_failure": False, "message": why,
                        "wall_s": round(time.monotonic() - float(slot["since"]), 3),  # type: ignore[arg-type]
                        "argv": [a[:200] for a in case.argv[:24]]}
                    if isinstance(case, CliCase):
                        result.update(command=case.command, option=case.option, value=case.value)
                    on_result(result)
                    self.slots[i] = self._spawn()

    def close(self) -> None:
        for slot in self.slots:
            try:
                slot["conn"].send(None)  # type: ignore[attr-defined]
            except (BrokenPipeError, OSError):
                pass
            slot["proc"].join(timeout=5)  # type: ignore[attr-defined]
            if slot["proc"].is_alive():  # type: ignore[attr-defined]
                slot["proc"].kill()  # type: ignore[attr-defined]


CLASSES = ("clear_error", "traceback", "hang", "silently_accepted", "accepted", "false_rejection")
# exit codes a command documents as a kind of success (docs/profiling.md: 3 = --time-budget-s stopped it, rerun to
# continue); any other code but 0 and 2 is a finding
DOCUMENTED_EXITS: dict[str, tuple[int, ...]] = {"profile": (3,), "profile colocate": (3,)}


FINDING_CLASSES = ("traceback", "hang", "silently_accepted", "false_rejection")


def tree_summary(commands: list[CommandSpec]) -> dict[str, object]:
    """What the tree declares: commands, options per command, the options without a declared domain."""
    without = [f"{c.name} {o.flag}" for c in commands for o in c.options if o.role == "number" and o.domain is None]
    return {"commands": [c.name for c in commands],
            "options": sum(len(c.options) for c in commands),
            "numeric_options": sum(1 for c in commands for o in c.options if o.role == "number"),
            "options_with_domain": sorted(f"{c.name} {o.flag}" for c in commands for o in c.options
                                          if o.domain is not None),
            "options_without_domain": without,
            "pass_through": {c.name: (c.inner_gap or f"inner parser read: {len(c.options)} options")
                             for c in commands if c.pass_through},
            "commands_without_baseline": [c.name for c in commands if c.name not in BASELINES],
            "tree": {c.name: [o.describe() for o in c.options] for c in commands}}


def _package_snapshot() -> dict[str, tuple[int, int]]:
    import horus

    root = Path(horus.__file__).resolve().parent
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts}


def _restore_package_data(saved: dict[Path, bytes]) -> None:
    """Put back the package's data files a case overwrote (e.g. ``truth fit --write-params ''``: a finding)."""
    for path, data in saved.items():
        if not path.exists() or path.read_bytes() != data:
            path.write_bytes(data)


def group_failures(results: list[dict[str, object]]) -> list[dict[str, object]]:
    """Distinct failures: (surface or command, option, class, message) with a count and one example value."""
    groups: dict[tuple[str, ...], dict[str, object]] = {}
    for r in results:
        if r["class"] not in FINDING_CLASSES and not r["wrote_on_failure"]:
            continue
        cls = str(r["class"]) + ("+wrote_on_failure" if r["wrote_on_failure"] else "")
        message = str(r["message"])
        if r["class"] in ("silently_accepted", "false_rejection"):
            message = message if r["class"] == "false_rejection" else ""
        key = (str(r.get("command") or r["surface"]), str(r.get("option", "")), cls, message[:160])
        g = groups.setdefault(key, {"where": key[0], "option": key[1], "class": cls, "message": key[3],
                                    "count": 0, "values": [], "example_argv": r["argv"]})
        g["count"] = int(g["count"]) + 1  # type: ignore[call-overload]
        value = str(r.get("value", r["note"]))[:60]
        if value not in g["values"] and len(g["values"]) < 6:  # type: ignore[arg-type,operator]
            g["values"].append(value)  # type: ignore[union-attr]
    return sorted(groups.values(), key=lambda g: (str(g["class"]), str(g["where"]), str(g["option"])))


def run_campaign(cases: int, seed: int = 0, workers: int = 2, timeout: float = 60.0, memory_gib: float = 6.0,
                 only: str | None = None, commands: list[CommandSpec] | None = None, cli_share: float = CLI_SHARE,
                 serve_timeout: float = 6.0, live: io.TextIOBase | None = None, examples: int = 3,
                 progress: bool = True, exhaustive: bool = False) -> dict[str, object]:
    """Run a campaign; returns the report (see ``main``). ``commands``: the CLI tree (default: ``cli_tree()``);
    ``exhaustive``: instead of ``cases`` sampled ones, every value of every option of ``commands`` once."""
    global FIXTURES
    commands = cli_tree() if commands is None else commands
    results: list[dict[str, object]] = []
    start = time.time()
    snapshot = _package_snapshot()
    import horus

    saved = {p: p.read_bytes() for p in (Path(horus.__file__).resolve().parent / "data").glob("*") if p.is_file()}

    def on_result(result: dict[str, object]) -> None:
        results.append(result)
        if live is not None and (result["class"] in FINDING_CLASSES or result["wrote_on_failure"]):
            live.write(json.dumps(result, default=str) + "\n")
            live.flush()
        if progress and len(results) % 500 == 0:
            print(f"{len(results)} cases, {time.time() - start:.0f} s: "
                  f"{dict(Counter(r['class'] for r in results))}", file=sys.stderr, flush=True)

    baselines: dict[str, dict[str, object]] = {}
    with tempfile.TemporaryDirectory(prefix="horus-fuzz-") as root:
        FIXTURES = Path(root) / "fixtures"
        setup_failed = prepare_fixtures(FIXTURES, commands)
        cases_root = Path(root) / "cases"
        cases_root.mkdir()
        pool = Pool(workers, cases_root, timeout, memory_gib, serve_timeout)
        try:
            # 1. each command's baseline: must reach its expected outcome, else its "valid" cases become "any"
            base_cases = [baseline_case(c) for c in commands if c.options and
                          (only is None or f"cli:{c.name}".startswith(only))]
            base_results: list[dict[str, object]] = []
            pool.run(iter(base_cases), base_results.append)
            for case, r in zip(base_cases, _match(base_cases, base_results)):
                want = {"ok": "accepted", "serve": "accepted", "error": "false_rejection"}[case.expect]
                good = r["class"] == want and (case.expect != "error" or "horus: error:" in str(r["message"]))
                baselines[case.command] = {"expect": case.expect, "class": r["class"], "ok": good,
                                           "message": r["message"], "wall_s": r["wall_s"]}
            broken = {c for c, b in baselines.items() if not b["ok"]}
            weights = {c: min(1.0, max(0.25, 1.0 / max(float(b["wall_s"]), 1e-3)))  # type: ignore[arg-type]
                       for c, b in baselines.items()}
            expected = {c: b["message"] for c, b in baselines.items() if b["expect"] == "error"}

            def adjusted() -> Iterator[Case]:
                stream = iter(cli_cases(commands)) if exhaustive else generate(cases, seed, only, commands, cli_share,
                                                                                  weights)
                for case in stream:
                    if isinstance(case, CliCase):
                        case.expected_message = expected.get(case.command)  # type: ignore[attr-defined]
                        if case.command in broken and case.label == "valid":
                            case.label, case.note = "any", case.note + " (baseline failed)"
                    yield case

            pool.run(adjusted(), on_result)
        finally:
            pool.close()
    after = _package_snapshot()
    _restore_package_data(saved)
    changed = sorted(k for k in set(snapshot) | set(after) if snapshot.get(k) != after.get(k))
    totals = Counter(r["class"] for r in results)
    per_surface: dict[str, Counter] = {}
    for r in results:
        per_surface.setdefault(str(r["surface"]), Counter())[str(r["class"])] += 1
    findings: dict[str, list[dict[str, object]]] = {}
    for r in results:
        if r["class"] in FINDING_CLASSES or r["wrote_on_failure"]:
            key = f"{r['surface']}/{r['class']}" + ("/wrote_on_failure" if r["wrote_on_failure"] else "")
            if len(findings.setdefault(key, [])) < examples:
                findings[key].append(r)
    summary = tree_summary(commands)
    covered = Counter(str(r["command"]) for r in results if r.get("command"))
    options_covered = {(str(r["command"]), str(r["option"])) for r in results if r.get("command")}
    return {
        "cases": len(results), "seed": seed, "workers": workers, "timeout_s": timeout, "serve_timeout_s": serve_timeout,
        "memory_gib": memory_gib, "wall_s": round(time.time() - start, 1),
        "totals": {c: totals.get(c, 0) for c in CLASSES},
        "wrote_on_failure": sum(1 for r in results if r["wrote_on_failure"]),
        "package_files_changed": changed,
        "labels": dict(Counter(str(r["label"]) for r in results)),
        "cli": {"commands": len(summary["commands"]),  # type: ignore[arg-type]
                "options": summary["options"], "cases_per_command": dict(sorted(covered.items())),
                "options_fuzzed": len(options_covered),
                "options_not_reached": sorted(f"{c.name} {o.flag}" for c in commands for o in c.options
                                              if (c.name, o.flag) not in options_covered)},
        "options_without_domain": summary["options_without_domain"],
        "options_with_domain": summary["options_with_domain"],
        "pass_through": summary["pass_through"],
        "commands_without_baseline": summary["commands_without_baseline"],
        "setup_failed": setup_failed, "baselines": baselines,
        "per_surface": {s: {c: n for c, n in sorted(counts.items())} for s, counts in sorted(per_surface.items())},
        "wall_s_per_surface": {s: round(sum(float(r["wall_s"]) for r in results if r["surface"] == s), 1)
                               for s in sorted(per_surface)},
        "distinct_failures": group_failures(results),
        "findings": findings,
        "platform": platform.platform(), "python": sys.version.split()[0],
    }


def _match(cases: list[CliCase], results: list[dict[str, object]]) -> list[dict[str, object]]:
    """Results in the order of ``cases`` (workers answer out of order)."""
    by_command = {str(r["command"]): r for r in results}
    return [by_command[c.command] for c in cases]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per case before it counts as a hang")
    parser.add_argument("--serve-timeout", type=float, default=6.0,
                        help="seconds a server command may run before it counts as started (accepted)")
    parser.add_argument("--memory-gib", type=float, default=6.0, help="address-space limit per worker (0: none)")
    parser.add_argument("--only", help="only surfaces starting with this name (cli:<command> for one command)")
    parser.add_argument("--cli-share", type=float, default=CLI_SHARE,
                        help="share of cases derived from the argparse tree (default 0.5)")
    parser.add_argument("--tree", action="store_true", help="print the CLI tree the fuzzer derives cases from; exit")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/fuzz_inputs.json"))
    parser.add_argument("--examples", type=int, default=3, help="examples kept per (surface, class) of a finding")
    args = parser.parse_args(argv)
    if args.tree:
        print(json.dumps(tree_summary(cli_tree()), indent=1, default=str))
        return 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.with_suffix(".findings.jsonl").open("w") as live:  # findings as they happen (long runs)
        report = run_campaign(args.cases, args.seed, args.workers, args.timeout, args.memory_gib, args.only,
                              cli_share=args.cli_share, serve_timeout=args.serve_timeout, live=live,
                              examples=args.examples)
    report = {"command": " ".join(["python", "benchmarks/fuzz_inputs.py",
                                   *(argv if argv is not None else sys.argv[1:])]), **report}
    args.out.write_text(json.dumps(report, indent=1, default=str) + "\n")
    print(json.dumps({k: report[k] for k in ("cases", "wall_s", "totals", "wrote_on_failure",
                                             "package_files_changed")}))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # graph_factory_fixture for features
    raise SystemExit(main())
