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
        from horus.agent.agent import Agent, start_thread

        agent = Agent(self.name, self.gpus, config.state_dir / "agent" / self.name, _store_safe_link(scheduler),
                      heartbeat_s=config.heartbeat_s, grace_s=config.grace_s, mps=config.mps, run_as=config.run_as)
        start_thread(agent, stop)

    def close(self) -> None:
        pass


def _store_safe_link(scheduler: LiveScheduler) -> Any:
    """The in-process agent's ``DirectLink``, where a store that cannot write is an outage of the server (the
    agent keeps its jobs and retries) as it is for a remote agent (a 503), not an error that ends its thread."""
    from horus.agent.agent import DirectLink, LinkError
    from horus.service.store import StoreUnavailable

    class StoreSafeLink(DirectLink):
        def register(self, *args: Any, **kwargs: Any) -> None:
            try:
                super().register(*args, **kwargs)
            except StoreUnavailable as exc:
                raise LinkError(str(exc)) from None

        def heartbeat(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
            try:
                return super().heartbeat(*args, **kwargs)
            except StoreUnavailable as exc:
                raise LinkError(str(exc)) from None

    return StoreSafeLink(scheduler)
