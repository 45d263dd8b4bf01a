"""What a pod asks for, and the annotations that record Horus's decision on it.

Requests (HAMi's resource names, summed/maxed over the pod's containers): ``nvidia.com/gpu`` (GPUs),
``nvidia.com/gpumem`` (MiB per GPU), ``nvidia.com/gpucores`` (percent of a GPU's SMs per GPU).
Prediction inputs (annotations): ``horus.io/model`` + ``horus.io/batch-size`` name a catalog model;
``horus.io/input-size``, ``horus.io/precision`` and ``horus.io/optimizer`` describe its training (optional, with a
model); ``horus.io/gpu-type`` restricts GPU types (``"A100-80GB|H100"``). The decision is written as
``horus.io/gpu-ids`` (UUIDs where the node lists them, else indices: the value ``NVIDIA_VISIBLE_DEVICES``
takes), ``horus.io/gpu-indices`` and HAMi's ``hami.io/vgpu-devices-to-allocate`` (when UUIDs are known).
Tenancy (labels, read by ``horus.k8s.queues``): ``horus.io/queue`` names the pod's queue, ``horus.io/priority``
its Horus priority class.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from horus.catalog import load_catalog
from horus.jobs import JobSpec

GPU = "nvidia.com/gpu"
GPUMEM = "nvidia.com/gpumem"
GPUCORES = "nvidia.com/gpucores"

MODEL = "horus.io/model"
ONNX_CONFIGMAP = "horus.io/onnx-configmap"  # "<configmap>/<key>" in the pod's namespace (horus.k8s.onnx_models)
BATCH_SIZE = "horus.io/batch-size"
INPUT_SIZE = "horus.io/input-size"  # image side / sequence length / feature count (default: the catalog's)
PRECISION = "horus.io/precision"  # fp32 | tf32 | amp-fp16 | bf16 (aliases amp, fp16, bfloat16)
OPTIMIZER = "horus.io/optimizer"  # horus.jobs.OPTIMIZERS
GPU_TYPE = "horus.io/gpu-type"
GPU_IDS = "horus.io/gpu-ids"
GPU_INDICES = "horus.io/gpu-indices"
GPUMEM_LIMIT = "horus.io/gpumem-limit"  # MiB per GPU the pod is held to (HAMi enforces it)
GPUMEM_SOURCE = "horus.io/gpumem-source"  # declared | predicted | card
HAMI_TO_ALLOCATE = "hami.io/vgpu-devices-to-allocate"
HAMI_ALLOCATED = "hami.io/vgpu-devices-allocated"
HAMI_NODE = "hami.io/vgpu-node"
HAMI_BIND_PHASE = "hami.io/bind-phase"
HAMI_BIND_TIME = "hami.io/bind-time"
QUEUE_LABEL = "horus.io/queue"
PRIORITY_LABEL = "horus.io/priority"

OPAQUE_MODEL = "<opaque>"  # a pod that names no model: the predictor assumes it fills its GPUs


class PodError(ValueError):
    """A pod whose requests or annotations Horus cannot read; the message names the pod and field."""


def pod_key(pod: dict[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name')}"


def pod_job_id(pod: dict[str, Any]) -> str:
    """The pod's UID (stable across restarts), or namespace/name when it has none."""
    return str((pod.get("metadata") or {}).get("uid") or pod_key(pod))


@dataclass(frozen=True)
class PodJobSpec(JobSpec):
    """A ``JobSpec`` with the pod's declared per-GPU limits. ``job_type`` stays ``<model>/b<batch>`` (what
    predictors and interference models key on); ``belief_key`` adds the limits, which change the belief."""

    gpumem_mib: int | None = None
    gpucores: int | None = None
    container_gpus: tuple[int, ...] = ()  # GPUs per container, in spec order (for HAMi's annotation)

    @cached_property
    def belief_key(self) -> str:
        if self.gpumem_mib is None and self.gpucores is None:
            return self.job_type
        return f"{self.job_type}/mem{self.gpumem_mib}/cores{self.gpucores}"


