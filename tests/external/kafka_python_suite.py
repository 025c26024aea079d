"""kafka-python's own integration tests (`test/integration` of its source distribution), run
against a local epochlog cluster.

What it does:
1. Downloads kafka-python's sdist at the version the venv has (pinned below, checked against
   `kafka.__version__`) with `pip download --no-binary :all: --no-deps` into a cache
   (`.epochlog/kafka-python-suite/` by default) and extracts its `test/` tree and `pyproject.toml`
   (the suite's pytest settings), not its `kafka/` package: the tests import the installed client.
2. Adds the two files the sdist leaves out that the suite imports: an empty `test/__init__.py`
   and `test/service.py`, of which the suite needs only `ExternalService` (a stand-in for a
   broker it did not start) when it targets an existing cluster. Ours is written below; nothing
   of kafka-python's is copied into this repository.
3. Starts a LocalCluster (3 brokers by default) with the broker settings of the suite's own
   `servers/resources/*/kafka.properties` where they matter: 4 partitions and replication factor
   1 for auto-created topics, `group.initial.rebalance.delay.ms=0`,
   `group.min.session.timeout.ms=1000`, 2 offsets partitions (their replication factor stays
   epochlog's: 3 on 3 brokers, so commits go through acks=all).
4. Runs pytest on `test/integration` in the extracted tree with what the suite reads to use an
   existing broker (see `test/integration/conftest.py` and `fixtures.py`):
   - `KAFKA_VERSION`: the suite skips by it and pins every client's `api_version` to it; it must
     be set or every test is skipped. 3.8 is what kafka-python infers from epochlog's ApiVersions
     (Produce v11, Fetch v16), so `test_kafka_version_infer` holds; an older one (2.5) makes the
     clients use Kafka 2.5's version table (kafka-python clamps to the pinned version).
   - `KAFKA_URI=tcp://HOST:PORT`: the `kafka_broker` fixture then returns
     `KafkaFixture.instance(0, host, port, external=True)`, which starts nothing (and no
     ZooKeeper) and bootstraps every client from that address.
   - `KAFKA_ROOT`: `Fixture.__init__` raises unless it names an existing directory (it would hold
     a Kafka distribution); an empty directory in the cache does.
5. Reads pytest's JUnit XML and prints passed / failed / errors / skipped per test file, then
   every test that did not pass with the reason known for it. A failure without a known reason is
   UNEXPECTED and makes the exit status 1.

Run: `make test-kafka-python`, or
`.venv/bin/python tests/external/kafka_python_suite.py [--kafka-version 3.8 2.5] [--brokers 3]
[-k EXPR] [--files consumer admin]`.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ET
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from epochlog.testing.cluster import LocalCluster  # noqa: E402

KAFKA_PYTHON_VERSION = "3.0.12"
DEFAULT_CACHE = ROOT / ".epochlog" / "kafka-python-suite"
# The suite's own broker settings (servers/resources/1.0 and default/kafka.properties).
SUITE_BROKER_CONFIG: dict[str, object] = {
    "num.partitions": 4,
    "default.replication.factor": 1,
    "auto.create.topics.enable": "true",
    "group.initial.rebalance.delay.ms": 0,
    "group.min.session.timeout.ms": 1000,
    "offsets.topic.num.partitions": 2,
}
INFERRED_VERSION = "3.8"

_SERVICE_PY = '''"""Written by epochlog's tests/external/kafka_python_suite.py: the sdist does not
ship test/service.py. Only ExternalService is needed when the suite targets an existing broker."""


class ExternalService:
    def __init__(self, host, port):
        self.host = host
        self.port = port

    def open(self):
        pass

    def close(self):
        pass

    def dump_logs(self):
        pass

    def wait_for(self, pattern, timeout=30):
        pass


class SpawnedService:
    def __init__(self, *args, **kwargs):
        raise RuntimeError(
            "this run targets an existing epochlog cluster (KAFKA_URI); "
            "starting Kafka or ZooKeeper from a Kafka distribution is not supported"
        )
'''

# Why a test of the suite does not pass against epochlog, by test name (parameters stripped).
KNOWN_REASONS: dict[str, str] = {
    "test_create_describe_delete_acls": "ACL APIs (DescribeAcls 29, CreateAcls 30, DeleteAcls 31)"
    " are not served: no authorizer (security is a later issue)",
    "test_describe_configs_broker_resource_returns_configs": "below KAFKA_VERSION 4.0 it expects"
    " advertised.listeners to be read_only false (Kafka's ZooKeeper mode can change a broker's"
    " listeners at runtime); epochlog changes listeners only with a restart and says read_only"
    " true, as Kafka 4.0 does",
    "test_delete_records": "the deletes succeed, but the test then expects one poll() to return"
    " the records of all six partitions, which holds only when one broker leads them all (it"
    " passes with --brokers 1)",
    "test_create_partitions": "it assigns the new partitions to broker 0, which Kafka's fixture"
    " has and a local cluster (brokers 1..n) does not: INVALID_REPLICA_ASSIGNMENT, as Kafka"
    " answers",
    "test_alter_replica_log_dirs": "the test assumes one broker: partition 0 of its topic may be"
    " on another broker than the first one described, which answers REPLICA_NOT_AVAILABLE, as"
    " Kafka does (it passes with --brokers 1)",
    "test_ssl_handshake": "the SSL fixture starts its own Kafka from a Kafka distribution (it"
    " ignores KAFKA_URI), and epochlog serves PLAINTEXT only",
    "test_legacy_kafka_client_ssl": "the SSL fixture starts its own Kafka from a Kafka"
    " distribution (it ignores KAFKA_URI), and epochlog serves PLAINTEXT only",
}
VERSION_INFER_REASON = (
    "kafka-python infers {inferred} from epochlog's ApiVersions; the test expects the pinned"
    " KAFKA_VERSION {pinned}"
)

console = Console(width=170)


@dataclass
class FileCounts:
    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    not_passed: list[tuple[str, str, str]] = field(default_factory=list)  # test, outcome, message


def installed_kafka_python() -> str:
    import kafka

    return str(kafka.__version__)


def fetch_suite(cache: Path, version: str) -> Path:
    """The extracted `test/` tree of kafka-python's sdist (downloaded once per version)."""
    tree = cache / f"kafka_python-{version}"
    marker = tree / ".ready"
    if marker.exists():
        return tree
    cache.mkdir(parents=True, exist_ok=True)
    sdist = cache / f"kafka_python-{version}.tar.gz"
    if not sdist.exists():
        console.print(f"downloading kafka-python {version} sdist into {cache}")
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-binary",
                ":all:",
                "--no-deps",
                "--dest",
                str(cache),
                f"kafka-python=={version}",
            ],
            check=True,
        )
    prefix = f"kafka_python-{version}/"
    with tarfile.open(sdist) as tar:
        wanted = [
            m
            for m in tar.getmembers()
            if m.name.startswith(prefix + "test/") or m.name == prefix + "pyproject.toml"
        ]
        tar.extractall(cache, members=wanted, filter="data")
    (tree / "test" / "__init__.py").touch()
    (tree / "test" / "service.py").write_text(_SERVICE_PY)
    (tree / "kafka-root").mkdir(exist_ok=True)
    marker.touch()
    return tree


