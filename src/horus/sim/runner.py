"""Run several policies on the same workload and write tables, summary, manifest and plots."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from horus.cluster import Cluster
from horus.core import create_policy
from horus.jobs import JobSpec
from horus.predict.base import Predictor
from horus.sim.engine import SimConfig, SimResult, simulate
from horus.sim.gpu_timeline import gpu_labels
from horus.sim.leakage import check_model_disjoint
from horus.sim.outputs import environment, safe_name, sha256_file, to_jsonable, utc_timestamp, write_json, write_table
from horus.sim.plots import plot_comparison
from horus.sim.report import write_report
from horus.tenancy import Tenancy
from horus.truth.base import TruthModel


def write_run(result: SimResult, folder: Path) -> list[Path]:
    """``<folder>/{jobs,gpus,timeline,placements}.parquet`` (CSV without pyarrow), and ``queues.csv`` (one row
    per tenant queue, ``horus.sim.queues``) for a run with a tenancy."""
    written = [write_table(result.jobs, folder / "jobs"), write_table(result.gpus, folder / "gpus"),
               write_table(result.timeline, folder / "timeline"), write_table(result.placements, folder / "placements")]
    if len(result.queues):
        result.queues.to_csv(folder / "queues.csv", index=False)
        written.append(folder / "queues.csv")
    return written


def split_label(entry: str) -> tuple[str, str]:
    """``"horus-solo=horus"`` -> ``("horus-solo", "horus")``: one policy may run under several labels with
    different options (``policy_options`` keyed by label); a plain name is its own label."""
    label, sep, name = entry.partition("=")
    return (label, name) if sep else (entry, entry)


def run_comparison(jobs: Sequence[JobSpec], cluster: Cluster, policy_names: list[str], truth: TruthModel,
                   predictor: Predictor, config: SimConfig, outdir: str | Path,
                   manifest_extra: Mapping[str, object] | None = None, progress: bool = False,
                   policy_options: Mapping[str, Mapping[str, object]] | None = None,
                   title: str | None = None, tenancy: Tenancy | None = None) -> dict[str, object]:
    """Simulate each named policy on ``jobs``; write outputs into ``outdir``; return the summary dict.

    The summary is ``{"policies": {name: summary}, "num_jobs", "num_gpus"}`` (also ``summary.json``).
    ``manifest.json`` records versions, configuration, descriptions of every component, the hash of
    every file written and ``manifest_extra`` (trace path + sha256, sampler, seed...).
    ``policy_names`` entries may be ``LABEL=NAME`` (``split_label``); ``policy_options`` maps a label (or a
    policy name) to keyword arguments of its factory; ``title`` heads the plots and the report (which trace,
    cluster and truth). With a ``tenancy`` every policy runs under it (``simulate(tenancy=...)``), the summary has
    ``"queues": {label: [one row per queue]}`` and the manifest ``"tenancy"`` (``Tenancy.describe()``).
    """
    outdir = Path(outdir)
    truth_description = truth.describe()
    for options in (policy_options or {}).values():  # models a policy reads must not know the truth's data
        if options.get("model_dir") is not None:
            check_model_disjoint(Path(str(options["model_dir"])), truth_description)
    outdir.mkdir(parents=True, exist_ok=True)
    results: dict[str, SimResult] = {}
    described: dict[str, object] = {}
    written: list[Path] = []
    for entry in policy_names:
        label, name = split_label(entry)
        options = (policy_options or {}).get(label, (policy_options or {}).get(name, {}))
        policy = create_policy(name, options, has_truth=True)
        result = simulate(jobs, cluster, policy, truth, predictor, config, progress=progress, tenancy=tenancy)
        described[label] = {**policy.describe(), **({"registered_as": name} if label != name else {})}
        results[label] = result
        written += write_run(result, outdir / safe_name(label))
    summary: dict[str, object] = {
        "policies": {name: {**r.summary, "wall_s": r.wall_s, "events": r.events_processed}
                     for name, r in results.items()},
        "num_jobs": len(jobs),
        "num_gpus": cluster.num_gpus,
    }
    if tenancy is not None:
        summary["queues"] = {name: to_jsonable(r.queues.to_dict("records")) for name, r in results.items()}
    written.append(write_json(summary, outdir / "summary.json"))
    written += plot_comparison(results, outdir, title)
    manifest = {
        "created": utc_timestamp(),
        "versions": environment(),
        "config": config.describe(),
        "cluster": cluster.describe(),
        "truth": truth_description,
        "predictor": predictor.describe(),
        "policies": described,
        **({"tenancy": tenancy.describe()} if tenancy is not None else {}),
        **dict(manifest_extra or {}),
        "outputs": {str(p.relative_to(outdir)): sha256_file(p) for p in written},
    }
    write_json(manifest, outdir / "manifest.json")
    if title is None:
        trace = (manifest_extra or {}).get("trace", {})
        source = Path(str(trace.get("path"))).name if isinstance(trace, Mapping) and trace.get("path") else "jobs"
        title = f"{source} on {cluster.num_gpus} GPUs, truth {truth.name}"
    write_report(outdir / "report.html", f"Horus simulation: {title}", summary, manifest,
                 [p for p in written if p.suffix == ".png"], results=results, gpu_names=gpu_labels(cluster))
    return summary
