"""IASP and Gavel-style low-rank matrix completion: a biased factorisation of the pair matrix.

Row job i's normalized throughput next to column job j is modelled as

    y_ij = mu + b_i + c_j + <u_i, v_j>,   u_i = P_i + A f_i,  v_j = Q_j + B f_j,
                                           b_i = e_i + w_b . f_i, c_j = g_j + w_c . f_j

where f is the standardized side-feature vector of a job type (graph features + predicted solo
utilization/memory). P, Q, e, g are per-type free parameters (L2 towards 0), A, B, w_b, w_c map
features to factors (Koren-style biased MF with feature-based priors, as in "SVDFeature"/RLFM).
A type with no measured pair keeps P = Q = e = g = 0, so its factors come only from its features:
that is the cold start. Without side features (``LowRankMC``) the model is plain biased low-rank
completion, Gavel's approach for unseen pairs; an unseen type then gets the global mean.
Trained by L-BFGS on the regularized squared error (closed-form gradient). For more than one
co-runner the pairwise throughputs are multiplied (independent slowdowns; documented assumption).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import sparse
from scipy.optimize import minimize

from horus.cluster import GPUType
from horus.interference.base import INTERFERENCE_MODELS, InterferenceModel, clip_throughput
from horus.interference.data import JobFeatures, Observation, gpu_type_of


@INTERFERENCE_MODELS.register("iasp")
class IASP(InterferenceModel):
    """Collaborative filtering of the pair matrix with side features (cold start via features)."""

    name = "iasp"
    use_side_features = True

    def __init__(self, features: JobFeatures | None = None, seed: int = 0, rank: int = 5,
                 reg_free: float = 1.0, reg_map: float = 1.0, max_iter: int = 500) -> None:
        super().__init__(features, seed)
        self.rank = rank
        self.reg_free = reg_free
        self.reg_map = reg_map
        self.max_iter = max_iter
        self.types: list[str] = []
        self.params: dict[str, np.ndarray] = {}
        self.feat_mean = np.zeros(0)
        self.feat_std = np.ones(0)
        self.skipped_larger_sets = 0
        self.n_iter = 0

    # ---- features --------------------------------------------------------------------------
    def _feat(self, job_type: str, gpu: GPUType | str) -> np.ndarray:
        if not self.use_side_features:
            return np.zeros(0)
        return (self.features.vector(job_type, gpu) - self.feat_mean) / self.feat_std

    # ---- training --------------------------------------------------------------------------
    def fit(self, observations: Sequence[Observation]) -> IASP:
        pairs = [o for o in observations if len(o.corunners) == 1]
        self.skipped_larger_sets = len(observations) - len(pairs)
        if not pairs:
            raise ValueError("IASP needs at least one pair observation")
        self.types = sorted({t for o in pairs for t in o.job_types})
        index = {t: k for k, t in enumerate(self.types)}
        # One feature row per (type, gpu) occurrence.
        rows: dict[tuple[str, str], int] = {}
        for o in pairs:
            for t in o.job_types:
                rows.setdefault((t, o.gpu), len(rows))
        d = len(self.features.names) if self.use_side_features else 0
        if d:
            raw = np.vstack([self.features.vector(t, g) for (t, g) in rows])
            self.feat_mean = raw.mean(axis=0)
            std = raw.std(axis=0)
            self.feat_std = np.where(std > 1e-9, std, 1.0)
            feats = (raw - self.feat_mean) / self.feat_std
        else:
            feats = np.zeros((len(rows), 0))
        i_type = np.array([index[o.target] for o in pairs])
        j_type = np.array([index[o.corunners[0]] for o in pairs])
        i_row = np.array([rows[(o.target, o.gpu)] for o in pairs])
        j_row = np.array([rows[(o.corunners[0], o.gpu)] for o in pairs])
        y = np.array([o.value for o in pairs])
        n, k = len(self.types), self.rank
        rng = np.random.default_rng(self.seed)
        shapes = {"mu": (1,), "e": (n,), "g": (n,), "P": (n, k), "Q": (n, k),
                  "wb": (d,), "wc": (d,), "A": (d, k), "B": (d, k)}
        init = {name: 0.05 * rng.standard_normal(shape) for name, shape in shapes.items()}
        init["mu"] = np.array([y.mean()])
        init["e"] = np.zeros(n)
        init["g"] = np.zeros(n)
        names = list(shapes)
        sizes = [int(np.prod(shapes[s])) for s in names]

        def unpack(x: np.ndarray) -> dict[str, np.ndarray]:
            out, pos = {}, 0
            for s, size in zip(names, sizes):
                out[s] = x[pos:pos + size].reshape(shapes[s])
                pos += size
            return out

        free, mapped = ("e", "g", "P", "Q"), ("wb", "wc", "A", "B")
        m = len(y)
        row_onehot = sparse.csr_matrix((np.ones(m), (np.arange(m), i_type)), shape=(m, n))
        col_onehot = sparse.csr_matrix((np.ones(m), (np.arange(m), j_type)), shape=(m, n))
        fi, fj = feats[i_row], feats[j_row]

        def loss_grad(x: np.ndarray) -> tuple[float, np.ndarray]:
            p = unpack(x)
            u_all = row_onehot @ p["P"] + fi @ p["A"]
            v_all = col_onehot @ p["Q"] + fj @ p["B"]
            pred = (p["mu"][0] + row_onehot @ p["e"] + fi @ p["wb"]
                    + col_onehot @ p["g"] + fj @ p["wc"] + np.einsum("ij,ij->i", u_all, v_all))
            r = pred - y
            gu = r[:, None] * v_all
            gv = r[:, None] * u_all
            grads = {"mu": np.array([r.sum()]), "e": row_onehot.T @ r, "g": col_onehot.T @ r,
                     "P": row_onehot.T @ gu, "Q": col_onehot.T @ gv,
                     "wb": fi.T @ r, "wc": fj.T @ r, "A": fi.T @ gu, "B": fj.T @ gv}
            loss = 0.5 * float(r @ r)
            for group, lam in ((free, self.reg_free), (mapped, self.reg_map)):
                for s in group:
                    loss += 0.5 * lam * float(np.sum(p[s] ** 2))
                    grads[s] = grads[s] + lam * p[s]
            return loss, np.concatenate([np.asarray(grads[s]).ravel() for s in names])

        x0 = np.concatenate([init[s].ravel() for s in names])
        result = minimize(loss_grad, x0, jac=True, method="L-BFGS-B", options={"maxiter": self.max_iter})
        self.params = {s: v.copy() for s, v in unpack(result.x).items()}
        self.n_iter = int(result.nit)
        return self

    # ---- prediction ------------------------------------------------------------------------
    def _factors(self, job_type: str, gpu: GPUType | str) -> tuple[float, float, np.ndarray, np.ndarray]:
        """(row bias, column bias, row factor u, column factor v) of a type; features only if unseen."""
        p = self.params
        f = self._feat(job_type, gpu)
        try:
            k = self.types.index(job_type)
            e, g, P, Q = p["e"][k], p["g"][k], p["P"][k], p["Q"][k]
        except ValueError:
            e, g, P, Q = 0.0, 0.0, np.zeros(self.rank), np.zeros(self.rank)
        return (e + float(f @ p["wb"]), g + float(f @ p["wc"]), P + f @ p["A"], Q + f @ p["B"])

    def pair(self, target: str, corunner: str, gpu: GPUType | str) -> float:
        """Raw (unclipped) predicted normalized throughput of ``target`` next to ``corunner``."""
        if not self.params:
            raise RuntimeError(f"{self.name} model is not trained")
        bi, _, u, _ = self._factors(target, gpu)
        _, cj, _, v = self._factors(corunner, gpu)
        return float(self.params["mu"][0] + bi + cj + u @ v)

    def predict_one(self, target: str, corunners: Sequence[str], gpu: GPUType | str) -> float:
        gt = gpu_type_of(gpu)
        value = 1.0
        for other in corunners:
            value *= clip_throughput(self.pair(target, other, gt))
        return clip_throughput(value)

    def describe(self) -> dict[str, object]:
        return {**super().describe(), "rank": self.rank, "reg_free": self.reg_free, "reg_map": self.reg_map,
                "side_features": self.use_side_features, "trained_types": list(self.types)}


@INTERFERENCE_MODELS.register("lowrank-mc")
class LowRankMC(IASP):
    """Gavel-style baseline: biased low-rank completion of the pair matrix, no side features."""

    name = "lowrank-mc"
    use_side_features = False

    def __init__(self, features: JobFeatures | None = None, seed: int = 0, rank: int = 3,
                 reg_free: float = 0.3, reg_map: float = 1.0, max_iter: int = 500) -> None:
        # Own defaults, tuned on the same V100 random protocol as IASP's (rank 2-5, reg 0.1-1.0).
        super().__init__(features, seed, rank, reg_free, reg_map, max_iter)

    def describe(self) -> dict[str, object]:
        out = super().describe()
        out["feature_names"] = []
        return out
