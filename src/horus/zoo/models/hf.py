"""Transformer language models from Hugging Face ``transformers`` configs (random init, no downloads).

Configs restate the published sizes (BERT: Devlin et al. 2019; GPT-2: Radford et al. 2019; T5-small:
Raffel et al. 2020) so no hub access is needed. Each wrapper returns the logits tensor only.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from horus.zoo.base import ZooEntry, add, classification_loss, token_input

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


class LogitsOnly(nn.Module):
    """Calls a transformers model with keyword inputs and returns ``.logits`` (export-friendly output)."""

    def __init__(self, model: nn.Module, input_names: tuple[str, ...]) -> None:
        super().__init__()
        self.model = model
        self.input_names = input_names

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        kwargs: dict[str, Any] = dict(zip(self.input_names, inputs))
        return self.model(**kwargs, use_cache=False, return_dict=True).logits


def _bert(layers: int, hidden: int, heads: int) -> Callable[[int | None], nn.Module]:
    def build(seq_len: int | None = None) -> nn.Module:
        from transformers import BertConfig, BertForMaskedLM

        config = BertConfig(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                            intermediate_size=4 * hidden, attn_implementation="sdpa")
        return LogitsOnly(BertForMaskedLM(config), ("input_ids",))

    return build


def _gpt2(layers: int, hidden: int, heads: int) -> Callable[[int | None], nn.Module]:
    def build(seq_len: int | None = None) -> nn.Module:
        from transformers import GPT2Config, GPT2LMHeadModel

        config = GPT2Config(n_layer=layers, n_embd=hidden, n_head=heads, attn_implementation="sdpa")
        return LogitsOnly(GPT2LMHeadModel(config), ("input_ids",))

    return build


def _t5_small(seq_len: int | None = None) -> nn.Module:
    from transformers import T5Config, T5ForConditionalGeneration

    config = T5Config(d_model=512, d_ff=2048, num_layers=6, num_heads=8, d_kv=64, vocab_size=32128)
    return LogitsOnly(T5ForConditionalGeneration(config), ("input_ids", "decoder_input_ids"))


# name, builder, vocab, default sequence length, number of token inputs, description
_MODELS: tuple[tuple[str, Callable[[int | None], nn.Module], int, int, int, str], ...] = (
    ("bert_base", _bert(12, 768, 12), 30522, 128, 1, "BERT-base masked LM (12 x 768)"),
    ("bert_large", _bert(24, 1024, 16), 30522, 128, 1, "BERT-large masked LM (24 x 1024)"),
    ("gpt2", _gpt2(12, 768, 12), 50257, 1024, 1, "GPT-2 small LM (12 x 768)"),
    ("gpt2_medium", _gpt2(24, 1024, 16), 50257, 1024, 1, "GPT-2 medium LM (24 x 1024)"),
    ("gpt2_xl", _gpt2(48, 1600, 25), 50257, 1024, 1, "GPT-2 XL LM (48 x 1600, 1.5B params)"),
    ("t5_small", _t5_small, 32128, 128, 2, "T5-small encoder-decoder (6+6 x 512)"),
)

for _name, _build, _vocab, _seq, _n_inputs, _desc in _MODELS:
    add(ZooEntry(
        name=_name, family="transformer", build=_build, example_input=token_input(_vocab, _n_inputs),
        loss_fn=classification_loss, default_input_size=_seq, description=_desc,
    ))
