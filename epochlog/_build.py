"""Compile the produce and fetch paths' modules to C extensions with mypyc (issue 20).

`python -m epochlog._build` compiles `COMPILED_MODULES` in place: each gets an extension module
(`records.cpython-311-x86_64-linux-gnu.so` beside `records.py`), which Python imports in
preference to the source. The sources stay the truth: the compiled modules are the same code,
type-checked by mypy and with their annotations enforced at run time. A failed compile (no C
compiler, no Python headers, mypy absent) leaves pure Python in place and says so; it never fails
the caller. `python -m epochlog._build --clean` removes the extensions (pure Python again);
`--check` reports which modules are loaded compiled.

Left out on purpose: `protocol/codec.py` (it generates and `exec`s its encoders and subclasses
its `Message` class at run time, which native classes forbid), `broker/handlers/produce.py` (it
reads the generated message classes' attributes, which mypy cannot see), `broker/reads.py` (a
unit test counts its reads by replacing `read_from_local_log`, which compiled callers would call
directly) and everything off the hot path.

Compiled code differs from the source in ways the tests found: annotations are checked at run
time (a wrong hint is a TypeError), an interpreted class may extend a compiled one only if it
says so (`mypyc_attr(allow_interpreted_subclasses=True)`), and a module's own functions are called
directly (replacing one in the module's namespace does not reach its callers).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import importlib.machinery
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD_DIR = ROOT / "build" / "mypyc"

# The modules a 10-record ProduceRequest and a follower's Fetch run through, leaf first.
COMPILED_MODULES: tuple[str, ...] = (
    "epochlog.protocol.varint",
    "epochlog.protocol.records",
    "epochlog.protocol.record_validation",
    "epochlog.protocol.produce_answer",
    "epochlog.protocol.framing",
    "epochlog.storage.index",
    "epochlog.storage.txn_index",
    "epochlog.storage.epoch_cache",
    "epochlog.storage.segment",
    "epochlog.storage.log",
    "epochlog.broker.produce_validation",
    "epochlog.broker.producer_state",
    "epochlog.broker.appends",
    "epochlog.broker.delayed",
    "epochlog.broker.partition",
    "epochlog.broker.replica_manager",
    "epochlog.broker.transmit",
    "epochlog.broker.server",
)

# mypyc's shared library (the modules' code; each module's extension is a shim importing it) lives
# in the package as epochlog/_compiled__mypyc.*.so, so an installed package finds it.
GROUP = "epochlog._compiled"

# Written by a build that ran to its end: each compiled module with its source's digest, so a
# source edited since (whose extension would silently shadow the edit) is caught.
STAMP = BUILD_DIR / "compiled-modules.txt"


def source_path(module: str) -> Path:
    return ROOT / (module.replace(".", "/") + ".py")


def source_digest(module: str) -> str:
    return hashlib.sha256(source_path(module).read_bytes()).hexdigest()


def built_digests() -> dict[str, str]:
    """The modules the last complete build compiled, with their sources' digests then."""
    if not STAMP.exists():
        return {}
    return dict(line.split() for line in STAMP.read_text().splitlines() if line.strip())


def stale_modules() -> list[str]:
    """Compiled modules whose source changed since the build: rebuild (or --clean)."""
    return [m for m, digest in built_digests().items() if source_digest(m) != digest]


def extension_paths(module: str) -> list[Path]:
    """The extension files built for `module` (none when it runs as pure Python)."""
    source = source_path(module)
    return [
        source.with_name(source.stem + suffix)
        for suffix in importlib.machinery.EXTENSION_SUFFIXES
        if source.with_name(source.stem + suffix).exists()
    ]


def clean() -> None:
    """Remove every extension beside a source (this build's, also of modules no longer listed),
    and the shared library."""
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        for path in (ROOT / "epochlog").rglob("*" + suffix):
            if path.with_name(path.name[: -len(suffix)] + ".py").exists():
                path.unlink()
    for path in (ROOT / "epochlog").glob("_compiled__mypyc*"):
        path.unlink()
    shutil.rmtree(BUILD_DIR, ignore_errors=True)


