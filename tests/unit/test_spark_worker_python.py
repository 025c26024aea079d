"""epochlog.spark.worker_python: the PYSPARK_PYTHON script drops exactly the installed pyspark's
zip from PYTHONPATH, keeps every other entry in order, and runs the interpreter it names."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from epochlog.spark.worker_python import installed_pyspark_zip, worker_python

PROBE = "import os, sys, pyspark; print(os.environ['PYTHONPATH']); print(pyspark.__file__)"


def run(script: str, pythonpath: str) -> list[str]:
    env = dict(os.environ, PYTHONPATH=pythonpath)
    done = subprocess.run(
        [script, "-c", PROBE], env=env, capture_output=True, text=True, check=True, timeout=60
    )
    return done.stdout.splitlines()


def test_drops_the_installed_pyspark_zip_and_keeps_the_rest(tmp_path: Path) -> None:
    zip_path = installed_pyspark_zip()
    assert zip_path is not None and zip_path.endswith("pyspark/python/lib/pyspark.zip")
    script = worker_python(directory=str(tmp_path))
    assert Path(script).parent == tmp_path and os.access(script, os.X_OK)
    other = str(tmp_path / "other spark" / "python" / "lib" / "pyspark.zip")  # another SPARK_HOME
    path, imported = run(script, f"{zip_path}:{tmp_path}/a*:{other}:{zip_path}x")
    assert path == f"{tmp_path}/a*:{other}:{zip_path}x"
    assert imported == str(Path(zip_path).parents[2] / "__init__.py")  # the package, not the zip


def test_without_the_zip_on_the_path_nothing_changes(tmp_path: Path) -> None:
    script = worker_python(directory=str(tmp_path))
    path, _ = run(script, f"{tmp_path}/x:{tmp_path}/y")
    assert path == f"{tmp_path}/x:{tmp_path}/y"


def test_runs_the_interpreter_it_was_given(tmp_path: Path) -> None:
    script = worker_python(python=sys.executable, directory=str(tmp_path))
    done = subprocess.run(
        [script, "-c", "import sys; print(sys.executable)"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert done.stdout.strip() == sys.executable
