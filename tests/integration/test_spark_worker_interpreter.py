# ruff: noqa: F811 - pytest fixtures imported from spark_fixtures are parameters here
"""Spark's Python workers and the driver's virtualenv (issue 18, item 2).

The driver runs this venv's interpreter without the venv activated; `python3` on PATH is the
venv's base interpreter (same Python version, so Spark accepts it as a worker) run directly,
which has no pyarrow: the case that failed with "No module named 'pyarrow'" inside
PYTHON_DATA_SOURCE_ERROR. Each case is a fresh driver process (PYSPARK_PYTHON and PATH are read
when the SparkContext starts).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.spark_fixtures import (  # noqa: F401 - fixtures
    REPO_ROOT,
    create_topic,
    produce,
    spark_cluster,
    unique_topic,
)

DRIVER = Path(__file__).with_name("spark_interpreter_driver.py")


@pytest.fixture(scope="module")
def bare_python3(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory whose `python3` is the venv's base interpreter, without the venv's packages."""
    folder = tmp_path_factory.mktemp("bare-python")
    base = os.path.realpath(sys.executable)
    (folder / "python3").symlink_to(base)
    probe = subprocess.run(
        [str(folder / "python3"), "-c", "import pyarrow"], capture_output=True, timeout=60
    )
    assert probe.returncode != 0, f"{base} imports pyarrow: the case needs one that can't"
    return folder


def run_driver(bootstrap: str, topic: str, bare: Path, **env: str) -> dict:
    environment = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "VIRTUAL_ENV")
    }
    environment["PATH"] = f"{bare}:{environment.get('PATH', '')}"
    environment["PYTHONPATH"] = str(REPO_ROOT)
    environment.update(env)
    done = subprocess.run(
        [sys.executable, str(DRIVER), bootstrap, topic],
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO_ROOT,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert done.returncode == 0 and lines, done.stdout[-2000:] + done.stderr[-4000:]
    return json.loads(lines[-1])


@pytest.fixture(scope="module")
def topic(spark_cluster) -> str:
    bootstrap = spark_cluster.bootstrap_servers
    name = create_topic(bootstrap, unique_topic("interpreter"), 2)
    produce(bootstrap, name, [b"v%d" % i for i in range(30)])
    return name


def test_without_pyspark_python_the_source_runs_the_drivers_interpreter(
    spark_cluster, topic: str, bare_python3: Path
) -> None:
    result = run_driver(spark_cluster.bootstrap_servers, topic, bare_python3)
    assert result == {"python": sys.executable, "rows": 30}


def test_a_chosen_interpreter_without_pyarrow_fails_naming_pyspark_python(
    spark_cluster, topic: str, bare_python3: Path
) -> None:
    bare = str(bare_python3 / "python3")
    result = run_driver(spark_cluster.bootstrap_servers, topic, bare_python3, PYSPARK_PYTHON=bare)
    assert result["python"] == bare  # the user's choice is kept
    error = result["error"]
    assert "cannot import 'pyarrow'" in error and "PYSPARK_PYTHON" in error, error
    assert f"runs {bare} " in error or "runs " + os.path.realpath(bare) in error, error