def test_file_name(classname: str) -> str:
    # "test.integration.test_consumer_integration" or "...test_ssl_integration.TestSSLConnection"
    parts = classname.split(".")
    for part in reversed(parts):
        if part.startswith("test_"):
            return part + ".py"
    return classname


def read_junit(path: Path) -> dict[str, FileCounts]:
    counts: dict[str, FileCounts] = defaultdict(FileCounts)
    for case in ET.parse(path).getroot().iter("testcase"):
        file = test_file_name(case.get("classname", ""))
        name = case.get("name", "")
        entry = counts[file]
        failure = case.find("failure")
        error = case.find("error")
        skipped = case.find("skipped")
        if failure is not None:
            entry.failed += 1
            entry.not_passed.append((name, "failed", failure.get("message", "")))
        elif error is not None:
            entry.errors += 1
            entry.not_passed.append((name, "error", error.get("message", "")))
        elif skipped is not None:
            entry.skipped += 1
            entry.not_passed.append((name, "skipped", skipped.get("message", "")))
        else:
            entry.passed += 1
    return counts


def known_reason(test: str, kafka_version: str) -> str | None:
    base = re.sub(r"\[.*\]$", "", test)
    if base == "test_kafka_version_infer" and kafka_version != INFERRED_VERSION:
        return VERSION_INFER_REASON.format(inferred=INFERRED_VERSION, pinned=kafka_version)
    return KNOWN_REASONS.get(base)


