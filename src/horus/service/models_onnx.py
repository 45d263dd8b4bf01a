"""Models uploaded to the live service as ONNX graphs: features -> a catalog model the predictors read.

The name is ``onnx-<sha256 prefix>`` of the file (``horus.graph.onnx_features.onnx_model_name``), so the
same upload twice is one model; the store keeps its catalog row, so a restarted server knows it.
Needs the ``onnx`` package (``pip install -e '.[graph]'``).

An upload never stalls the server: its body streams into a temporary file in ``<state-dir>/uploads``
(hashed on the way, at most ``MAX_ONNX_BYTES``), and the graph is parsed by a separate process
(``python -m horus.service.models_onnx FILE NAME``: parsing a large graph holds the GIL for seconds and
needs several times the file's size in memory, none of which the API, the scheduler or the in-process
agent then share). At most ``MAX_CONCURRENT_ANALYSES`` such processes run at a time.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator
from dataclasses import asdict
from pathlib import Path
from typing import Any, BinaryIO

from horus.catalog import ModelInfo, register_model
from horus.errors import HorusInputError

MAX_ONNX_BYTES = 512 * 1024 * 1024
WRITE_BYTES = 4 * 1024 * 1024  # the upload is written to its file in pieces of this size, off the event loop
ANALYSIS_TIMEOUT_S = 600.0
MAX_CONCURRENT_ANALYSES = 2
SOURCE = "model file"
_analyses: Any = None  # anyio.CapacityLimiter, made in the event loop on first use


class UploadTooLarge(Exception):
    """The streamed upload passed ``MAX_ONNX_BYTES``."""


def upload_folder(state_dir: Path) -> Path:
    """``<state-dir>/uploads``, created, without the leftovers of a server that stopped mid-upload."""
    folder = state_dir / "uploads"
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.iterdir():
        if stale.is_dir():
            shutil.rmtree(stale, ignore_errors=True)
        else:
            stale.unlink(missing_ok=True)
    return folder


def discard_upload(path: Path) -> None:
    """Remove an upload's file and its folder."""
    shutil.rmtree(path.parent, ignore_errors=True)


def _write(fh: BinaryIO, digest: Any, data: bytes) -> None:
    digest.update(data)
    fh.write(data)


async def receive_upload(chunks: AsyncIterator[bytes], folder: Path, limit: int = MAX_ONNX_BYTES) -> tuple[Path, str]:
    """Stream an upload into a new file, alone in a new folder under ``folder`` (nothing beside it for the graph
    to reference as external data), written and hashed in a worker thread a few MiB at a time; (its path, its
    model name). The caller removes it (``discard_upload``). ``UploadTooLarge`` past ``limit`` bytes."""
    import anyio

    path = Path(tempfile.mkdtemp(dir=folder, prefix="upload-")) / "model.onnx"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    digest = hashlib.sha256()
    size = 0
    pending: list[bytes] = []
    buffered = 0
    try:
        with os.fdopen(fd, "wb") as fh:
            async for chunk in chunks:
                size += len(chunk)
                if size > limit:
                    raise UploadTooLarge(limit)
                pending.append(chunk)
                buffered += len(chunk)
                if buffered >= WRITE_BYTES:
                    await anyio.to_thread.run_sync(_write, fh, digest, b"".join(pending))
                    pending, buffered = [], 0
            await anyio.to_thread.run_sync(_write, fh, digest, b"".join(pending))
    except BaseException:
        discard_upload(path)
        raise
    if size == 0:
        discard_upload(path)
        raise HorusInputError(SOURCE, "empty upload")
    return path, f"onnx-{digest.hexdigest()[:16]}"


def catalog_row_from_file(path: Path, name: str) -> dict[str, Any]:
    """Storable catalog row (with the graph's batch size) of the ONNX file at ``path``; HorusInputError if
    it is not a usable model."""
    try:
        from horus.graph.onnx_features import onnx_file_info
    except ImportError:
        raise HorusInputError(SOURCE, "ONNX uploads need the graph extra: pip install 'horus-scheduler[graph]'") \
            from None
    from horus.graph.onnx_ops import onnx_file_ops

    info, batch = onnx_file_info(path, name, SOURCE)
    row = {**asdict(info), "batch_size": batch, "ops": onnx_file_ops(path)}
    if any(isinstance(v, float) and not math.isfinite(v) for v in row.values()):
        raise HorusInputError(SOURCE, "the graph's sizes overflow (a feature is not a finite number)")
    return row


async def analyse_upload(path: Path, name: str, timeout_s: float = ANALYSIS_TIMEOUT_S) -> dict[str, Any]:
    """``catalog_row_from_file`` in a separate process (killed after ``timeout_s``); HorusInputError naming the
    model file when the graph is not usable or the analysis fails."""
    import anyio

    global _analyses
    if _analyses is None:
        _analyses = anyio.CapacityLimiter(MAX_CONCURRENT_ANALYSES)
    try:
        async with _analyses:
            with anyio.fail_after(timeout_s):
                done = await anyio.run_process([sys.executable, "-m", "horus.service.models_onnx", str(path), name],
                                               check=False)
    except TimeoutError:
        raise HorusInputError(SOURCE, f"the graph could not be analysed within {timeout_s:.0f} s") from None
    try:
        answer = json.loads(done.stdout.decode().strip().splitlines()[-1])
    except (ValueError, IndexError):
        last = (done.stderr.decode(errors="replace").strip().splitlines() or [""])[-1][:200]
        raise HorusInputError(SOURCE, f"the graph could not be analysed (exit code {done.returncode}"
                                      + (f": {last})" if last else ")")) from None
    if "error" in answer:
        raise HorusInputError(SOURCE, str(answer["error"]))
    return dict(answer["row"])


def register_catalog_row(name: str, row: dict[str, Any]) -> None:
    """Add a stored upload to this process's catalog, with its training-step operator rows where the row has them
    (uploads stored before they were derived are predicted by the ``analytic`` fallback)."""
    fields = {k: v for k, v in row.items() if k not in ("batch_size", "name", "ops")}
    register_model(ModelInfo(name=name, **fields), ops=row.get("ops"))


def main(argv: list[str]) -> int:
    """The analysing process: ``FILE NAME`` -> one JSON line, ``{"row": ...}`` or ``{"error": "..."}``."""
    path, name = argv
    try:
        answer: dict[str, Any] = {"row": catalog_row_from_file(Path(path), name)}
    except HorusInputError as exc:
        answer = {"error": exc.message}
    print(json.dumps(answer, allow_nan=False))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
