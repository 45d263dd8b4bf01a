"""Recurrent workloads: word-level LSTM/GRU language models and an LSTM encoder-decoder translator.

The language models follow PyTorch's ``examples/word_language_model`` (used by Gavel's "LM" job):
WikiText-2 vocabulary (33,278 tokens), the example's defaults (2 layers of 200 units,
dropout 0.2), sequence length = BPTT steps (35).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from horus.zoo.base import ZooEntry, add, classification_loss, token_input

WIKITEXT2_VOCAB = 33278


class RNNLanguageModel(nn.Module):
    def __init__(self, cell: type[nn.Module], vocab: int = WIKITEXT2_VOCAB, embed: int = 200, hidden: int = 200,
                 layers: int = 2, dropout: float = 0.2) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, embed)
        self.rnn = cell(embed, hidden, layers, dropout=dropout, batch_first=True)
        self.drop = nn.Dropout(dropout)
        self.decoder = nn.Linear(hidden, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        out, _ = self.rnn(self.drop(self.embed(tokens)))
        return self.decoder(self.drop(out))


class Seq2Seq(nn.Module):
    """LSTM encoder-decoder (Sutskever et al. 2014 style) with teacher forcing."""

    def __init__(self, src_vocab: int = 10000, tgt_vocab: int = 10000, embed: int = 256, hidden: int = 512,
                 layers: int = 2) -> None:
        super().__init__()
        self.src_embed = nn.Embedding(src_vocab, embed)
        self.tgt_embed = nn.Embedding(tgt_vocab, embed)
        self.encoder = nn.LSTM(embed, hidden, layers, batch_first=True)
        self.decoder = nn.LSTM(embed, hidden, layers, batch_first=True)
        self.out = nn.Linear(hidden, tgt_vocab)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        _, state = self.encoder(self.src_embed(src))
        out, _ = self.decoder(self.tgt_embed(tgt), state)
        return self.out(out)


def _entry(name: str, build: Callable[[], nn.Module], vocab: int, seq: int, n_inputs: int, desc: str) -> None:
    add(ZooEntry(name=name, family="recurrent", build=lambda _size=None: build(), example_input=token_input(vocab, n_inputs),
                 loss_fn=classification_loss, default_input_size=seq, description=desc))


_entry("lstm_lm", lambda: RNNLanguageModel(nn.LSTM), WIKITEXT2_VOCAB, 35, 1, "2-layer LSTM LM, WikiText-2 (200 units)")
_entry("gru_lm", lambda: RNNLanguageModel(nn.GRU), WIKITEXT2_VOCAB, 35, 1, "2-layer GRU LM, WikiText-2 (200 units)")
_entry("seq2seq", Seq2Seq, 10000, 30, 2, "2-layer LSTM encoder-decoder translator")
