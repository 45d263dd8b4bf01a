"""GPU type presets and GPU-type requests.

Memory is the vendor spec-sheet capacity (GB on the sheet -> x1024 MiB). ``speed`` is *approximate*
deep-learning training throughput relative to a V100 (= 1.0), rounded; treat it as +-20 %:

- K80, P100: Gavel's measured single-GPU throughputs (``simulation_throughputs.json``, OSDI 2020):
  K80 / V100 is 0.14-0.20 for ResNet-50 and ~0.25 median over its 26 job types; P100 / V100 is
  0.60-0.79 for ResNet-50 and ~0.81 median. We use 0.25 and 0.75.
- T4, A10, A100, H100, H200: ratios of public ResNet-50 training throughputs (NVIDIA Deep Learning
  Performance pages / MLPerf Training, mixed precision) to V100's, rounded: T4 ~0.3, A10 ~0.75,
  A100 ~2 (2.1 for the 80 GB card's faster HBM2e), H100 SXM ~3.3, H200 ~3.6 (H100 compute, more
  memory bandwidth).

A40, RTX 6000 (Quadro, Turing), L4: rough ratios of their FP16 tensor / FP32 peaks and bandwidth
to V100's, for the fallback scalar only. RTX 3090, RTX 4090, RTX A6000, L40S: the geometric mean of
their dense FP16-tensor (FP32 accumulate) peak ratio and DRAM bandwidth ratio to V100's (125 TFLOPS,
900 GB/s; figures in ``SPECS``), rounded to 0.05: 3090 sqrt(0.57 x 1.04) ~ 0.75, 4090 sqrt(1.32 x 1.12)
~ 1.2, A6000 sqrt(1.24 x 0.85) ~ 1.05, L40S sqrt(2.90 x 0.96) ~ 1.65, RTX 6000 Ada sqrt(2.91 x 1.07) ~ 1.75.
H100 PCIe: H100 SXM's 3.3 scaled by the geometric mean of the PCIe card's FP16-tensor and bandwidth ratios to the
SXM's (756 / 989.4, 2000 / 3350): 3.3 x 0.68 ~ 2.2. Not measured; GeForce cards
often train faster than this rule says (their FP16-accumulate tensor path is twice as fast). ``GPUSpec`` (below) holds the vendor peak figures used by the
physical predictor, for every preset and a few more cards.

Other parts of the simulator (truth models) may know per-job-type speeds; ``speed`` is only the
fallback scalar for types they do not cover.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

from horus.cluster import GPUType

GIB = 1024  # MiB per GiB

PRESETS: dict[str, GPUType] = {
    t.name: t
    for t in (
        GPUType("K80", 12 * GIB, 0.25),  # per GPU die (a K80 board carries two)
        GPUType("P100", 16 * GIB, 0.75),
        GPUType("V100", 16 * GIB, 1.0),
        GPUType("V100-32GB", 32 * GIB, 1.0),
        GPUType("T4", 16 * GIB, 0.3),
        GPUType("A10", 24 * GIB, 0.75),
        GPUType("A100-40GB", 40 * GIB, 2.0),
        GPUType("A100-80GB", 80 * GIB, 2.1),
        GPUType("H100", 80 * GIB, 3.3),
        GPUType("H100-PCIe", 80 * GIB, 2.2),
        GPUType("H200", 141 * GIB, 3.6),
        GPUType("A40", 48 * GIB, 1.2),
        GPUType("RTX6000", 24 * GIB, 0.9),
        GPUType("L4", 24 * GIB, 0.8),
        GPUType("L40S", 48 * GIB, 1.65),
        GPUType("RTX3090", 24 * GIB, 0.75),
        GPUType("RTX4090", 24 * GIB, 1.2),
        GPUType("RTX-A6000", 48 * GIB, 1.05),
        GPUType("RTX6000-Ada", 48 * GIB, 1.75),
    )
}

# A job's ``gpu_type_request`` may list several acceptable types separated by this character
# (Alibaba openb ``gpu_spec`` such as ``V100M16|V100M32``).
REQUEST_SEPARATOR = "|"


def preset(name: str) -> GPUType:
    """The preset GPU type ``name``; KeyError listing the known names otherwise."""
    try:
        return PRESETS[name]
    except KeyError:
        raise KeyError(f"unknown GPU type {name!r}; presets: {', '.join(PRESETS)}") from None


def accepted_gpu_types(request: str | None) -> frozenset[str] | None:
    """GPU type names a job accepts: None means any type; ``"V100|V100-32GB"`` -> both names."""
    if not request:
        return None
    return frozenset(part.strip() for part in request.split(REQUEST_SEPARATOR) if part.strip())


# ---- physical specifications --------------------------------------------------------------------

@dataclass(frozen=True)
class GPUSpec:
    """Vendor peak figures of one GPU (dense, no sparsity; boost clocks; per GPU die).

    ``fp32_tflops``: CUDA-core FP32. ``tf32_tflops``: tensor-core TF32 (= FP32 where there is none).
    ``fp16_tflops``: the fastest FP16 matrix path with FP32 accumulation (tensor cores from Volta on;
    packed FP16 on P100; = FP32 on Kepler). ``mem_bw_gbs``: DRAM bandwidth, GB/s.
    """

    name: str
    fp32_tflops: float
    tf32_tflops: float
    fp16_tflops: float
    mem_bw_gbs: float
    memory_gib: float
    sms: int
    architecture: str
    source: str

    @property
    def has_tensor_cores(self) -> bool:
        return self.fp16_tflops > 2.5 * self.fp32_tflops


_DS = "NVIDIA data sheet"
SPECS: dict[str, GPUSpec] = {
    s.name: s
    for s in (
        GPUSpec("K80", 4.37, 4.37, 4.37, 240, 12, 13, "kepler",
                f"{_DS}: Tesla K80 board 8.73 TFLOPS FP32 boost, 480 GB/s, 2 x GK210 (13 SMX each); halved per die"),
        GPUSpec("P100", 9.3, 9.3, 18.7, 732, 16, 56, "pascal", f"{_DS}: Tesla P100 PCIe 16 GB"),
        GPUSpec("V100", 15.7, 15.7, 125, 900, 16, 80, "volta", f"{_DS}: Tesla V100 SXM2 (PCIe: 14 / 112)"),
        GPUSpec("V100-32GB", 15.7, 15.7, 125, 900, 32, 80, "volta", f"{_DS}: Tesla V100 SXM2 32 GB"),
        GPUSpec("T4", 8.1, 8.1, 65, 320, 16, 40, "turing", f"{_DS}: Tesla T4 (70 W)"),
        GPUSpec("RTX6000", 16.3, 16.3, 130.5, 672, 24, 72, "turing", f"{_DS}: Quadro RTX 6000"),
        GPUSpec("RTX2080Ti", 13.4, 13.4, 53.8, 616, 11, 68, "turing",
                "NVIDIA Turing architecture whitepaper, GeForce RTX 2080 Ti (FP16 tensor with FP32 accumulate)"),
        GPUSpec("RTX3090", 35.6, 35.6, 71, 936, 24, 82, "ampere",
                "NVIDIA Ampere GA102 whitepaper, GeForce RTX 3090 (tensor FP16/TF32 with FP32 accumulate, dense)"),
        GPUSpec("RTX4090", 82.6, 82.6, 165.2, 1008, 24, 128, "ada",
                "NVIDIA Ada Lovelace whitepaper, GeForce RTX 4090 (tensor FP16 with FP32 accumulate, dense)"),
        GPUSpec("A10", 31.2, 62.5, 125, 600, 24, 72, "ampere", f"{_DS}: A10"),
        GPUSpec("A30", 10.3, 82, 165, 933, 24, 56, "ampere", f"{_DS}: A30"),
        GPUSpec("A40", 37.4, 74.8, 149.7, 696, 48, 84, "ampere", f"{_DS}: A40"),
        GPUSpec("RTX-A6000", 38.7, 77.4, 154.8, 768, 48, 84, "ampere",
                f"{_DS}: NVIDIA RTX A6000 (tensor 309.7 TFLOPS with sparsity, halved for dense); "
                "TF32 from the NVIDIA Ampere GA102 whitepaper"),
        GPUSpec("A100-40GB", 19.5, 156, 312, 1555, 40, 108, "ampere", f"{_DS}: A100 SXM4 40 GB"),
        GPUSpec("A100-80GB", 19.5, 156, 312, 2039, 80, 108, "ampere", f"{_DS}: A100 SXM4 80 GB"),
        GPUSpec("L4", 30.3, 60, 121, 300, 24, 58, "ada", f"{_DS}: L4"),
        GPUSpec("L40S", 91.6, 183, 362, 864, 48, 142, "ada", f"{_DS}: L40S"),
        GPUSpec("RTX6000-Ada", 91.1, 182.1, 364.2, 960, 48, 142, "ada",
                "NVIDIA RTX 6000 Ada Generation data sheet (91.1 TFLOPS FP32, 960 GB/s, 48 GB GDDR6, 142 SMs) and "
                "NVIDIA Ada Lovelace whitepaper (tensor TF32 182.1, FP16 with FP32 accumulate 364.2 TFLOPS dense "
                "= 142 SMs x 1024 FLOP/clock x 2.505 GHz boost)"),
        GPUSpec("H100", 67, 494.7, 989.4, 3350, 80, 132, "hopper", f"{_DS}: H100 SXM5"),
        GPUSpec("H100-PCIe", 51, 378, 756, 2000, 80, 114, "hopper", f"{_DS}: H100 PCIe"),
        GPUSpec("H200", 67, 494.7, 989.4, 4800, 141, 132, "hopper", f"{_DS}: H200 SXM"),
    )
}

# (tokens that must all appear in the upper-cased name without spaces/dashes, spec), most specific first.
_SPEC_RULES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("H200",), "H200"), (("H100", "PCIE"), "H100-PCIe"), (("H100",), "H100"), (("H800",), "H100"),
    (("A100", "80"), "A100-80GB"), (("A100",), "A100-40GB"), (("A800",), "A100-40GB"),
    (("L40",), "L40S"), (("L4",), "L4"), (("A40",), "A40"), (("A30",), "A30"), (("A10",), "A10"),
    (("V100", "32"), "V100-32GB"), (("V100",), "V100"), (("4090",), "RTX4090"), (("3090",), "RTX3090"),
    (("2080",), "RTX2080Ti"), (("6000", "ADA"), "RTX6000-Ada"), (("RTX6000",), "RTX6000"), (("A6000",), "RTX-A6000"), (("T4",), "T4"),
    (("P100",), "P100"), (("K80",), "K80"),
)
# Family fallbacks for names no rule matches (normalised name = letters of the family then digits).
_FAMILY_RULES: tuple[tuple[str, str], ...] = (
    ("RTX", "RTX3090"), ("GTX", "RTX2080Ti"), ("H1", "H100"), ("H2", "H200"), ("A1", "A100-40GB"), ("A", "A10"),
    ("L", "L4"), ("V", "V100"), ("P", "P100"), ("K", "K80"), ("T", "T4"),
)
_warned: set[str] = set()


def _normalise(name: str) -> str:
    up = name.upper().replace("NVIDIA", "").replace("TESLA", "").replace("QUADRO", "").replace("GEFORCE", "")
    return "".join(ch for ch in up if ch.isalnum())


def lookup_spec(name: str) -> tuple[GPUSpec, str]:
    """(spec, how matched): ``exact`` (a spec or preset name), ``rule`` (an NVML-style name), ``family`` (letters
    + digits of a known family, e.g. ``RTX 3070``) or ``none`` (unrecognisable: the V100 spec)."""
    if name in SPECS:
        return SPECS[name], "exact"
    norm = _normalise(name)
    for spec_name in SPECS:
        if _normalise(spec_name) == norm:
            return SPECS[spec_name], "exact"
    for tokens, spec_name in _SPEC_RULES:
        if all(t in norm for t in tokens):
            return SPECS[spec_name], "rule"
    for prefix, spec_name in _FAMILY_RULES:
        if norm.startswith(prefix) and norm[len(prefix):][:1].isdigit():
            return SPECS[spec_name], "family"
    return SPECS["V100"], "none"


def gpu_spec(name: str) -> GPUSpec:
    """The spec of GPU ``name``: a spec/preset name, an NVML device name or a family guess.

    Unknown names map to the nearest family (warning once per name); a name with no family at
    all gets the V100 spec (with a warning). Never raises.
    """
    spec, how = lookup_spec(name)
    if how in ("family", "none") and name not in _warned:
        _warned.add(name)
        warnings.warn(f"unknown GPU {name!r}: using the {spec.name} specification", stacklevel=2)
    return spec
