"""Frozen copy of ``horus.policies`` as of commit 9eabb68 (before issue 17's speed work).

The reference the optimised policies are tested against (tests/test_policies_reference.py): they
must return exactly the same actions. Registered in this package's own registries (not horus's).
Do not edit except to follow renames of modules below ``horus.policies``.
"""
