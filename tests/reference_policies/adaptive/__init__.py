"""Frozen copy of the adaptive ``horus`` policy and its telemetry learner as of commit 0a6715b (before issue 27's
speed work): ``horus.py`` (``horus/policies/horus.py``, registrations dropped) and ``observed.py``
(``horus/interference/observed.py``). ``tests/test_adaptive_reference.py`` drives both through the simulator and
requires identical actions. Do not edit except to follow renames of the shared modules they import.
"""
