"""Which Python Spark's workers run for format("epochlog"), and a clear error when it lacks pyarrow.

Every Python process Spark starts for a data source (creating it, planning the read, reading on
executors, writing) runs the interpreter named in the function it was registered with: pyspark
takes `SparkContext.pythonExec`, read once from PYSPARK_PYTHON when the context starts, else
plain `python3` from PATH. A driver started as `.venv/bin/python app.py` without activating the
virtualenv therefore has workers running the system `python3`, which has neither pyarrow nor our
other dependencies, and the read fails with "No module named 'pyarrow'" deep inside
PYTHON_DATA_SOURCE_ERROR.

Two answers, one for each side:
- Driver (`register`): when nobody chose the workers' interpreter (no PYSPARK_PYTHON, no
  spark.pyspark.python) and `python3` on PATH is not the driver's own interpreter, the data source
  is registered with the driver's interpreter (`sys.executable`); only this registration, the
  user's UDFs keep what Spark gives them. An interpreter the user chose is kept as it is.
  `worker_python_choice` is that decision, without I/O.
- Speed: when the chosen interpreter is the driver's own environment and pyspark is the installed
  package (pip's SPARK_HOME), the registration runs it through `worker_python`'s script, which
  drops the installed pyspark's zip (a bytecode-less copy of its sources) from the workers'
  PYTHONPATH: the same pyspark, imported from cached bytecode instead of compiled in every
  process Spark starts (a streaming query's source runner is a fresh process per query: about
  1 s of a Trigger.AvailableNow run here). `use_worker_script` decides; with another Spark
  installation (SPARK_HOME not the package) the script would change nothing, so it is not used.
- Worker (`require_worker_modules`, first thing in every EpochlogDataSource method): the modules
  the data source needs are imported there, and a missing one is an error that names the
  interpreter, the module and PYSPARK_PYTHON / spark.pyspark.python, instead of the bare
  ModuleNotFoundError.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from dataclasses import dataclass
from typing import Any

# What the data source imports in Spark's Python workers beyond pyspark (which Spark provides).
WORKER_MODULES = ("pyarrow",)
DEFAULT_WORKER_PYTHON = "python3"  # pyspark's default when PYSPARK_PYTHON is not set


class WorkerInterpreterError(RuntimeError):
    """Spark's Python worker runs an interpreter without a module the data source needs."""


@dataclass(frozen=True)
class WorkerPythonChoice:
    python: str  # the interpreter the data source's workers will run
    reason: str  # why, for the log


def python_environment(python: str) -> str:
    """Where an interpreter's packages come from: a virtualenv's root (the directory with
    pyvenv.cfg, found next to the unresolved executable or one level up, as CPython's site does),
    else the resolved executable. A venv's python is a symlink to its base interpreter, so
    comparing resolved files would call the two the same."""
    path = os.path.abspath(python)
    for folder in (os.path.dirname(path), os.path.dirname(os.path.dirname(path))):
        if os.path.isfile(os.path.join(folder, "pyvenv.cfg")):
            return folder
    return os.path.realpath(path)


def worker_python_choice(
    *,
    context_python: str,
    env_python: str | None,
    conf_python: str | None,
    driver_python: str,
    resolved_default: str | None,
) -> WorkerPythonChoice:
    """The interpreter to register the data source with.

    `context_python` is SparkContext.pythonExec; `env_python` PYSPARK_PYTHON and `conf_python`
    spark.pyspark.python as set (None: unset); `driver_python` sys.executable; `resolved_default`
    what `python3` resolves to on PATH (None: nothing)."""
    if env_python or conf_python or context_python != DEFAULT_WORKER_PYTHON:
        chosen = conf_python or env_python or context_python
        return WorkerPythonChoice(
            context_python, f"the workers' interpreter was chosen ({chosen}): kept"
        )
    if resolved_default is not None and python_environment(resolved_default) == python_environment(
        driver_python
    ):
        return WorkerPythonChoice(
            context_python, f"python3 on PATH is the driver's interpreter ({driver_python})"
        )
    return WorkerPythonChoice(
        driver_python,
        f"PYSPARK_PYTHON is not set and python3 on PATH is {resolved_default or 'missing'}, "
        f"not the driver's interpreter: format('epochlog') runs {driver_python} instead",
    )


