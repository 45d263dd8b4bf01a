"""Ray as Horus's hands: node discovery (``nodes``), the per-worker actor (``worker``) and
simulation sweeps fanned out over a Ray cluster (``sweep``). Needs the ``ray`` extra.

The ``ray`` backend of ``horus serve`` (``horus.service.backends.ray``) builds on these; the
scheduler core decides (node, GPU, share), Ray only executes.
"""
