"""Reinforcement learning actor-critics on Atari frames.

``a3c``: the LSTM actor-critic of the A3C paper (Mnih et al. 2016) at the 42x42 grey-frame size used by
the pytorch-a3c implementation Gavel runs (4 stride-2 convs of 32 channels + LSTM 256). One sample is one
training step's rollout of 20 frames (pytorch-a3c's ``--num-steps`` default): the torso runs on every frame,
the LSTM over the rollout (same weights and FLOPs as stepping an LSTM cell), heads on every step.
``ppo``: the Nature-DQN torso (Mnih et al. 2015) on 4 stacked 84x84 frames with policy and value heads.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from horus.zoo.base import Inputs, ZooEntry, add, image_input

ACTIONS = 6  # e.g. Pong
ROLLOUT_STEPS = 20
A3C_HIDDEN = 256


class A3CNet(nn.Module):
    def __init__(self, frame: int = 42, hidden: int = A3C_HIDDEN, actions: int = ACTIONS) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        for cin in (1, 32, 32, 32):
            layers += [nn.Conv2d(cin, 32, 3, 2, 1), nn.ELU()]
            frame = (frame + 1) // 2
        self.torso = nn.Sequential(*layers, nn.Flatten())
        self.lstm = nn.LSTM(32 * frame * frame, hidden, batch_first=True)
        self.actor = nn.Linear(hidden, actions)
        self.critic = nn.Linear(hidden, 1)

    def forward(self, frames: torch.Tensor, h: torch.Tensor, c: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``frames``: (batch, steps, 1, side, side); ``h``, ``c``: (batch, hidden). Outputs per (rollout, step)."""
        batch, steps = frames.shape[:2]
        features = self.torso(frames.flatten(0, 1)).unflatten(0, (batch, steps))
        out, _ = self.lstm(features, (h.unsqueeze(0), c.unsqueeze(0)))
        out = out.flatten(0, 1)
        return self.actor(out), self.critic(out)


def a3c_input(batch: int, input_size: int | None, device: Any = "cpu") -> Inputs:
    """``batch`` rollouts of ROLLOUT_STEPS grey frames plus the LSTM state they start from."""
    return (torch.randn(batch, ROLLOUT_STEPS, 1, input_size, input_size, device=device),
            torch.zeros(batch, A3C_HIDDEN, device=device), torch.zeros(batch, A3C_HIDDEN, device=device))


class PPONet(nn.Module):
    def __init__(self, frame: int = 84, actions: int = ACTIONS) -> None:
        super().__init__()
        self.torso = nn.Sequential(
            nn.Conv2d(4, 32, 8, 4), nn.ReLU(), nn.Conv2d(32, 64, 4, 2), nn.ReLU(), nn.Conv2d(64, 64, 3, 1), nn.ReLU(),
            nn.Flatten(),
        )
        side = ((frame - 8) // 4 + 1 - 4) // 2 + 1 - 2
        self.fc = nn.Sequential(nn.Linear(64 * side * side, 512), nn.ReLU())
        self.actor = nn.Linear(512, actions)
        self.critic = nn.Linear(512, 1)

    def forward(self, frames: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.fc(self.torso(frames))
        return self.actor(h), self.critic(h)


def actor_critic_loss(output: Any, inputs: Inputs) -> torch.Tensor:
    """Policy-gradient term for action 0 + value regression to 0 - 0.01 x entropy."""
    logits, value = output
    log_probs = F.log_softmax(logits, -1)
    entropy = -(log_probs.exp() * log_probs).sum(-1).mean()
    return -log_probs[:, 0].mean() + 0.5 * value.square().mean() - 0.01 * entropy


add(ZooEntry(name="a3c", family="rl", build=lambda size=None: A3CNet(size or 42), example_input=a3c_input,
             loss_fn=actor_critic_loss, default_input_size=42, description="A3C LSTM actor-critic, 20-step rollout of 42x42 Atari frames"))
add(ZooEntry(name="ppo", family="rl", build=lambda size=None: PPONet(size or 84), example_input=image_input(4),
             loss_fn=actor_critic_loss, default_input_size=84, description="PPO Nature-CNN actor-critic, 84x84x4"))
