"""Scheduling policies, one module per registered policy (module name = registry name, ``-`` as ``_``).

Subpackages hold what policies are built from: ``orders`` (queue orders, registry ``ORDERS``), ``placements``
(per-job GPU choice, registry ``PLACEMENTS``) and ``parts`` (the order x placement framework and shared helpers).
Estimators of co-location interference that policies use live in ``horus.interference``.
"""
