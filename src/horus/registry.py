"""A tiny name -> factory registry used for policies, trace loaders, truth models and predictors."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """Maps a unique name to a factory. Use ``@REG.register("name")`` on a class or function.

    ``alias(old, name)`` keeps an old name working: ``create`` and ``in`` accept it, ``names()`` lists
    only the registered names (so "every registered entry" runs each once)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._factories: dict[str, Callable[..., T]] = {}
        self._aliases: dict[str, str] = {}

    def register(self, name: str) -> Callable[[Callable[..., T]], Callable[..., T]]:
        def decorator(factory: Callable[..., T]) -> Callable[..., T]:
            if name in self._factories or name in self._aliases:
                raise ValueError(f"{self.kind} {name!r} registered twice")
            self._factories[name] = factory
            return factory

        return decorator

    def alias(self, old: str, name: str) -> None:
        """Make ``old`` another name for the registered ``name``."""
        if old in self._factories or old in self._aliases:
            raise ValueError(f"{self.kind} {old!r} registered twice")
        self._aliases[old] = name

    def aliases(self) -> dict[str, str]:
        return dict(self._aliases)

    def unregister(self, name: str) -> None:
        """Remove ``name`` (for tests that register temporary entries)."""
        self._factories.pop(name, None)
        self._aliases.pop(name, None)

    def create(self, name: str, **kwargs: object) -> T:
        try:
            factory = self._factories[self._aliases.get(name, name)]
        except KeyError:
            known = ", ".join(sorted([*self._factories, *self._aliases]))
            raise KeyError(f"unknown {self.kind} {name!r}; known: {known}") from None
        return factory(**kwargs)

    def names(self) -> list[str]:
        return sorted(self._factories)

    def __contains__(self, name: object) -> bool:
        return name in self._factories or name in self._aliases

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())
