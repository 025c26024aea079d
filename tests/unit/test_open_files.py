"""The broker's open-files limit decision (node/open_files.wanted_limit)."""

from __future__ import annotations

import resource
import subprocess
import sys

from epochlog.node.open_files import TARGET_OPEN_FILES, wanted_limit

INF = resource.RLIM_INFINITY


def test_a_privileged_broker_raises_both_limits_to_the_target() -> None:
    assert wanted_limit(20_000, 20_000, 1_048_576, privileged=True) == (
        TARGET_OPEN_FILES,
        TARGET_OPEN_FILES,
    )


def test_the_hard_limit_never_passes_the_kernels_nr_open() -> None:
    assert wanted_limit(1024, 4096, 100_000, privileged=True) == (100_000, 100_000)


def test_an_unprivileged_broker_raises_its_soft_limit_to_its_hard_limit() -> None:
    assert wanted_limit(1024, 524_288, 1_048_576, privileged=False) == (524_288, 524_288)


def test_nothing_changes_when_the_limits_already_suffice() -> None:
    assert wanted_limit(TARGET_OPEN_FILES, TARGET_OPEN_FILES, 1 << 21, privileged=True) is None
    assert wanted_limit(INF, INF, 1 << 20, privileged=True) is None
    assert wanted_limit(4096, 4096, 1 << 20, privileged=False) is None


def test_an_unlimited_hard_limit_raises_the_soft_limit_to_the_target_only() -> None:
    assert wanted_limit(1024, INF, 1 << 20, privileged=True) == (TARGET_OPEN_FILES, INF)


def test_a_soft_limit_above_the_target_is_left_alone() -> None:
    assert wanted_limit(2_000_000, INF, 1 << 21, privileged=False) is None


def test_a_process_started_with_a_low_soft_limit_raises_it_to_its_hard_limit() -> None:
    """The I/O half: a process whose soft limit is 256 (a shell may hand a broker 1,024) ends
    with its soft limit at least at its hard limit's level, capped by the target."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    script = (
        "import resource; from epochlog.node.open_files import raise_open_files_limit; "
        "raise_open_files_limit(); print(resource.getrlimit(resource.RLIMIT_NOFILE)[0])"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard)),
    )
    expected = TARGET_OPEN_FILES if hard == INF else min(hard, TARGET_OPEN_FILES)
    assert int(done.stdout.strip()) >= expected