MAX_COUNT = 2**31 - 1  # GPUs, MiB, percent, batch size: anything larger is a typo or an attack, not a request
_DIGITS = re.compile(r"[0-9]{1,10}")  # ASCII only: str.isdigit() also accepts e.g. "²", which int() refuses


def _count(value: Any, where: str) -> int:
    """A non-negative integer quantity of at most ``MAX_COUNT`` (extended resources take integers only)."""
    if isinstance(value, bool):
        raise PodError(f"{where}: expected a non-negative integer, got {value!r}")
    if isinstance(value, int):
        number = value
    elif isinstance(value, str) and _DIGITS.fullmatch(value.strip()):
        number = int(value.strip())
    else:
        raise PodError(f"{where}: expected a non-negative integer of at most {MAX_COUNT}, got {value!r}"[:200])
    if not 0 <= number <= MAX_COUNT:
        raise PodError(f"{where}: expected a non-negative integer of at most {MAX_COUNT}, got {number}"[:200])
    return number


def ascii_count(value: Any) -> int | None:
    """``value`` as a non-negative integer if it is a string of at most 10 ASCII digits (labels), else None."""
    if isinstance(value, str) and _DIGITS.fullmatch(value.strip()):
        return int(value.strip())
    return None


def _container_request(container: dict[str, Any], name: str, where: str) -> int | None:
    resources = container.get("resources") or {}
    if not isinstance(resources, dict):
        raise PodError(f"{where}.resources: expected an object")
    for kind in ("limits", "requests"):  # extended resources: limits == requests when both are given
        block = resources.get(kind) or {}
        if not isinstance(block, dict):
            raise PodError(f"{where}.resources.{kind}: expected an object")
        if name in block:
            return _count(block[name], f"{where}.resources.{kind}[{name!r}]")
    return None


def _requests(pod: dict[str, Any], where: str) -> tuple[list[int], list[int], list[int]]:
    """GPUs per container, and the GPU containers' declared memory (MiB) and cores (percent). Raises PodError."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    if not isinstance(meta, dict) or not isinstance(spec, dict):
        raise PodError(f"{where}: metadata and spec must be objects")
    containers = spec.get("containers") or []
    if not isinstance(containers, list):
        raise PodError(f"{where}.spec.containers: expected an array")
    per_container: list[int] = []
    mems: list[int] = []
    cores: list[int] = []
    for i, container in enumerate(containers):
        if not isinstance(container, dict):
            raise PodError(f"{where}.spec.containers[{i}]: expected an object")
        cwhere = f"{where} container {container.get('name', i)!r}"
        gpus = _container_request(container, GPU, cwhere) or 0
        per_container.append(gpus)
        if gpus:
            mem = _container_request(container, GPUMEM, cwhere)
            core = _container_request(container, GPUCORES, cwhere)
            if mem is not None:
                mems.append(mem)
            if core is not None:
                if core > 100:
                    raise PodError(f"{cwhere}: {GPUCORES} is a percentage of one GPU, got {core}")
                cores.append(core)
    return per_container, mems, cores


def gpu_fraction(num_gpus: int, cores: list[int]) -> float | None:
    """A one-GPU pod's share of its GPU (its declared cores below 100 %), else None (whole GPUs)."""
    core = max(cores) if cores else None
    return core / 100.0 if (num_gpus == 1 and core is not None and 0 < core < 100) else None


def pod_gpu_request(pod: dict[str, Any]) -> tuple[int, float | None]:
    """(GPUs, share of a GPU or None) the pod asks for, without reading its model annotations. Raises PodError."""
    per_container, _, cores = _requests(pod, f"pod {pod_key(pod)}")
    num_gpus = sum(per_container)
    return num_gpus, gpu_fraction(num_gpus, cores)