def run_suite(
    tree: Path,
    bootstrap: str,
    kafka_version: str,
    files: list[str],
    keyword: str | None,
    junit: Path,
) -> None:
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    env = dict(os.environ)
    env.update(
        KAFKA_VERSION=kafka_version,
        KAFKA_URI=f"tcp://{host}:{port}",
        KAFKA_ROOT=str(tree / "kafka-root"),
    )
    env.pop("PYTHONPATH", None)  # the tests import the installed kafka-python, not ours
    targets = (
        [f"test/integration/test_{name}_integration.py" for name in files]
        if files
        else ["test/integration"]
    )
    command = [
        sys.executable,
        "-m",
        "pytest",
        *targets,
        "-p",
        "no:cacheprovider",
        "-p",
        "no:asyncio",  # ours, from the venv; the suite does not use it
        "-q",
        "--timeout=120",
        "-o",
        "log_level=INFO",
        f"--junitxml={junit}",
    ]
    if keyword:
        command += ["-k", keyword]
    console.print(
        f"[bold]KAFKA_VERSION={kafka_version}[/] KAFKA_URI=tcp://{host}:{port}: "
        + " ".join(command[3:])
    )
    done = subprocess.run(command, cwd=tree, env=env, check=False, capture_output=True, text=True)
    if not junit.exists():  # pytest itself failed: say why
        console.print(done.stdout[-3000:], done.stderr[-3000:], markup=False)
        raise SystemExit(f"pytest exited {done.returncode} without a report")


def report(results: dict[str, dict[str, FileCounts]]) -> int:
    """Print the tables; the number of failures and errors with no known reason."""
    table = Table(title="kafka-python's test/integration against epochlog")
    for column in ("KAFKA_VERSION", "file", "passed", "failed", "errors", "skipped"):
        table.add_column(column, justify="left" if column in ("file", "KAFKA_VERSION") else "right")
    unexpected = 0
    details = Table(title="failures and errors, and why")
    for column in ("KAFKA_VERSION", "test", "outcome", "why"):
        details.add_column(column, overflow="fold")
    skips: dict[tuple[str, str, str], int] = defaultdict(int)
    for version, counts in results.items():
        totals = FileCounts()
        for file in sorted(counts):
            entry = counts[file]
            table.add_row(
                version,
                file,
                str(entry.passed),
                str(entry.failed),
                str(entry.errors),
                str(entry.skipped),
            )
            for attr in ("passed", "failed", "errors", "skipped"):
                setattr(totals, attr, getattr(totals, attr) + getattr(entry, attr))
            for test, outcome, message in entry.not_passed:
                if outcome == "skipped":
                    skips[(version, file, message)] += 1
                    continue
                reason = known_reason(test, version)
                if reason is None:
                    unexpected += 1
                    why = f"[bold red]UNEXPECTED[/]: {message[:300]}"
                else:
                    why = reason
                details.add_row(version, f"{file}::{test}", outcome, why)
        table.add_row(
            version,
            "[bold]total[/]",
            str(totals.passed),
            str(totals.failed),
            str(totals.errors),
            str(totals.skipped),
            end_section=True,
        )
    console.print(table)
    console.print(details)
    skipped = Table(title="tests the suite skipped itself")
    for column in ("KAFKA_VERSION", "file", "tests", "the suite's reason"):
        skipped.add_column(column, overflow="fold")
    for (version, file, message), count in sorted(skips.items()):
        skipped.add_row(version, file, str(count), message)
    console.print(skipped)
    console.print(f"{unexpected} unexpected failure(s)" if unexpected else "no unexpected failures")
    return unexpected


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--kafka-version",
        nargs="+",
        default=[INFERRED_VERSION, "2.5"],
        help="KAFKA_VERSION values to run the suite with, one run each",
    )
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument(
        "--files",
        nargs="*",
        default=[],
        help="test files by short name (consumer, admin, producer, sasl, ssl);"
        " all of test/integration by default",
    )
    parser.add_argument("-k", dest="keyword", help="pytest -k expression")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    args = parser.parse_args()

    installed = installed_kafka_python()
    if installed != KAFKA_PYTHON_VERSION:
        console.print(
            f"[yellow]installed kafka-python is {installed}; the suite is "
            f"{KAFKA_PYTHON_VERSION}'s[/]"
        )
    tree = fetch_suite(args.cache, KAFKA_PYTHON_VERSION)
    results: dict[str, dict[str, FileCounts]] = {}
    with tempfile.TemporaryDirectory(prefix="kafka-python-suite-") as scratch:
        console.print(f"starting a {args.brokers}-broker cluster")
        with LocalCluster(
            Path(scratch) / "cluster", args.brokers, broker_config=SUITE_BROKER_CONFIG
        ) as cluster:
            for version in args.kafka_version:
                junit = Path(scratch) / f"junit-{version}.xml"
                run_suite(tree, cluster.bootstrap_servers, version, args.files, args.keyword, junit)
                results[version] = read_junit(junit)
    return 1 if report(results) else 0


if __name__ == "__main__":
    sys.exit(main())
