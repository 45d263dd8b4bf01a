"""Run one policy of Lucid's simulator on a trace written by convert.write_lucid (a child of run_anchors.py).

    python lucid_driver.py LUCID_SRC TRACE_DIR LOG_DIR POLICY

Does what Lucid's ``simulation/simulator.py`` main does for a non-Lucid policy on one virtual
cluster, by calling its own functions (``utils.trace_pollux_process``, ``utils.trace_parser``,
``cluster.Cluster``, ``utils.simulate_vc``), minus two things that would stop it here: the
duration estimator it builds for every policy (it needs Lucid's Venus/Philly training data, not
shipped, and FIFO/Tiresias never use it) and the process pool (one virtual cluster = one task).
Runs with Lucid's ``simulation/`` folder as working directory and first on ``sys.path``, as its
own entry point does. Prints one JSON line: jobs, average JCT and queueing delay.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    lucid_src, trace_dir, log_dir, policy = Path(argv[0]), Path(argv[1]).resolve(), Path(argv[2]).resolve(), argv[3]
    sim = lucid_src / "simulation"
    os.chdir(sim)
    sys.path.insert(0, str(sim))
    import cluster  # Lucid's
    import pandas as pd
    import utils  # Lucid's

    log_dir.mkdir(parents=True, exist_ok=True)
    logger = logging.getLogger("lucid")
    logger.addHandler(logging.FileHandler(log_dir / f"{policy}.log", "w"))
    logger.setLevel(logging.INFO)
    vc_dict = pd.read_csv(trace_dir / "vc_config.csv", index_col=0).to_dict()["num"]
    trace_df, start_ts = utils.trace_pollux_process(str(trace_dir), 0)
    trace = utils.trace_parser(trace_df)
    lucid_cluster = cluster.Cluster(vc_dict, 8, 96)
    for vc in lucid_cluster.vc_list:
        utils.simulate_vc(trace, vc, "consolidate", str(log_dir), policy, logger, start_ts)
    jobs = trace.job_list
    count = max(len(jobs), 1)  # JCT as Lucid's log_recorder computes it: end_time - submit_time
    print(json.dumps({"jobs": len(jobs), "mean_jct_s": sum(j["end_time"] - j["submit_time"] for j in jobs) / count,
                      "mean_queue_s": sum(j["queue"] for j in jobs) / count}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
