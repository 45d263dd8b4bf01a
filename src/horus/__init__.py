"""Horus: interference-aware GPU cluster scheduling for deep-learning training jobs."""

__version__ = "0.1.0"


def report(iteration: float) -> None:
    """Tell Horus how many training iterations this job has done (call it every iteration or so).

    A no-op outside a Horus job. Inside one it appends to the progress file the agent reads
    (``HORUS_PROGRESS_FILE``); see ``horus.reporting``.
    """
    from horus.reporting import report as _report

    _report(iteration)