def use_worker_script(python: str, driver_python: str, installed_zip: str | None) -> bool:
    """Whether the data source's workers should run `python` through `worker_python`'s script
    (module docstring): only for the driver's own environment, whose pyspark is the installed
    package with its zip. `python` is resolved (an absolute path)."""
    return installed_zip is not None and python_environment(python) == python_environment(
        driver_python
    )


_worker_scripts: dict[str, str] = {}  # interpreter -> its script, one per driver process


def worker_script_for(python: str) -> str:
    """The `worker_python` script running `python` (made once per process and interpreter)."""
    from epochlog.spark.worker_python import worker_python

    if python not in _worker_scripts:
        _worker_scripts[python] = worker_python(python)
    return _worker_scripts[python]


def choose_for(spark: Any) -> WorkerPythonChoice:
    """`worker_python_choice` for a running SparkSession, in this (the driver's) process."""
    context = spark.sparkContext
    return worker_python_choice(
        context_python=context.pythonExec,
        env_python=os.environ.get("PYSPARK_PYTHON"),
        conf_python=context.getConf().get("spark.pyspark.python", None),
        driver_python=sys.executable,
        resolved_default=shutil.which(DEFAULT_WORKER_PYTHON),
    )


def register_with_worker_python(spark: Any, data_source: type) -> WorkerPythonChoice:
    """spark.dataSource.register(data_source), with the interpreter `choose_for` picks. pyspark
    captures SparkContext.pythonExec when the registration is made, so it is swapped for the
    call only."""
    try:
        context = spark.sparkContext
    except Exception:  # Spark Connect: no SparkContext here, the server chooses the workers
        spark.dataSource.register(data_source)
        return WorkerPythonChoice("", "no SparkContext in this process (Spark Connect): as is")
    choice = choose_for(spark)
    from epochlog.spark.worker_python import installed_pyspark_zip

    python = choice.python
    resolved = shutil.which(python) or python
    if use_worker_script(resolved, sys.executable, installed_pyspark_zip()):
        python = worker_script_for(resolved)
        choice = WorkerPythonChoice(
            python, f"{choice.reason}; run through {python} (pyspark from its bytecode)"
        )
    before = context.pythonExec
    context.pythonExec = python
    try:
        spark.dataSource.register(data_source)
    finally:
        context.pythonExec = before
    return choice


def missing_message(module: str, python: str, version: str) -> str:
    return (
        f"format('epochlog'): Spark's Python worker runs {python} (Python {version}), which "
        f"cannot import {module!r}. Spark starts its Python workers with the interpreter in "
        "PYSPARK_PYTHON (or spark.pyspark.python), else 'python3' from PATH; a driver started "
        "from a virtualenv's interpreter without activating it gets the system python3. Set "
        "PYSPARK_PYTHON to an interpreter that has epochlog's dependencies (for instance the "
        "driver's sys.executable) before the SparkSession starts, or register the source with "
        "epochlog.spark.register(spark), which picks the driver's interpreter when none was set."
    )


def require_worker_modules(modules: tuple[str, ...] = WORKER_MODULES) -> None:
    """Raise WorkerInterpreterError naming the interpreter and PYSPARK_PYTHON if this process
    cannot import one of `modules` (checked by lookup, so nothing heavy is imported here)."""
    for module in modules:
        if importlib.util.find_spec(module) is None:
            version = ".".join(str(n) for n in sys.version_info[:3])
            raise WorkerInterpreterError(missing_message(module, sys.executable, version))
