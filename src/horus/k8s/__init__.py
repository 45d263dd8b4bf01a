"""Kubernetes backend: Horus as a kube-scheduler extender (filter, prioritize, bind).

Modules, lowest first: ``protocol`` (extender/v1 JSON as plain dicts), ``resources`` (what a pod asks
for, the decision annotations), ``nodes`` (GPU type/count of a node from its labels), ``predictor``
(declared HAMi limits on top of a registered predictor), ``model`` (Horus's cluster model and
``SchedulerState`` rebuilt from nodes and pods), ``decide`` (per-node feasibility and scores from the
registered policy's placement), ``api`` (the official client: list, patch, bind), ``extender`` (the
three verbs, per-node bind serialisation), ``security`` (bearer token, TLS, client certificates), ``server``
(FastAPI app) and ``commands`` (the CLI).
See docs/backends/kubernetes.md.
"""
