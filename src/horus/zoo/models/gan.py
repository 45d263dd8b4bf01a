"""GANs: DCGAN (Radford et al. 2016, 64x64) and CycleGAN (Zhu et al. 2017, 256x256, ResNet-9 generators).

A training step runs the generator(s) and the discriminator(s), so the zoo model wraps both.
``cyclegan`` is one full CycleGAN training step as in Gavel's CycleGAN job: two ResNet-9 generators and
two 70x70 PatchGAN discriminators; 6 generator passes (2 identity, 2 translations, 2 cycle reconstructions)
and 6 discriminator passes (2 on translations for the generator loss, 2 on real and 2 on detached fake
images for the discriminator loss).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from horus.zoo.base import Inputs, ZooEntry, add


def _up(cin: int, cout: int, stride: int = 2, padding: int = 1) -> list[nn.Module]:
    return [nn.ConvTranspose2d(cin, cout, 4, stride, padding, bias=False), nn.BatchNorm2d(cout), nn.ReLU()]


def _down(cin: int, cout: int, norm: bool = True) -> list[nn.Module]:
    return [nn.Conv2d(cin, cout, 4, 2, 1, bias=False), *([nn.BatchNorm2d(cout)] if norm else []), nn.LeakyReLU(0.2)]


class DCGAN(nn.Module):
    def __init__(self, latent: int = 100, width: int = 64) -> None:
        super().__init__()
        w = width
        self.generator = nn.Sequential(
            *_up(latent, 8 * w, 1, 0), *_up(8 * w, 4 * w), *_up(4 * w, 2 * w), *_up(2 * w, w),
            nn.ConvTranspose2d(w, 3, 4, 2, 1, bias=False), nn.Tanh(),
        )
        self.discriminator = nn.Sequential(
            *_down(3, w, norm=False), *_down(w, 2 * w), *_down(2 * w, 4 * w), *_down(4 * w, 8 * w),
            nn.Conv2d(8 * w, 1, 4, 1, 0, bias=False), nn.Flatten(),
        )

    def forward(self, noise: torch.Tensor, real: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.discriminator(self.generator(noise)), self.discriminator(real)


def dcgan_input(batch: int, input_size: int | None, device: Any = "cpu") -> Inputs:
    return torch.randn(batch, 100, 1, 1, device=device), torch.randn(batch, 3, input_size, input_size, device=device)


def gan_loss(output: Any, inputs: Inputs) -> torch.Tensor:
    fake, real = output
    return (F.binary_cross_entropy_with_logits(fake, torch.ones_like(fake))
            + F.binary_cross_entropy_with_logits(real, torch.ones_like(real)))


class ResidualBlock(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.ReflectionPad2d(1), nn.Conv2d(channels, channels, 3), nn.InstanceNorm2d(channels), nn.ReLU(),
            nn.ReflectionPad2d(1), nn.Conv2d(channels, channels, 3), nn.InstanceNorm2d(channels),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.body(x)


def resnet_generator(width: int = 64, blocks: int = 9) -> nn.Sequential:
    w = width
    layers: list[nn.Module] = [nn.ReflectionPad2d(3), nn.Conv2d(3, w, 7), nn.InstanceNorm2d(w), nn.ReLU()]
    for m in (1, 2):
        layers += [nn.Conv2d(w * m, w * m * 2, 3, 2, 1), nn.InstanceNorm2d(w * m * 2), nn.ReLU()]
    layers += [ResidualBlock(4 * w) for _ in range(blocks)]
    for m in (4, 2):
        layers += [nn.ConvTranspose2d(w * m, w * m // 2, 3, 2, 1, output_padding=1), nn.InstanceNorm2d(w * m // 2), nn.ReLU()]
    layers += [nn.ReflectionPad2d(3), nn.Conv2d(w, 3, 7), nn.Tanh()]
    return nn.Sequential(*layers)


def patch_discriminator(width: int = 64) -> nn.Sequential:
    """70x70 PatchGAN."""
    w = width
    return nn.Sequential(
        nn.Conv2d(3, w, 4, 2, 1), nn.LeakyReLU(0.2),
        nn.Conv2d(w, 2 * w, 4, 2, 1), nn.InstanceNorm2d(2 * w), nn.LeakyReLU(0.2),
        nn.Conv2d(2 * w, 4 * w, 4, 2, 1), nn.InstanceNorm2d(4 * w), nn.LeakyReLU(0.2),
        nn.Conv2d(4 * w, 8 * w, 4, 1, 1), nn.InstanceNorm2d(8 * w), nn.LeakyReLU(0.2),
        nn.Conv2d(8 * w, 1, 4, 1, 1),
    )


class CycleGAN(nn.Module):
    """One full CycleGAN step on an (A, B) image pair: generator losses and both discriminator losses."""

    def __init__(self) -> None:
        super().__init__()
        self.g_ab, self.g_ba = resnet_generator(), resnet_generator()
        self.d_a, self.d_b = patch_discriminator(), patch_discriminator()

    def forward(self, real_a: torch.Tensor, real_b: torch.Tensor) -> tuple[torch.Tensor, ...]:
        same_b, same_a = self.g_ab(real_b), self.g_ba(real_a)
        fake_b, fake_a = self.g_ab(real_a), self.g_ba(real_b)
        cycle_a, cycle_b = self.g_ba(fake_b), self.g_ab(fake_a)
        identity_error = (same_b - real_b).abs().mean() + (same_a - real_a).abs().mean()
        cycle_error = (cycle_a - real_a).abs().mean() + (cycle_b - real_b).abs().mean()
        fooled = (self.d_b(fake_b), self.d_a(fake_a))
        real = (self.d_a(real_a), self.d_b(real_b))
        fake = (self.d_a(fake_a.detach()), self.d_b(fake_b.detach()))
        return identity_error, cycle_error, fooled, real, fake


def cyclegan_input(batch: int, input_size: int | None, device: Any = "cpu") -> Inputs:
    return (torch.randn(batch, 3, input_size, input_size, device=device),
            torch.randn(batch, 3, input_size, input_size, device=device))


def cyclegan_loss(output: Any, inputs: Inputs) -> torch.Tensor:
    """Least-squares GAN losses + 10 x cycle + 5 x identity L1 (Zhu et al. 2017 weights)."""
    identity_error, cycle_error, fooled, real, fake = output
    generator = sum(F.mse_loss(v, torch.ones_like(v)) for v in fooled) + 10.0 * cycle_error + 5.0 * identity_error
    discriminator = sum(0.5 * (F.mse_loss(r, torch.ones_like(r)) + F.mse_loss(f, torch.zeros_like(f)))
                        for r, f in zip(real, fake))
    return generator + discriminator


add(ZooEntry(name="dcgan", family="gan", build=lambda _size=None: DCGAN(), example_input=dcgan_input,
             loss_fn=gan_loss, default_input_size=64, description="DCGAN generator + discriminator, 64x64"))
add(ZooEntry(name="cyclegan", family="gan", build=lambda _size=None: CycleGAN(), example_input=cyclegan_input,
             loss_fn=cyclegan_loss, default_input_size=256,
             description="CycleGAN full step: two ResNet-9 generators + two PatchGAN discriminators, 256x256"))
