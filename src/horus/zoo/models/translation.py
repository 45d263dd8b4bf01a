"""Transformer-base translation model (Vaswani et al. 2017), as Gavel's "Transformer" job.

d_model 512, 8 heads, 6 encoder + 6 decoder layers, FFN 2048, sinusoidal positions, separate source and
target embeddings (Multi30k-size vocabularies, ~10k each) and an output projection.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from horus.zoo.base import ZooEntry, add, classification_loss, token_input

VOCAB = 10000


class TransformerTranslator(nn.Module):
    def __init__(self, vocab: int = VOCAB, d_model: int = 512, heads: int = 8, layers: int = 6, ffn: int = 2048,
                 max_len: int = 1024) -> None:
        super().__init__()
        self.scale = math.sqrt(d_model)
        self.src_embed = nn.Embedding(vocab, d_model)
        self.tgt_embed = nn.Embedding(vocab, d_model)
        position = torch.arange(max_len).unsqueeze(1)
        freq = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        table = torch.zeros(max_len, d_model)
        table[:, 0::2] = torch.sin(position * freq)
        table[:, 1::2] = torch.cos(position * freq)
        self.register_buffer("positions", table, persistent=False)
        self.core = nn.Transformer(d_model, heads, layers, layers, ffn, dropout=0.1, batch_first=True)
        self.generator = nn.Linear(d_model, vocab)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        pos_src = self.positions[: src.shape[1]]
        pos_tgt = self.positions[: tgt.shape[1]]
        mask = torch.triu(torch.full((tgt.shape[1], tgt.shape[1]), float("-inf"), device=tgt.device), 1)
        hidden = self.core(self.src_embed(src) * self.scale + pos_src, self.tgt_embed(tgt) * self.scale + pos_tgt,
                           tgt_mask=mask, tgt_is_causal=True)
        return self.generator(hidden)


add(ZooEntry(
    name="transformer", family="transformer", build=lambda _size=None: TransformerTranslator(),
    example_input=token_input(VOCAB, 2), loss_fn=classification_loss, default_input_size=50,
    description="Transformer-base translator (6+6 x 512)",
))
