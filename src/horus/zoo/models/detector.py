"""A YOLO-style single-stage detector: YOLOv3-tiny-like Darknet backbone (Redmon & Farhadi 2018), 416x416.

Conv-BN-LeakyReLU layers with max-pool downsampling to stride 32, then a 1x1 head predicting 3 anchors x
(4 box + 1 objectness + 80 COCO classes) per cell. The loss is a squared error against an empty target grid.
"""

from __future__ import annotations

import torch
from torch import nn

from horus.zoo.base import ZooEntry, add, image_input, mean_square_loss
from horus.zoo.models._layers import conv_bn_act


def _leaky() -> nn.Module:
    return nn.LeakyReLU(0.1)


class TinyYolo(nn.Module):
    def __init__(self, classes: int = 80, anchors: int = 3) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        cin = 3
        for i, cout in enumerate((16, 32, 64, 128, 256, 512)):
            layers.append(conv_bn_act(cin, cout, 3, act=_leaky))
            layers.append(nn.MaxPool2d(2, 2) if i < 5 else nn.Identity())
            cin = cout
        self.backbone = nn.Sequential(*layers, conv_bn_act(512, 1024, 3, act=_leaky))
        self.neck = nn.Sequential(conv_bn_act(1024, 256, 1, act=_leaky), conv_bn_act(256, 512, 3, act=_leaky))
        self.head = nn.Conv2d(512, anchors * (5 + classes), 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.neck(self.backbone(x)))


add(ZooEntry(name="yolo", family="detector", build=lambda _size=None: TinyYolo(), example_input=image_input(3),
             loss_fn=mean_square_loss, default_input_size=416, description="YOLOv3-tiny-like detector, 416x416"))
