"""ViT-B/16 (Dosovitskiy et al. 2021): 16x16 patches, 12 pre-norm encoder layers of width 768, 12 heads."""

from __future__ import annotations

import torch
from torch import nn

from horus.zoo.base import ZooEntry, add, classification_loss, image_input


class EncoderLayer(nn.Module):
    def __init__(self, dim: int, heads: int, mlp: int) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.ln2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp), nn.GELU(), nn.Dropout(0.0), nn.Linear(mlp, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.ln1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class VisionTransformer(nn.Module):
    def __init__(self, image: int = 224, patch: int = 16, dim: int = 768, depth: int = 12, heads: int = 12,
                 mlp: int = 3072, num_classes: int = 1000) -> None:
        super().__init__()
        self.patchify = nn.Conv2d(3, dim, patch, patch)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embedding = nn.Parameter(torch.randn(1, (image // patch) ** 2 + 1, dim) * 0.02)
        self.layers = nn.Sequential(*(EncoderLayer(dim, heads, mlp) for _ in range(depth)))
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens = self.patchify(x).flatten(2).transpose(1, 2)
        tokens = torch.cat([self.cls_token.expand(tokens.shape[0], -1, -1), tokens], 1) + self.pos_embedding
        return self.head(self.norm(self.layers(tokens))[:, 0])


add(ZooEntry(
    name="vit_b16", family="transformer", build=lambda size=None: VisionTransformer(image=size or 224),
    example_input=image_input(3), loss_fn=classification_loss, default_input_size=224,
    description="ViT-B/16 image classifier",
))
