"""The mypyc build (epochlog._build): what it compiled is what runs, and nothing stale shadows
its source. Both hold with and without a build: after `python -m epochlog._build --clean` every
hot-path module must load from its .py."""

from __future__ import annotations

import importlib
import importlib.machinery
import subprocess

from epochlog import _build


def test_the_modules_the_last_build_compiled_are_the_ones_loaded():
    built = _build.built_digests()
    for module in _build.COMPILED_MODULES:
        assert _build.loaded_compiled(module) is (module in built), module
        assert bool(_build.extension_paths(module)) is (module in built), module


def test_no_compiled_module_is_older_than_its_source():
    stale = _build.stale_modules()
    assert stale == [], f"{stale} changed since the build: run python -m epochlog._build"


def test_every_module_listed_for_compilation_exists_and_imports():
    for module in _build.COMPILED_MODULES:
        assert _build.source_path(module).is_file(), module
        importlib.import_module(module)


def test_a_stamp_with_a_changed_source_names_the_stale_module(tmp_path, monkeypatch):
    stamp = tmp_path / "compiled-modules.txt"
    varint, records = "epochlog.protocol.varint", "epochlog.protocol.records"
    stamp.write_text(f"{varint} {_build.source_digest(varint)}\n{records} {'0' * 64}\n")
    monkeypatch.setattr(_build, "STAMP", stamp)
    assert _build.built_digests() == {varint: _build.source_digest(varint), records: "0" * 64}
    assert _build.stale_modules() == [records]


def test_check_reports_every_module(capsys):
    assert _build.main(["--check"]) == (1 if _build.stale_modules() else 0)
    out = capsys.readouterr().out
    assert f"of {len(_build.COMPILED_MODULES)} hot-path modules compiled" in out
    for module in _build.COMPILED_MODULES:
        assert module in out


def test_a_failed_compile_warns_and_leaves_no_extension_shadowing_a_source(
    tmp_path, monkeypatch, capsys
):
    package = tmp_path / "epochlog"
    package.mkdir()
    (package / "varint.py").write_text("X = 1\n")
    half_built = package / f"varint{importlib.machinery.EXTENSION_SUFFIXES[0]}"
    half_built.write_bytes(b"not an extension")
    monkeypatch.setattr(_build, "ROOT", tmp_path)
    monkeypatch.setattr(_build, "BUILD_DIR", tmp_path / "build" / "mypyc")
    monkeypatch.setattr(_build, "STAMP", tmp_path / "build" / "mypyc" / "stamp.txt")
    monkeypatch.setattr(_build, "COMPILED_MODULES", ("epochlog.varint",))

    def failing_compile(command, **kwargs):
        half_built.write_bytes(b"still not an extension")
        return subprocess.CompletedProcess(command, 1, "", "error: gcc not found")

    monkeypatch.setattr(_build.subprocess, "run", failing_compile)
    assert _build.build("0") is False
    assert not half_built.exists() and not _build.STAMP.exists()
    err = capsys.readouterr().err
    assert "mypyc build failed" in err and "gcc not found" in err and "pure Python" in err
    assert "gcc not found" in (tmp_path / "build" / "mypyc" / "build.log").read_text()
