"""``local`` backend: an in-process agent runs jobs on this machine's GPUs (or fake ones)."""

from __future__ import annotations

import socket
import threading
from typing import TYPE_CHECKING, Any

from horus.errors import HorusInputError
from horus.service.backends import BACKENDS

if TYPE_CHECKING:
    from horus.service.scheduler import LiveScheduler
    from horus.service.server import ServeConfig


@BACKENDS.register("local")
class LocalBackend:
    def __init__(self) -> None:
        self.gpus: list[dict[str, Any]] = []
        self.name = ""

    def prepare(self, config: ServeConfig) -> None:
        from horus.agent.gpus import discover, fake_gpus

        self.name = config.agent_name or socket.gethostname().split(".")[0] or "local"
        if not config.local_agent:
            return
        if config.fake_gpus:
            self.gpus = fake_gpus(config.fake_gpus, config.gpu_type, self.name)
            return
        self.gpus, reason = discover()
        if not self.gpus:
            raise HorusInputError("horus serve", f"no GPU found: {reason}; use --fake-gpus N to try Horus with "
                                                 f"N fake GPUs (jobs run on the CPU), or --no-agent")

    def start(self, scheduler: LiveScheduler, config: ServeConfig, stop: threading.Event) -> None:
        if not config.local_agent:
            return
        from horus.agent.agent import Agent, DirectLink, start_thread

        agent = Agent(self.name, self.gpus, config.state_dir / "agent" / self.name, DirectLink(scheduler),
                      heartbeat_s=config.heartbeat_s, grace_s=config.grace_s, mps=config.mps, run_as=config.run_as)
        start_thread(agent, stop)

    def close(self) -> None:
        pass
