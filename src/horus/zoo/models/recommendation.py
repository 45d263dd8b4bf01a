"""Recommendation: NeuMF (He et al. 2017, MLPerf NCF sizes on MovieLens-20M), a DLRM-style model (Naumov 2019)
and the Recoder autoencoder of Gavel's "Recommendation" job.

``recoder`` models Recoder's ``DynamicAutoencoder(hidden_layers=[200], activation_type='tanh')`` as Gavel
trains it on MovieLens-20M: a user's item vector is L2-normalised, encoded by a dense layer to 200 units
with tanh and decoded back to one score per item (no output activation, untied weights). The item count
20,108 is the assumption of the hand-estimated catalog row this entry replaced (8,063,508 parameters).
The whole vector is reconstructed, i.e. Recoder's negative sampling of target items is not modelled.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from horus.zoo.base import Inputs, ZooEntry, add

ML20M_USERS, ML20M_ITEMS = 138493, 26744
RECODER_ITEMS = 20108  # items in Gavel's Recoder workload (assumption, see module docstring)


def _mlp(widths: tuple[int, ...], last_act: bool = True) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(zip(widths, widths[1:])):
        layers.append(nn.Linear(a, b))
        if last_act or i < len(widths) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class NeuMF(nn.Module):
    """GMF (dot of 64-d factors) + MLP tower (256-256-128-64) over user/item embeddings."""

    def __init__(self, users: int = ML20M_USERS, items: int = ML20M_ITEMS, factors: int = 64,
                 mlp: tuple[int, ...] = (256, 256, 128, 64)) -> None:
        super().__init__()
        self.user_mf, self.item_mf = nn.Embedding(users, factors), nn.Embedding(items, factors)
        self.user_mlp, self.item_mlp = nn.Embedding(users, mlp[0] // 2), nn.Embedding(items, mlp[0] // 2)
        self.mlp = _mlp(mlp)
        self.out = nn.Linear(factors + mlp[-1], 1)

    def forward(self, pairs: torch.Tensor) -> torch.Tensor:
        user, item = pairs[:, 0], pairs[:, 1]
        gmf = self.user_mf(user) * self.item_mf(item)
        tower = self.mlp(torch.cat([self.user_mlp(user), self.item_mlp(item)], 1))
        return self.out(torch.cat([gmf, tower], 1)).squeeze(1)


def ncf_input(batch: int, input_size: int | None, device: Any = "cpu") -> Inputs:
    return (torch.stack([torch.randint(0, ML20M_USERS, (batch,), device=device),
                         torch.randint(0, ML20M_ITEMS, (batch,), device=device)], 1),)


class DLRM(nn.Module):
    """Bottom MLP on dense features, one embedding table per sparse feature, pairwise dot interactions, top MLP."""

    def __init__(self, dense: int = 13, tables: int = 26, rows: int = 100_000, dim: int = 16,
                 bottom: tuple[int, ...] = (512, 256, 64), top: tuple[int, ...] = (512, 256)) -> None:
        super().__init__()
        self.bottom = _mlp((dense, *bottom, dim))
        self.tables = nn.ModuleList(nn.Embedding(rows, dim) for _ in range(tables))
        n = tables + 1
        self.top = _mlp((dim + n * (n - 1) // 2, *top, 1), last_act=False)
        self.register_buffer("pairs", torch.triu_indices(n, n, 1), persistent=False)

    def forward(self, dense: torch.Tensor, sparse: torch.Tensor) -> torch.Tensor:
        x = self.bottom(dense)
        vectors = torch.stack([x] + [table(sparse[:, i]) for i, table in enumerate(self.tables)], 1)
        dots = torch.bmm(vectors, vectors.transpose(1, 2))
        return self.top(torch.cat([x, dots[:, self.pairs[0], self.pairs[1]]], 1)).squeeze(1)


def dlrm_input(batch: int, input_size: int | None, device: Any = "cpu") -> Inputs:
    return (torch.randn(batch, input_size or 13, device=device), torch.randint(0, 100_000, (batch, 26), device=device))


def click_loss(output: Any, inputs: Inputs) -> torch.Tensor:
    """Binary cross entropy of click/interaction logits against label 1."""
    return F.binary_cross_entropy_with_logits(output, torch.ones_like(output))


class RecoderAutoencoder(nn.Module):
    """Item vector -> L2 normalise -> (input noise) -> Linear(items, hidden) -> tanh -> Linear(hidden, items)."""

    def __init__(self, items: int = RECODER_ITEMS, hidden: int = 200, noise_prob: float = 0.0) -> None:
        super().__init__()
        self.noise = nn.Dropout(noise_prob)
        self.encoder = nn.Linear(items, hidden)
        self.decoder = nn.Linear(hidden, items)

    def forward(self, ratings: torch.Tensor) -> torch.Tensor:
        code = torch.tanh(self.encoder(self.noise(F.normalize(ratings, p=2.0, dim=1))))
        return self.decoder(code)


def recoder_input(batch: int, input_size: int | None, device: Any = "cpu") -> Inputs:
    """Sparse 0/1 interaction vectors (about 1 % of items rated)."""
    items = input_size or RECODER_ITEMS
    return ((torch.rand(batch, items, device=device) < 0.01).float(),)


def reconstruction_loss(output: Any, inputs: Inputs) -> torch.Tensor:
    """Mean squared error between the reconstructed and the input item vector."""
    return F.mse_loss(output, inputs[0])


add(ZooEntry(name="ncf", family="recommendation", build=lambda _size=None: NeuMF(), example_input=ncf_input,
             loss_fn=click_loss, default_input_size=2, description="NeuMF on MovieLens-20M (MLPerf sizes)"))
add(ZooEntry(name="dlrm", family="recommendation", build=lambda size=None: DLRM(dense=size or 13),
             example_input=dlrm_input, loss_fn=click_loss, default_input_size=13,
             description="DLRM-style CTR model: 13 dense + 26 sparse features (100k rows x 16)"))
add(ZooEntry(name="recoder", family="recommendation",
             build=lambda size=None: RecoderAutoencoder(items=size or RECODER_ITEMS), example_input=recoder_input,
             loss_fn=reconstruction_loss, default_input_size=RECODER_ITEMS,
             description="Recoder autoencoder (items -> 200 tanh -> items) on MovieLens-20M, as Gavel's Recommendation job"))