def pod_job_spec(pod: dict[str, Any], submit_time: float = 0.0,
                 onnx: Callable[[str, str], str] | None = None) -> PodJobSpec:
    """The pod as a Horus job; ``num_gpus`` is 0 for a pod that asks for no GPU. Raises PodError.

    ``onnx(namespace, ref)`` resolves a ``horus.io/onnx-configmap`` annotation to a catalog model name."""
    where = f"pod {pod_key(pod)}"
    per_container, mems, cores = _requests(pod, where)
    meta = pod.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    if not isinstance(annotations, dict):
        raise PodError(f"{where}.metadata.annotations: expected an object")
    model = annotations.get(MODEL)
    onnx_ref = annotations.get(ONNX_CONFIGMAP)
    if model is None and onnx_ref is not None:
        if not isinstance(onnx_ref, str):
            raise PodError(f"{where} annotation {ONNX_CONFIGMAP}: expected '<configmap>/<key>'")
        if onnx is None:
            raise PodError(f"{where} annotation {ONNX_CONFIGMAP}: this extender cannot read ConfigMaps")
        model = onnx(str(meta.get("namespace") or "default"), onnx_ref)
    if model is None:
        model, batch = OPAQUE_MODEL, 0
    else:
        if not isinstance(model, str) or not model:
            raise PodError(f"{where} annotation {MODEL}: expected a model name, got {model!r}"[:200])
        catalog = load_catalog()
        if model not in catalog:
            raise PodError(f"{where} annotation {MODEL}: unknown model {model!r} (known: {len(catalog)} "
                           f"catalog models, e.g. {', '.join(sorted(catalog)[:5])})")
        if BATCH_SIZE not in annotations:
            raise PodError(f"{where} annotation {BATCH_SIZE}: required with {MODEL} or {ONNX_CONFIGMAP}")
        batch = _count(annotations[BATCH_SIZE], f"{where} annotation {BATCH_SIZE}")
        if batch < 1:
            raise PodError(f"{where} annotation {BATCH_SIZE}: expected a positive integer, got {batch}")
    input_size, precision, optimizer = _description(annotations, str(model), where)
    gpu_type = annotations.get(GPU_TYPE)
    if gpu_type is not None and (not isinstance(gpu_type, str) or not gpu_type.strip()):
        raise PodError(f"{where} annotation {GPU_TYPE}: expected GPU type names separated by '|'")
    num_gpus = sum(per_container)
    core = max(cores) if cores else None
    fraction = gpu_fraction(num_gpus, cores)
    return PodJobSpec(job_id=pod_job_id(pod), submit_time=submit_time, num_gpus=num_gpus, model=str(model),
                      batch_size=batch, iterations=1.0, gpu_fraction=fraction,
                      gpu_type_request=gpu_type.strip() if gpu_type else None, input_size=input_size,
                      precision=precision, optimizer=optimizer,
                      gpumem_mib=max(mems) if mems else None, gpucores=core, container_gpus=tuple(per_container))


def _description(annotations: dict[str, Any], model: str, where: str) -> tuple[int | None, str | None, str | None]:
    """The pod's ``horus.io/input-size``, ``precision`` and ``optimizer`` (None where absent). Raises PodError."""
    from horus.errors import HorusInputError
    from horus.graph.input_sizes import check_input_size
    from horus.jobs import check_optimizer, normalize_precision
    from horus.validation import LIMITS

    given = [name for name in (INPUT_SIZE, PRECISION, OPTIMIZER) if name in annotations]
    if given and model == OPAQUE_MODEL:
        raise PodError(f"{where} annotation {given[0]}: describes a model's training; needs {MODEL} or "
                       f"{ONNX_CONFIGMAP}")
    size = None
    if INPUT_SIZE in annotations:
        size = _count(annotations[INPUT_SIZE], f"{where} annotation {INPUT_SIZE}")
        if not LIMITS["input_size"].contains(size):
            raise PodError(f"{where} annotation {INPUT_SIZE}: expected {LIMITS['input_size'].describe()}, got {size}")
    texts = {}
    for name in (PRECISION, OPTIMIZER):
        value = annotations.get(name)
        if value is not None and not isinstance(value, str):
            raise PodError(f"{where} annotation {name}: expected a string, got {value!r}"[:200])
        texts[name] = value
    try:
        check_input_size(model, size, f"{where} annotation {INPUT_SIZE}")
        precision = normalize_precision(texts[PRECISION], f"{where} annotation {PRECISION}")
        optimizer = check_optimizer(texts[OPTIMIZER], f"{where} annotation {OPTIMIZER}")
    except HorusInputError as exc:
        raise PodError(f"{exc.source}: {exc.message}"[:300]) from None
    return size, precision, optimizer


