"""The scheduler core every backend drives: a policy over a ``SchedulerState``, with checked actions.

Backends (the simulator, the live service with its agents, Ray, Kubernetes) bring a clock, the
events that change the state, and an ``Executor`` that carries out ``Start``/``Preempt``; the
decision step itself is ``SchedulerCore.schedule`` (docs/architecture.md).
"""

from horus.core.scheduler import Executor, InvalidActionError, OracleNeedsTruthError, SchedulerCore, create_policy

__all__ = ["Executor", "InvalidActionError", "OracleNeedsTruthError", "SchedulerCore", "create_policy"]
