"""``horus k8s-extender``: serve kube-scheduler's extender protocol (docs/backends/kubernetes.md).

Listens on 127.0.0.1 unless ``--host`` says otherwise; ``--token-file``, ``--tls-cert``/``--tls-key`` and
``--tls-client-ca`` decide who may call it (``horus.k8s.security``). Serving beyond the loopback interface
with neither a token nor client certificates is allowed but logged as a warning: anyone who reaches the port
could then bind any pod.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from horus.errors import HorusInputError
from horus.validation import Domain, NumberArg, path_arg

if TYPE_CHECKING:
    from horus.tenancy import Tenancy

SHUTDOWN_GRACE_S = 5  # seconds in-flight requests get on SIGTERM before open connections are closed
PORT = Domain(0, 65535, True)  # 0: any free port
RESYNC_S = Domain(0.1, 3600, False, "s")
STALE_AFTER_S = Domain(1, 86400, False, "s")
MEMORY_MARGIN = Domain(0, 10, False, "x predicted")
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
MAX_POLICY_ARGS_CHARS = 64 * 1024
MAX_PREFIX_CHARS = 256


def register(subparsers: Any) -> None:
    from horus.service.client import url_arg

    p = subparsers.add_parser("k8s-extender", help="run Horus as a kube-scheduler extender (filter, prioritize, bind)",
                              description=__doc__)
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1; in a pod: 0.0.0.0 or the pod IP, with a token or "
                        "client certificates and a NetworkPolicy, see deploy/kubernetes/)")
    p.add_argument("--port", type=NumberArg(PORT), default=8888)
    p.add_argument("--token-file", type=_path_text, help="file holding a bearer token (at least 32 characters): every endpoint but "
                                        "/healthz and /livez then needs 'Authorization: Bearer <token>'")
    p.add_argument("--tls-cert", type=_path_text, help="PEM certificate (chain) to serve HTTPS with (needs --tls-key)")
    p.add_argument("--tls-key", type=_path_text, help="PEM private key of --tls-cert")
    p.add_argument("--tls-client-ca", type=_path_text, help="PEM CA bundle: a client certificate it signed authenticates a caller "
                                           "instead of the token (how kube-scheduler can; its tlsConfig.certFile)")
    p.add_argument("--prefix", default="", help="path prefix of the verbs (kube-scheduler's urlPrefix path part)")
    p.add_argument("--policy", default="horus-paper",
                   help="registered policy deciding placements (default horus-paper: one pod at a time; the adaptive "
                        "horus also unpacks and migrates, which needs a pod-preempting controller not built yet)")
    p.add_argument("--policy-args", default="{}", help="JSON object of keyword arguments for the policy")
    p.add_argument("--predictor", default="physical", help="registered predictor (default physical, as horus serve and simulate)")
    p.add_argument("--kubeconfig", type=_path_text, help="kubeconfig file (default: in-cluster service account, else ~/.kube/config)")
    p.add_argument("--context", help="kubeconfig context")
    p.add_argument("--api-server", type=url_arg("--api-server"),
                   help="API server URL without credentials (e.g. kubectl proxy's http://127.0.0.1:8001)")
    p.add_argument("--resync-s", type=NumberArg(RESYNC_S), default=10.0,
                   help="seconds between full re-listings of nodes and pods (default 10)")
    p.add_argument("--stale-after-s", type=NumberArg(STALE_AFTER_S),
                   help="/healthz answers 503 when the last successful listing is older than this "
                        "(default: 3 re-listing periods, at least 30 s)")
    p.add_argument("--tenancy", type=path_arg,
                   help="YAML file with a 'tenancy:' section (queues, priority classes; docs/tenancy.md): filter and "
                        "bind then keep each queue within its quota (queue: label horus.io/queue, else the namespace)")
    p.add_argument("--memory-margin", type=NumberArg(MEMORY_MARGIN), default=0.25,
                   help="a pod declaring no nvidia.com/gpumem is held (through HAMi) to its predicted peak memory x "
                        "(1 + this) per GPU (default 0.25); see --no-memory-limit")
    p.add_argument("--no-memory-limit", action="store_true",
                   help="give a pod declaring no nvidia.com/gpumem the whole card's memory, as before Horus predicted it")
    p.add_argument("--log-level", default="info", type=str.lower, choices=LOG_LEVELS)
    p.set_defaults(func=run)


def _path_text(text: str) -> str:
    """argparse ``type=`` of a file option: :func:`horus.validation.path_arg`, kept as text."""
    return str(path_arg(text))


def _check_options(args: argparse.Namespace) -> tuple[dict[str, Any], float]:
    """The options no ``type=`` can check alone, before anything starts: (policy arguments, stale-after-s)."""
    from horus.service.server import check_listen_address
    from horus.validation import MAX_CONFIG_BYTES, read_input_bytes

    check_listen_address(args.host, args.port)
    if len(args.prefix) > MAX_PREFIX_CHARS or not all(c.isascii() and (c.isalnum() or c in "/-_.~")
                                                      for c in args.prefix):
        raise HorusInputError("--prefix", f"expected a URL path of at most {MAX_PREFIX_CHARS} letters, digits and "
                                          f"'/-_.~', got {args.prefix[:60]!r}")
    if len(args.policy_args) > MAX_POLICY_ARGS_CHARS:
        raise HorusInputError("--policy-args", f"{len(args.policy_args):,} characters; expected a JSON object of at "
                                               f"most {MAX_POLICY_ARGS_CHARS:,}")
    try:
        policy_args = json.loads(args.policy_args, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        raise HorusInputError("--policy-args", f"expected a JSON object: {str(exc)[:200]}") from None
    if not isinstance(policy_args, dict):
        raise HorusInputError("--policy-args", "expected a JSON object")
    stale_after_s = max(3 * args.resync_s, 30.0) if args.stale_after_s is None else args.stale_after_s
    if stale_after_s < args.resync_s:
        raise HorusInputError("--stale-after-s", f"{stale_after_s:g} s is shorter than --resync-s "
                                                 f"({args.resync_s:g} s): /healthz would fail between listings")
    if args.api_server and (args.kubeconfig or args.context):  # one of them would be ignored
        raise HorusInputError("--api-server", "talks to that address without credentials; it cannot be combined "
                                              "with --kubeconfig or --context")
    for option, path, what in (("--kubeconfig", args.kubeconfig, "a kubeconfig file"),
                               ("--tls-cert", args.tls_cert, "a PEM certificate"),
                               ("--tls-key", args.tls_key, "a PEM private key"),
                               ("--tls-client-ca", args.tls_client_ca, "a PEM CA bundle")):
        if path is not None:  # a readable regular file of bounded size (the loaders read it again)
            try:
                read_input_bytes(path, what, MAX_CONFIG_BYTES)
            except HorusInputError as exc:
                raise HorusInputError(option, f"{exc.source}: {exc.message}") from None
    return policy_args, stale_after_s


def load_tenancy(path: Path) -> Tenancy:
    """The ``tenancy:`` section of the YAML file ``path`` (other top-level keys, e.g. a cluster spec's, are not
    read); one-line HorusInputError naming the file and field."""
    from horus.tenancy import parse_tenancy
    from horus.validation import check_input_path, load_yaml

    check_input_path(path, "--tenancy", "a YAML file with a 'tenancy:' section")
    data, _ = load_yaml(path, "a tenancy YAML file")
    if not isinstance(data, dict) or "tenancy" not in data:
        raise HorusInputError(str(path), "expected a YAML mapping with a 'tenancy:' section")
    return parse_tenancy(data["tenancy"], str(path))


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


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
    from horus.k8s.queues import QueueGate
    from horus.k8s.security import client_cert_protocol, read_token, tls_options
    from horus.k8s.server import Resync, create_app
    from horus.k8s.store import ClusterStore

    policy_args, stale_after_s = _check_options(args)
    tenancy = load_tenancy(args.tenancy) if args.tenancy is not None else None
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s")
    token = read_token(args.token_file) if args.token_file else None
    tls = tls_options(args.tls_cert, args.tls_key, args.tls_client_ca)
    decider = Decider(args.policy, policy_args)
    predictor = PodPredictor(build_predictor(args.predictor))
    try:
        api = KubeAPI.at(args.api_server) if args.api_server else KubeAPI.connect(args.kubeconfig, args.context)
    except Exception as exc:
        raise HorusInputError("--kubeconfig", f"no Kubernetes API configuration: {exc}") from None
    store = ClusterStore(predictor, onnx=OnnxModels(api.get_configmap),
                         queues=QueueGate(tenancy) if tenancy is not None else None)
    extender = Extender(store, decider, api, memory_margin=None if args.no_memory_limit else args.memory_margin)
    resync = Resync(extender, args.resync_s)
    try:
        resync.sync_once()
    except KubeAPIError as exc:
        raise HorusInputError("API server", f"first listing failed: {exc}") from None
    model = store.model
    log = logging.getLogger("horus.k8s")
    log.info(
        "listed %d nodes (%d with GPUs, %d GPUs), %d placed GPU pods counted, %d not readable; policy %s (%s path)",
        len(model.nodes), len(model.node_index), model.cluster.num_gpus, len(model.pods), len(model.unknown),
        decider.policy_name, decider.path)
    if tenancy is not None:
        log.info("tenancy from %s: queues %s (default %s)", args.tenancy, ", ".join(tenancy.queues),
                 tenancy.default_queue)
    if not (token or args.tls_client_ca) and args.host not in ("127.0.0.1", "::1", "localhost"):
        log.warning("listening on %s with neither --token-file nor --tls-client-ca: anyone who can reach port %d "
                    "can bind any pod", args.host, args.port)
    resync.start()
    client_certs = bool(args.tls_client_ca)
    app = create_app(extender, args.prefix, token=token, client_certs=client_certs, stale_after_s=stale_after_s)
    # a TLS connection kept alive by its client (kube-scheduler) would hold a graceful shutdown for ~30 s
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level.lower(), access_log=False,
                timeout_graceful_shutdown=SHUTDOWN_GRACE_S, **({"http": client_cert_protocol()} if client_certs else {}),
                **tls)
    resync.stopped.set()
    return 0
