"""Import every interference model so that INTERFERENCE_MODELS is complete."""

from __future__ import annotations

from horus.interference.base import INTERFERENCE_MODELS, InterferenceModel
from horus.interference.contention import ContentionInterference, ZeroShotContention
from horus.interference.factorization import IASP, LowRankMC
from horus.interference.iapp import IAPP
from horus.interference.physical import PhysicalInterference
from horus.interference.summed_util import SummedUtilization

__all__ = ["INTERFERENCE_MODELS", "IASP", "IAPP", "ContentionInterference", "InterferenceModel", "LowRankMC",
           "PhysicalInterference", "SummedUtilization", "ZeroShotContention"]
