"""Horus: interference-aware GPU cluster scheduling for deep-learning training jobs."""

__version__ = "0.1.0"
