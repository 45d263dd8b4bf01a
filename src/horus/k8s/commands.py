"""``horus k8s-extender``: serve kube-scheduler's extender protocol (docs/backends/kubernetes.md)."""

from __future__ import annotations

import argparse
import json
import logging
from typing import Any

from horus.errors import HorusInputError


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("k8s-extender", help="run Horus as a kube-scheduler extender (filter, prioritize, bind)",
                              description=__doc__)
    p.add_argument("--host", default="0.0.0.0")
    p.add_argument("--port", type=int, default=8888)
    p.add_argument("--prefix", default="", help="path prefix of the verbs (kube-scheduler's urlPrefix path part)")
    p.add_argument("--policy", default="horus-paper",
                   help="registered policy deciding placements (default horus-paper: one pod at a time; the adaptive "
                        "horus also unpacks and migrates, which needs a pod-preempting controller not built yet)")
    p.add_argument("--policy-args", default="{}", help="JSON object of keyword arguments for the policy")
    p.add_argument("--predictor", default="analytic", help="registered predictor (default analytic)")
    p.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster service account, else ~/.kube/config)")
    p.add_argument("--context", help="kubeconfig context")
    p.add_argument("--api-server",
                   help="API server URL without credentials (e.g. kubectl proxy's http://127.0.0.1:8001)")
    p.add_argument("--resync-s", type=float, default=10.0, help="seconds between full re-listings of nodes and pods")
    p.add_argument("--log-level", default="info")
    p.set_defaults(func=run)


def build_predictor(name: str) -> Any:
    from horus.plugins import load_all
    from horus.predict.base import PREDICTORS

    load_all("horus.predict")
    if name not in PREDICTORS:
        raise HorusInputError("--predictor", f"unknown predictor {name!r}; known: {', '.join(PREDICTORS.names())}")
    return PREDICTORS.create(name)


def run(args: argparse.Namespace) -> int:
    import uvicorn

    from horus.k8s.api import KubeAPI, KubeAPIError
    from horus.k8s.decide import Decider
    from horus.k8s.extender import Extender
    from horus.k8s.onnx_models import OnnxModels
    from horus.k8s.predictor import PodPredictor
    from horus.k8s.server import Resync, create_app
    from horus.k8s.store import ClusterStore

    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        policy_args = json.loads(args.policy_args)
    except ValueError as exc:
        raise HorusInputError("--policy-args", f"expected a JSON object: {exc}") from None
    if not isinstance(policy_args, dict):
        raise HorusInputError("--policy-args", "expected a JSON object")
    if args.resync_s <= 0:
        raise HorusInputError("--resync-s", "expected a positive number of seconds")
    decider = Decider(args.policy, policy_args)
    predictor = PodPredictor(build_predictor(args.predictor))
    try:
        api = KubeAPI.at(args.api_server) if args.api_server else KubeAPI.connect(args.kubeconfig, args.context)
    except Exception as exc:
        raise HorusInputError("--kubeconfig", f"no Kubernetes API configuration: {exc}") from None
    store = ClusterStore(predictor, onnx=OnnxModels(api.get_configmap))
    extender = Extender(store, decider, api)
    resync = Resync(extender, args.resync_s)
    try:
        resync.sync_once()
    except KubeAPIError as exc:
        raise HorusInputError("API server", f"first listing failed: {exc}") from None
    model = store.model
    logging.getLogger("horus.k8s").info(
        "listed %d nodes (%d with GPUs, %d GPUs), %d placed GPU pods counted, %d not readable; policy %s (%s path)",
        len(model.nodes), len(model.node_index), model.cluster.num_gpus, len(model.pods), len(model.unknown),
        decider.policy_name, decider.path)
    resync.start()
    uvicorn.run(create_app(extender, args.prefix), host=args.host, port=args.port, log_level=args.log_level.lower(),
                access_log=False)
    resync.stopped.set()
    return 0
