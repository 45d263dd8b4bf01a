"""The running attempts of the live service: its desired state, indexed by job and by agent."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from horus.service.store import JobRow


@dataclass
class LiveJob:
    """A running attempt: where it runs and what it runs (the desired state sent to agents)."""

    row: JobRow
    attempt: int
    placement: list[tuple[str, int]]
    start_iteration: float
    exited: dict[str, int] = field(default_factory=dict)  # agent -> exit code 0 of finished parts

    def agents(self) -> list[str]:
        return list(dict.fromkeys(a for a, _ in self.placement))


class LiveJobs:
    """Running attempts by job id, with each agent's attempts (an agent's desired state costs O(its own jobs))."""

    def __init__(self) -> None:
        self._by_job: dict[str, LiveJob] = {}
        self._by_agent: dict[str, dict[str, None]] = {}

    def add(self, key: str, live: LiveJob) -> None:
        self._by_job[key] = live
        for name in live.agents():
            self._by_agent.setdefault(name, {})[key] = None

    def pop(self, key: str) -> LiveJob | None:
        live = self._by_job.pop(key, None)
        if live is not None:
            for name in live.agents():
                self._by_agent.get(name, {}).pop(key, None)
        return live

    def on(self, agent: str) -> list[str]:
        """Job ids with an attempt on ``agent``."""
        return list(self._by_agent.get(agent, {}))

    def get(self, key: str) -> LiveJob | None:
        return self._by_job.get(key)

    def __getitem__(self, key: str) -> LiveJob:
        return self._by_job[key]

    def __contains__(self, key: object) -> bool:
        return key in self._by_job

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_job)

    def __len__(self) -> int:
        return len(self._by_job)
