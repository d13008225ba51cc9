"""Run Python scripts in processes forked from a server that has imported their modules once.

Each script still runs in a process of its own (its own pid, open files and memory: a copy of
the server's as it stood after the imports, which is what a fresh interpreter holds once it
has imported them too), without each process paying the imports again. The server itself runs
nothing of a script: it imports, then forks, one child per `ForkServer.start`.

Run as ``forked.py MODULE[:NAME,...]...`` it is the server: it reads one JSON request a line
on stdin, ``{"start": {argv, env, cwd, out, err}}`` (forks; answers ``{"pid": N}``) or
``{"wait": N}`` (answers ``{"code": EXIT_CODE}`` once that child has ended).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

__all__ = ("ForkServer", "Forked")


@dataclass
class Forked:
    """A script started by a `ForkServer`: its pid and where its output goes."""

    server: ForkServer
    pid: int
    out: Path
    err: Path

    ended: bool = False
    """Whether `wait` has returned."""

    def wait(self) -> int:
        """Wait for the script's end: its exit code."""
        code = int(self.server.ask({"wait": self.pid})["code"])
        self.ended = True
        return code

    def output(self) -> tuple[str, str]:
        """What the ended script wrote to stdout and stderr (files of its own)."""
        return self.out.read_text(encoding="utf-8"), self.err.read_text(encoding="utf-8")


class ForkServer:
    """A server process that has imported ``modules`` (run with ``env``, in ``cwd``); a
    ``module:name,name`` also loads those names of it (Jianmu's load on first use)."""

    def __init__(self, *modules: str, env: dict[str, str], cwd: Path) -> None:
        self._cwd, self._count = cwd, 0
        self._process = subprocess.Popen(
            [sys.executable, __file__, *modules], cwd=cwd, env=env, text=True,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        line = self._stdout.readline()
        if line != "ready\n":
            self.close()
            raise RuntimeError(f"the fork server did not start: {line!r}")

    @property
    def _stdout(self) -> IO[str]:
        assert self._process.stdout is not None
        return self._process.stdout

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        """Send one request; its answer."""
        assert self._process.stdin is not None
        self._process.stdin.write(json.dumps(request) + "\n")
        self._process.stdin.flush()
        line = self._stdout.readline()
        if not line:
            raise RuntimeError("the fork server ended")
        return dict(json.loads(line))

    def start(self, argv: list[str], *, env: dict[str, str], cwd: Path,
              out: Path | None = None) -> Forked:
        """Start ``python ARGV`` (a script and its arguments) in a child: stdout and stderr go
        to files of their own, or both to ``out`` (a FIFO the caller reads, say)."""
        self._count += 1
        err = out or self._cwd / f".forked-{self._count}.err"
        out = out or self._cwd / f".forked-{self._count}.out"
        answer = self.ask({"start": {"argv": argv, "env": env, "cwd": str(cwd),
                                     "out": str(out), "err": str(err)}})
        return Forked(self, int(answer["pid"]), out, err)

    def run(self, argv: list[str], *, env: dict[str, str], cwd: Path) -> tuple[int, str, str]:
        """Run ``python ARGV`` in a child to its end: exit code, stdout, stderr."""
        child = self.start(argv, env=env, cwd=cwd)
        return child.wait(), *child.output()

    def close(self) -> None:
        """End the server (its children have been waited for, or are left to init)."""
        if self._process.stdin is not None:
            self._process.stdin.close()
        self._process.wait(30)
        self._stdout.close()

    def __enter__(self) -> ForkServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _child(request: dict[str, Any]) -> int:
    """In the forked child: become ``python ARGV`` in its folder and environment, run it."""
    import runpy
    import traceback

    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    null = os.open(os.devnull, os.O_RDONLY)
    out = os.open(request["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    err = out if request["err"] == request["out"] else os.open(
        request["err"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    for fd, target in ((null, 0), (out, 1), (err, 2)):
        os.dup2(fd, target)
    for fd in {null, out, err}:
        os.close(fd)
    # sys.stdout and sys.stderr write to fds 1 and 2 (flushed before the fork); stdin's reader
    # may hold the server's requests read ahead: a fresh one
    sys.stdin = open(0, encoding="utf-8", closefd=False)
    argv = request["argv"]
    sys.argv = list(argv)
    sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))  # as `python SCRIPT` sets it
    code = 0
    try:
        runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as exc:
        if isinstance(exc.code, int) or exc.code is None:
            code = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    return code


def _serve(modules: list[str]) -> None:
    import importlib

    for spec in modules:  # `module` or `module:name,name` (Jianmu's names load when used)
        module, _, names = spec.partition(":")
        loaded = importlib.import_module(module)
        for name in filter(None, names.split(",")):
            getattr(loaded, name)
    import threading

    if threading.active_count() != 1:  # a child would lack them: not what a fresh one holds
        sys.exit(f"the imports started threads: {threading.enumerate()}")
    print("ready", flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        if "start" in request:
            pid = os.fork()
            if pid == 0:  # the child ends as the script's interpreter would (atexit and all)
                sys.exit(_child(request["start"]))
            print(json.dumps({"pid": pid}), flush=True)
        else:
            _, status = os.waitpid(request["wait"], 0)
            print(json.dumps({"code": os.waitstatus_to_exitcode(status)}), flush=True)


if __name__ == "__main__":
    sys.path[0] = str(Path(__file__).resolve().parents[2])  # the repository, not support/
    _serve(sys.argv[1:])
