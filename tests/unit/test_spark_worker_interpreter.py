"""epochlog.spark.worker_interpreter: which interpreter format("epochlog") registers with, and
the error a worker without pyarrow raises."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from epochlog.spark.worker_interpreter import (
    WorkerInterpreterError,
    python_environment,
    require_worker_modules,
    worker_python_choice,
)


def venv(root: Path) -> str:
    (root / "bin").mkdir(parents=True)
    (root / "pyvenv.cfg").write_text("home = /usr/bin\n")
    python = root / "bin" / "python"
    python.symlink_to(sys.executable)
    return str(python)


def test_a_venv_python_is_its_venv_not_the_base_interpreter_it_links_to(tmp_path: Path) -> None:
    python = venv(tmp_path / "venv")
    assert python_environment(python) == str(tmp_path / "venv")
    plain = tmp_path / "elsewhere" / "python3"
    plain.parent.mkdir()
    plain.symlink_to(python)  # no pyvenv.cfg near it: the file it resolves to
    assert python_environment(str(plain)) != python_environment(python)


def test_unactivated_venv_driver_gets_its_own_interpreter(tmp_path: Path) -> None:
    driver = venv(tmp_path / "venv")
    system = tmp_path / "usr" / "python3"
    system.parent.mkdir()
    system.symlink_to(sys.executable)
    choice = worker_python_choice(
        context_python="python3",
        env_python=None,
        conf_python=None,
        driver_python=driver,
        resolved_default=str(system),
    )
    assert choice.python == driver and "PYSPARK_PYTHON is not set" in choice.reason


def test_no_python3_on_path_also_gets_the_drivers_interpreter(tmp_path: Path) -> None:
    driver = venv(tmp_path / "venv")
    choice = worker_python_choice(
        context_python="python3",
        env_python=None,
        conf_python=None,
        driver_python=driver,
        resolved_default=None,
    )
    assert choice.python == driver and "missing" in choice.reason


def test_activated_venv_keeps_pythons_default(tmp_path: Path) -> None:
    driver = venv(tmp_path / "venv")
    (tmp_path / "venv" / "bin" / "python3").symlink_to(sys.executable)
    choice = worker_python_choice(
        context_python="python3",
        env_python=None,
        conf_python=None,
        driver_python=driver,
        resolved_default=str(tmp_path / "venv" / "bin" / "python3"),
    )
    assert choice.python == "python3"


@pytest.mark.parametrize(
    ("context", "env", "conf"),
    [("/opt/py/bin/python", "/opt/py/bin/python", None), ("python3", None, "/opt/py/bin/python")],
)
def test_an_interpreter_the_user_chose_is_kept(
    tmp_path: Path, context: str, env: str | None, conf: str | None
) -> None:
    driver = venv(tmp_path / "venv")
    choice = worker_python_choice(
        context_python=context,
        env_python=env,
        conf_python=conf,
        driver_python=driver,
        resolved_default=None,
    )
    assert choice.python == context and "/opt/py/bin/python" in choice.reason


def test_missing_module_error_names_interpreter_module_and_pyspark_python() -> None:
    with pytest.raises(WorkerInterpreterError) as caught:
        require_worker_modules(("pyarrow", "epochlog_no_such_module"))
    text = str(caught.value)
    assert "'epochlog_no_such_module'" in text and sys.executable in text
    assert "PYSPARK_PYTHON" in text and "spark.pyspark.python" in text


def test_present_modules_pass() -> None:
    require_worker_modules()  # pyarrow is installed in the test interpreter


class _ConnectLikeSession:
    """A session without a SparkContext, as Spark Connect's."""

    def __init__(self) -> None:
        self.registered: list[type] = []
        self.dataSource = self  # noqa: N815 - pyspark's attribute name

    @property
    def sparkContext(self) -> None:  # noqa: N802 - pyspark's attribute name
        raise RuntimeError("[JVM_ATTRIBUTE_NOT_SUPPORTED] sparkContext")

    def register(self, data_source: type) -> None:
        self.registered.append(data_source)


def test_without_a_spark_context_the_source_is_registered_as_is() -> None:
    from epochlog.spark.worker_interpreter import register_with_worker_python

    session = _ConnectLikeSession()
    choice = register_with_worker_python(session, int)
    assert session.registered == [int] and "Spark Connect" in choice.reason


def test_the_drivers_own_environment_runs_through_the_worker_script(tmp_path: Path) -> None:
    from epochlog.spark.worker_interpreter import use_worker_script

    driver = venv(tmp_path / "driver")
    other = venv(tmp_path / "other")
    zip_path = str(tmp_path / "pyspark.zip")
    assert use_worker_script(driver, driver, zip_path)
    # another environment's pyspark may not be the installed one whose zip the script drops
    assert not use_worker_script(other, driver, zip_path)
    # no installed pyspark with a zip (another SPARK_HOME): the script would change nothing
    assert not use_worker_script(driver, driver, None)


def test_the_worker_script_is_made_once_per_interpreter(tmp_path: Path) -> None:
    from epochlog.spark.worker_interpreter import worker_script_for
    from epochlog.spark.worker_python import installed_pyspark_zip

    if installed_pyspark_zip() is None:
        pytest.fail("the test environment's pyspark is expected to be the installed package")
    first = worker_script_for(sys.executable)
    assert first != sys.executable and Path(first).read_text().count(sys.executable) == 1
    assert worker_script_for(sys.executable) == first


class _Conf:
    def get(self, key: str, default: object = None) -> object:
        return default


class _Context:
    def __init__(self, python: str) -> None:
        self.pythonExec = python  # noqa: N815 - pyspark's attribute name

    def getConf(self) -> _Conf:  # noqa: N802 - pyspark's method name
        return _Conf()


class _Session:
    """A session whose registration records the interpreter pyspark would capture."""

    def __init__(self, python: str) -> None:
        self.sparkContext = _Context(python)  # noqa: N815 - pyspark's attribute name
        self.dataSource = self  # noqa: N815 - pyspark's attribute name
        self.registered_with: list[str] = []

    def register(self, data_source: type) -> None:
        self.registered_with.append(self.sparkContext.pythonExec)


def test_registration_runs_the_drivers_interpreter_through_the_script(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from epochlog.spark.worker_interpreter import register_with_worker_python, worker_script_for

    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)  # chosen by the user: kept, wrapped
    session = _Session(sys.executable)
    choice = register_with_worker_python(session, int)
    assert session.registered_with == [worker_script_for(sys.executable)] == [choice.python]
    assert session.sparkContext.pythonExec == sys.executable  # swapped for the call only
    other = "/nonexistent/other-env/bin/python"
    monkeypatch.setenv("PYSPARK_PYTHON", other)
    session = _Session(other)
    register_with_worker_python(session, int)
    assert session.registered_with == [other]  # another environment: as chosen
