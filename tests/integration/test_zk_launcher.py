"""The ZooKeeper launcher against Debian's real server: start, stop, kill, death with the parent,
clear errors."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from epochlog.zk import launcher
from epochlog.zk.launcher import (
    ZooKeeperNotInstalledError,
    ZooKeeperServer,
    ZooKeeperStartError,
    four_letter_word,
)


def _alive(pid: int) -> bool:
    """Running (not gone, not a zombie waiting for a reaper)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _wait_gone(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return not _alive(pid)


def test_start_serve_and_stop(tmp_path: Path):
    with ZooKeeperServer(tmp_path, fsync=False) as server:
        pid = server.pid
        assert pid is not None and _alive(pid)
        assert server.connect_string == f"127.0.0.1:{server.client_port}"
        assert server.mode() == "standalone"
        assert four_letter_word("127.0.0.1", server.client_port, "ruok") == "imok"
        cfg = (tmp_path / "zoo.cfg").read_text()
        assert "admin.enableServer=false" in cfg and "tickTime=500" in cfg
    assert not server.is_running()
    assert not _alive(pid)
    assert (tmp_path / "logs" / "zookeeper.log").stat().st_size > 0
    server.stop()  # idempotent


def test_given_port_and_kill(tmp_path: Path):
    port = launcher.free_port()
    server = ZooKeeperServer(tmp_path, client_port=port, fsync=False).start()
    try:
        assert server.connect_string.endswith(f":{port}")
        pid = server.pid
        server.kill()
        assert not server.is_running() and not _alive(pid)
        assert server._process is not None and server._process.returncode == -signal.SIGKILL
        assert server.mode() is None
    finally:
        server.stop()


def test_server_dies_with_its_parent(tmp_path: Path):
    script = textwrap.dedent(
        f"""
        import sys, time
        from epochlog.zk.launcher import ZooKeeperServer
        server = ZooKeeperServer({str(tmp_path)!r}, fsync=False).start()
        print(server.pid, flush=True)
        time.sleep(120)
        """
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=os.getcwd()
    )
    zk_pid = None
    try:
        line = parent.stdout.readline()
        assert line.strip().isdigit(), f"child printed {line!r}"
        zk_pid = int(line)
        assert _alive(zk_pid)
        parent.kill()
        parent.wait(5)
        assert _wait_gone(zk_pid, 5.0), "ZooKeeper outlived the process that started it"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        if zk_pid is not None and _alive(zk_pid):
            os.kill(zk_pid, signal.SIGKILL)


def test_port_in_use_fails_with_the_log_tail(tmp_path: Path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        server = ZooKeeperServer(tmp_path, client_port=port, startup_timeout_s=15)
        with pytest.raises(ZooKeeperStartError) as err:
            server.start()
    message = str(err.value)
    assert "log tail" in message and "zookeeper.log" in message
    assert "Address already in use" in message or "BindException" in message
    assert not server.is_running()


def test_missing_jar_or_java_says_what_to_install(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("EPOCHLOG_ZOOKEEPER_JAR", raising=False)
    with pytest.raises(ZooKeeperNotInstalledError, match="apt-get install zookeeper"):
        launcher.find_zookeeper_jar(("/nonexistent/zookeeper.jar",))
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(ZooKeeperNotInstalledError, match="java not found"):
        launcher.find_java()
    with pytest.raises(ZooKeeperNotInstalledError):
        ZooKeeperServer("/tmp/unused-zk-dir").start()
