"""Workloads of the public measurements the physical predictor is calibrated and evaluated on.

* ``shufflenet_v2_cifar100``: ShuffleNetV2 1.0x for CIFAR-100 (32x32, 100 classes) with a stride-1 3x3 stem
  and no max-pool, the common CIFAR adaptation (as in the ``pytorch-cifar100`` repository Zeus's
  ShuffleNet-v2 workload follows; an assumption, the Zeus trace does not state the layout).
* ``ncf_ml1m``: NeuMF with MovieLens-1M's 6,040 users and 3,706 items (Zeus and Pollux NCF workloads).
* ``bert_base_squad``: BERT-base with a span-prediction head at sequence length 384 (SQuAD fine-tuning,
  Pollux and Zeus BERT workloads).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from horus.zoo.base import Inputs, ZooEntry, add, classification_loss, image_input, token_input
from horus.zoo.models._layers import conv_bn_act
from horus.zoo.models.compact import ShuffleNetV2
from horus.zoo.models.recommendation import NeuMF, click_loss

ML1M_USERS, ML1M_ITEMS = 6040, 3706


def ml1m_input(batch: int, input_size: int | None, device: Any = "cpu") -> Inputs:
    return (torch.stack([torch.randint(0, ML1M_USERS, (batch,), device=device),
                         torch.randint(0, ML1M_ITEMS, (batch,), device=device)], 1),)


def shufflenet_v2_cifar100() -> nn.Module:
    net = ShuffleNetV2()
    net.stem = conv_bn_act(3, 24, 3, 1)
    net.fc = nn.Linear(1024, 100)
    return net


class BertSpans(nn.Module):
    """BERT-base encoder + start/end span logits (transformers ``BertForQuestionAnswering``)."""

    def __init__(self) -> None:
        super().__init__()
        from transformers import BertConfig, BertForQuestionAnswering

        config = BertConfig(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072,
                            attn_implementation="sdpa")
        self.model = BertForQuestionAnswering(config)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        out = self.model(input_ids=input_ids, return_dict=True)
        return torch.stack([out.start_logits, out.end_logits], 1)


def span_loss(output: Any, inputs: Inputs) -> torch.Tensor:
    """Cross entropy of start and end logits against position 0."""
    logits = output.reshape(-1, output.shape[-1])
    return F.cross_entropy(logits, torch.zeros(logits.shape[0], dtype=torch.long, device=logits.device))


add(ZooEntry(name="shufflenet_v2_cifar100", family="cnn", build=lambda _size=None: shufflenet_v2_cifar100(),
             example_input=image_input(3), loss_fn=classification_loss, default_input_size=32,
             description="ShuffleNetV2 1.0x on CIFAR-100 (stride-1 stem, no max-pool)"))
add(ZooEntry(name="ncf_ml1m", family="recommendation", build=lambda _size=None: NeuMF(ML1M_USERS, ML1M_ITEMS),
             example_input=ml1m_input, loss_fn=click_loss, default_input_size=2,
             description="NeuMF on MovieLens-1M"))
add(ZooEntry(name="bert_base_squad", family="transformer", build=lambda _size=None: BertSpans(),
             example_input=token_input(30522), loss_fn=span_loss, default_input_size=384,
             description="BERT-base span prediction at sequence length 384 (SQuAD fine-tuning)"))
