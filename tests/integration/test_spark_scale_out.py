"""Scale-out: the reference pipeline runs unchanged with executors in other processes.

`spark-submit --master local-cluster[2,1,1024] examples/clickstream_pipeline.py ...`: Spark's
local-cluster mode starts two workers in the driver's JVM, each launching an executor JVM of its
own, whose Python workers read and write the log; nothing is shared with the driver but the
(local) file system, as on a real cluster with a shared checkpoint directory. The job is the file
`make demo` loads, started as a user would start it; it prints its totals as JSON and exits 0
only when the Parquet table counted every produced event exactly once.

Runs in a subprocess of its own (one SparkContext per JVM: the tests' local[2] session cannot
change master), in a new session that the test kills by its process group id at the end.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pyspark
import pytest

from epochlog.testing.cluster import LocalCluster

REPO_ROOT = Path(__file__).resolve().parents[2]
PIPELINE = REPO_ROOT / "examples" / "clickstream_pipeline.py"
SPARK_SUBMIT = Path(pyspark.__file__).parent / "bin" / "spark-submit"
EVENTS = 1500
MASTER = "local-cluster[2,1,1024]"


@pytest.mark.slow
def test_pipeline_runs_unchanged_on_two_executor_processes(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path / "cluster", 1, zk_session_timeout_ms=4000).start()
    log_path = tmp_path / "spark-submit.log"
    try:
        env = dict(os.environ)
        env.update(PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
        env.pop("SPARK_HOME", None)  # spark-submit finds pip's pyspark itself
        command = [
            str(SPARK_SUBMIT),
            "--master",
            MASTER,
            "--conf",
            "spark.executor.memory=768m",
            "--conf",
            "spark.sql.shuffle.partitions=2",
            "--conf",
            "spark.ui.enabled=false",
            "--conf",
            "spark.python.authenticate.socketTimeout=120s",
            str(PIPELINE),
            "--bootstrap-servers",
            cluster.bootstrap_servers,
            "--dir",
            str(tmp_path / "pipeline"),
            "--generate",
            str(EVENTS),
            "--rate",
            "300",
            "--trigger",
            "2 seconds",
            "--wait",
            "300",
        ]
        with open(log_path, "wb") as log:
            process = subprocess.Popen(
                command,
                cwd=tmp_path,
                env=env,
                stdout=subprocess.PIPE,
                stderr=log,
                start_new_session=True,
            )
            try:
                out, _ = process.communicate(timeout=600)
            finally:
                if process.poll() is None:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
        text = out.decode(errors="replace")
        spark_log = log_path.read_text(errors="replace")
        tail = spark_log[-3000:]
        assert process.returncode == 0, f"exit {process.returncode}\n{text}\n{tail}"
        result = json.loads(text.strip().splitlines()[-1])
    finally:
        cluster.close()
    assert result["master"] == MASTER
    assert result["executors"] == 2  # two executor processes took part, not the driver alone
    # spark-submit logs at INFO: "Finished task 1.0 in stage 2.0 (TID 2) in 11348 ms on host
    # (executor 0)". Both executors ran tasks.
    assert set(re.findall(r"Finished task .* \(executor (\d+)\)", spark_log)) == {"0", "1"}
    assert result["produced"] == EVENTS
    assert result["page"] == result["country"] == EVENTS
    assert result["repeated"] == 0 and result["per_minute_equal"]
