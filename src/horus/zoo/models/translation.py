"""Transformer-base translation model (Vaswani et al. 2017), as Gavel's "Transformer" job.

d_model 512, 8 heads, 6 encoder + 6 decoder layers, FFN 2048, sinusoidal positions, separate source and
target embeddings and an output projection (no weight sharing). Defaults follow the assumptions of the
hand-estimated catalog row for Gavel's Multi30k workload: 8,000 source / 6,000 target tokens and
32 tokens per sentence (the default input size).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from horus.zoo.base import Inputs, ZooEntry, add, classification_loss

SRC_VOCAB, TGT_VOCAB = 8000, 6000  # Multi30k de -> en (assumed sizes, see module docstring)
SENTENCE_TOKENS = 32


class TransformerTranslator(nn.Module):
    def __init__(self, src_vocab: int = SRC_VOCAB, tgt_vocab: int = TGT_VOCAB, d_model: int = 512, heads: int = 8,
                 layers: int = 6, ffn: int = 2048, max_len: int = 1024) -> None:
        super().__init__()
        self.scale = math.sqrt(d_model)
        self.src_embed = nn.Embedding(src_vocab, d_model)
        self.tgt_embed = nn.Embedding(tgt_vocab, d_model)
        position = torch.arange(max_len).unsqueeze(1)
        freq = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        table = torch.zeros(max_len, d_model)
        table[:, 0::2] = torch.sin(position * freq)
        table[:, 1::2] = torch.cos(position * freq)
        self.register_buffer("positions", table, persistent=False)
        self.core = nn.Transformer(d_model, heads, layers, layers, ffn, dropout=0.1, batch_first=True)
        self.generator = nn.Linear(d_model, tgt_vocab)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        pos_src = self.positions[: src.shape[1]]
        pos_tgt = self.positions[: tgt.shape[1]]
        mask = torch.triu(torch.full((tgt.shape[1], tgt.shape[1]), float("-inf"), device=tgt.device), 1)
        hidden = self.core(self.src_embed(src) * self.scale + pos_src, self.tgt_embed(tgt) * self.scale + pos_tgt,
                           tgt_mask=mask, tgt_is_causal=True)
        return self.generator(hidden)


def translation_input(batch: int, input_size: int | None, device: Any = "cpu") -> Inputs:
    """Source and target token ids, both (batch, input_size)."""
    length = input_size or SENTENCE_TOKENS
    return (torch.randint(0, SRC_VOCAB, (batch, length), device=device),
            torch.randint(0, TGT_VOCAB, (batch, length), device=device))


add(ZooEntry(
    name="transformer", family="transformer", build=lambda _size=None: TransformerTranslator(),
    example_input=translation_input, loss_fn=classification_loss, default_input_size=SENTENCE_TOKENS,
    description="Transformer-base translator (6+6 x 512), Multi30k vocabularies, as Gavel's Transformer job",
))