def build(opt_level: str) -> bool:
    """Compile in place in a child process (setuptools' build_ext); False, with the reason
    printed, when it could not: the pure-Python modules then stay in use."""
    try:
        import mypyc  # noqa: F401
    except ImportError:
        warn("mypy (mypyc) is not installed: install the 'build' extra")
        return False
    clean()
    BUILD_DIR.mkdir(parents=True, exist_ok=True)
    setup = BUILD_DIR / "setup.py"
    # mypy's own arguments: the compiled modules are checked; the rest are read for their types.
    files = ["--follow-imports=silent", "--ignore-missing-imports"] + [
        str(source_path(m).relative_to(ROOT)) for m in COMPILED_MODULES
    ]
    setup.write_text(
        "from setuptools import setup\n"
        "from mypyc.build import mypycify\n"
        f"setup(name='epochlog-compiled', ext_modules=mypycify({files!r}, "
        f"opt_level={opt_level!r}, group_name={GROUP!r}, target_dir={str(BUILD_DIR / 'c')!r}))\n"
    )
    started = time.monotonic()
    env = dict(os.environ, MYPYC_OPT_LEVEL=opt_level)
    command = [
        sys.executable,
        str(setup),
        "build_ext",
        "--inplace",
        "--build-temp",
        str(BUILD_DIR / "temp"),
        "-j",
        str(os.cpu_count() or 1),
    ]
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        (BUILD_DIR / "build.log").write_text(result.stdout + result.stderr)
        clean_partial()
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-15:])
        warn(f"mypyc build failed (log: {BUILD_DIR / 'build.log'}):\n{tail}")
        return False
    missing = [m for m in COMPILED_MODULES if not extension_paths(m)]
    if missing:
        clean_partial()
        warn(f"mypyc build made no extension for {', '.join(missing)}")
        return False
    STAMP.write_text("".join(f"{m} {source_digest(m)}\n" for m in COMPILED_MODULES))
    print(
        f"epochlog: compiled {len(COMPILED_MODULES)} modules with mypyc "
        f"in {time.monotonic() - started:.0f} s"
    )
    return True


def clean_partial() -> None:
    """After a failure: no extension may shadow its source half-built."""
    log = (BUILD_DIR / "build.log").read_text() if (BUILD_DIR / "build.log").exists() else ""
    clean()
    if log:
        BUILD_DIR.mkdir(parents=True, exist_ok=True)
        (BUILD_DIR / "build.log").write_text(log)


def warn(message: str) -> None:
    print(f"epochlog: WARNING: {message}\nepochlog: running as pure Python", file=sys.stderr)


def loaded_compiled(module: str) -> bool:
    """Whether `module`, imported now, is the extension rather than the source."""
    loaded = importlib.import_module(module)
    return not str(getattr(loaded, "__file__", "")).endswith(".py")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--clean", action="store_true", help="remove the extensions")
    action.add_argument("--check", action="store_true", help="which modules load compiled")
    parser.add_argument(
        "--opt-level", default="3", choices=["0", "1", "2", "3"], help="the C compiler's -O"
    )
    args = parser.parse_args(argv)
    if args.clean:
        clean()
        print("epochlog: extensions removed; pure Python")
        return 0
    if args.check:
        compiled = [m for m in COMPILED_MODULES if loaded_compiled(m)]
        stale = stale_modules()
        print(f"epochlog: {len(compiled)} of {len(COMPILED_MODULES)} hot-path modules compiled")
        for module in COMPILED_MODULES:
            state = "compiled" if module in compiled else "python  "
            note = "  STALE: its source changed since the build" if module in stale else ""
            print(f"  {state}  {module}{note}")
        return 1 if stale else 0
    build(args.opt_level)
    return 0  # a failed compile falls back to pure Python; it was reported


if __name__ == "__main__":
    raise SystemExit(main())