# ---- the decision as annotations ------------------------------------------------------------------
def memory_limit(spec: PodJobSpec, card_mib: int, predicted_mib: float | None, margin: float | None) -> tuple[int, str]:
    """(MiB per GPU HAMi enforces, where it comes from): the pod's declared ``nvidia.com/gpumem``; else, with a
    ``margin``, the predicted peak memory x (1 + margin) rounded up to a MiB (at most the card); else the card."""
    if spec.gpumem_mib is not None:
        return spec.gpumem_mib, "declared"
    if margin is not None and predicted_mib is not None and spec.model != OPAQUE_MODEL:
        limit = math.ceil(predicted_mib * (1.0 + margin))
        if limit < card_mib:
            return limit, "predicted"
    return card_mib, "card"


def decision_annotations(spec: PodJobSpec, node: str, local: list[int], uuids: list[str] | None,
                         card_mib: int, now: float, limit: tuple[int, str] | None = None) -> dict[str, str]:
    """Annotations recording that the pod runs on ``node``'s GPUs ``local`` (indices on the node); ``limit``
    (``memory_limit``'s answer) is the memory HAMi is told to enforce (default: declared, else the card)."""
    ids = [uuids[i] for i in local] if uuids else [str(i) for i in local]
    out = {GPU_IDS: ",".join(ids), GPU_INDICES: ",".join(str(i) for i in local)}
    mem, source = limit if limit is not None else memory_limit(spec, card_mib, None, None)
    out.update({GPUMEM_LIMIT: str(mem), GPUMEM_SOURCE: source})
    if uuids:
        core = spec.gpucores if spec.gpucores is not None else 0
        entries, pos = [], 0
        for count in spec.container_gpus:  # HAMi: "UUID,Type,MiB,cores:" per device, ";" after each container
            entries.append("".join(f"{uuid},NVIDIA,{mem},{core}:" for uuid in ids[pos:pos + count]) + ";")
            pos += count
        value = "".join(entries)
        out.update({HAMI_TO_ALLOCATE: value, HAMI_ALLOCATED: value, HAMI_NODE: node,
                    HAMI_BIND_PHASE: "allocating", HAMI_BIND_TIME: str(int(now))})
    return out


def decided_gpus(pod: dict[str, Any], uuids: list[str] | None, num_gpus_on_node: int) -> list[int] | None:
    """The node-local GPU indices a placed pod's annotations name, or None when it carries no decision
    (or one that does not fit the node: it is then ignored, not trusted)."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    local: list[int] | None = None
    raw = annotations.get(GPU_INDICES)
    if isinstance(raw, str) and raw:
        parsed = [ascii_count(p) for p in raw.split(",")]
        if all(g is not None for g in parsed):
            local = parsed  # type: ignore[assignment]
    if local is None:
        ids = annotations.get(GPU_IDS)
        if not (isinstance(ids, str) and ids):
            ids = _hami_uuids(annotations.get(HAMI_TO_ALLOCATE))
        if isinstance(ids, str) and ids:
            local = []
            for token in ids.split(","):
                token = token.strip()
                if uuids and token in uuids:
                    local.append(uuids.index(token))
                elif (index := ascii_count(token)) is not None:
                    local.append(index)
                else:
                    return None
    if not local or len(set(local)) != len(local) or max(local) >= num_gpus_on_node or min(local) < 0:
        return None
    return local


def _hami_uuids(value: Any) -> str | None:
    if not isinstance(value, str) or not value:
        return None
    uuids = [dev.split(",")[0] for container in value.split(";") for dev in container.split(":") if dev]
    return ",".join(uuids) or None
