"""Truth and belief stay apart: no model a policy uses may be trained on the data the truth replays.

A trained interference model records the sha256 and GPU type of the pairs it was fitted on (its
``model.json``); a replaying truth (``gavel``, ``measured``) describes the file it replays and its GPU
types. When they meet, the run would grade a policy on its own training data: it is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from horus.errors import HorusInputError


def check_model_disjoint(model_dir: Path, truth_description: Mapping[str, object]) -> None:
    """HorusInputError if the interference model in ``model_dir`` was trained on pairs the truth replays."""
    from horus.interference.persistence import read_sidecar

    sidecar = read_sidecar(model_dir)
    trained_on = str(sidecar.get("data_sha256") or "")
    data = sidecar.get("data") if isinstance(sidecar.get("data"), Mapping) else {}
    gpu = str(data.get("gpu", "")) if isinstance(data, Mapping) else ""
    replays = str(truth_description.get("sha256") or "")
    gpus = truth_description.get("gpus") or []
    if trained_on and trained_on == replays and (not gpu or gpu in gpus):
        raise HorusInputError(
            "--interference-model",
            f"{model_dir} was trained on the {gpu or 'same'} pairs that truth {truth_description.get('name')!r} "
            f"replays (sha256 {replays[:12]}...): a policy would be graded on its own training data; train it on "
            f"another GPU type's pairs (horus interference train --gpu p100) or simulate another truth")
