"""An optional Python executable for Spark's Python workers: pyspark from its installed package.

Spark puts `$SPARK_HOME/python/lib/pyspark.zip` first on every Python worker's PYTHONPATH
(PythonWorkerFactory: the zip, then spark.executorEnv.PYTHONPATH, then the environment's). A zip
holds no bytecode here and zipimport never writes any, so every process Spark starts compiles
the pyspark modules it imports from source: about 1.2 s on a 2-core machine (1.7-2.0 s against
0.5 s from the installed package's cached bytecode). Most processes are forked from a daemon
that paid it once, but a Python streaming source gets a fresh process per query (the source
runner is a plain worker, without daemon or reuse, whatever spark.python.* says), so every
streaming query of a Python data source pays it.

With pip-installed pyspark, SPARK_HOME is the installed package and the zip a copy of its
sources. `worker_python()` writes a small sh script that drops exactly that zip from PYTHONPATH
and runs this interpreter; point PYSPARK_PYTHON at it before the session starts:

    os.environ["PYSPARK_PYTHON"] = epochlog.spark.worker_python()
    spark = SparkSession.builder...getOrCreate()

Workers then import the very same pyspark, from its cached bytecode. Any other PYTHONPATH entry
(a pyspark.zip of another Spark installation, py4j, the user's) is kept in order, so with a
SPARK_HOME that is not the installed package nothing changes. POSIX only (sh), as Spark's daemon.
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import sys
import tempfile
from pathlib import Path

_SCRIPT = """#!/bin/sh
# Written by epochlog.spark.worker_python: runs the interpreter below with the installed
# pyspark's zip (a copy of its sources, without bytecode) dropped from PYTHONPATH, so pyspark is
# imported from the package's cached bytecode instead of compiled from the zip in every process.
zip={zip_q}
set -f
saved_ifs=$IFS
IFS=:
kept=
for entry in $PYTHONPATH; do
    [ "$entry" = "$zip" ] && continue
    kept=${{kept:+$kept:}}$entry
done
IFS=$saved_ifs
set +f
PYTHONPATH=$kept
export PYTHONPATH
exec {python_q} "$@"
"""


def installed_pyspark_zip() -> str | None:
    """The pyspark.zip inside the installed pyspark package (pip's SPARK_HOME), if any."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        return None
    package = Path(next(iter(spec.submodule_search_locations)))
    if package.suffix == ".zip" or not package.is_dir():  # pyspark itself comes from a zip
        return None
    zip_path = package / "python" / "lib" / "pyspark.zip"
    return str(zip_path) if zip_path.is_file() else None


def worker_python(python: str | None = None, directory: str | None = None) -> str:
    """Path of an executable sh script for PYSPARK_PYTHON (module docstring): it runs `python`
    (default: this interpreter) without the installed pyspark's zip on PYTHONPATH. Without an
    installed pyspark that has one, it is `python` itself. The script goes into `directory`
    (default: a new private temporary directory)."""
    python = python or sys.executable
    zip_path = installed_pyspark_zip()
    if zip_path is None:
        return python
    folder = Path(directory) if directory else Path(tempfile.mkdtemp(prefix="epochlog-spark-"))
    script = folder / "python"
    text = _SCRIPT.format(
        zip_q=shlex.quote(zip_path),
        python_q=shlex.quote(python),
    )
    tmp = folder / f".python.{os.getpid()}"
    tmp.write_text(text)
    tmp.chmod(0o755)
    tmp.replace(script)
    return str(script)
