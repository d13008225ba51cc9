"""`python_repl`: run Python code in the sandbox, keeping variables between calls.

Why a state file rather than a long-lived interpreter: the `Sandbox` protocol runs one
command per ``exec`` (a local process group or a container exec), and the same tool may be
handed a different sandbox later. So each call is a fresh ``python -c`` process that reloads
the session from a file in the sandbox's workspace and saves it again at the end. What
survives a call: picklable values, imported modules (re-imported by name), and functions and
classes defined in earlier cells (re-run from their source, so instances of them unpickle).
Names that cannot be kept (open files, generators, lambdas) are listed in the result. A session
lasts one run: under a `ToolRunner`, one life of its sandbox (`SandboxLife`: until the run
ends, a suspended run keeping it), so the next run of the same agent, or another `mcp serve`
client, sharing this instance starts empty; without one, the instance is the session. A
session's file is removed when its run ends, when the instance is garbage-collected, or by
`reset()`.

The workspace is shared (other runs, `mcp serve` clients, the run's own `bash` commands), and
unpickling runs code, so the file is sealed: encrypted with a key only this instance holds
(sent to the driver on stdin, never written anywhere), and restored only when its SHA-256 is
the one the previous call of this session reported (the host keeps it). Another run can
neither read the variables nor plant a pickle (nor put back an older state); it can only
delete or replace the file, and the next call then starts empty and says so. The host never
unpickles anything. The driver runs isolated (``-I``), so a ``json.py`` in the workspace
cannot replace what it imports to check the file; the cell's own imports then see the
workspace as a REPL started there would (``''`` and ``PYTHONPATH`` on ``sys.path``). Code a
cell runs can reach its own session's key (it runs in the driver's process): it is that
session.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import sys
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jianmu.errors import ToolExecutionError, ToolInputError, ToolTimeoutError
from jianmu.execution.runner import SandboxLife, sandbox_life
from jianmu.tools.builtin.bash import SandboxedTool, is_local_sandbox
from jianmu.tools.calls import truncate_text

if TYPE_CHECKING:
    from jianmu.execution.sandbox import Sandbox

__all__ = ("PythonREPLTool",)

_DIGEST = re.compile(r"[0-9a-f]{64}")

STATE_DIR = ".jianmu/python_repl"
"""Where session files live, relative to the sandbox workspace."""


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def _remove_files(paths: set[Path]) -> None:
    """Remove each session file and what a killed call left beside it (``<name>.tmp*``).

    Through folder descriptors opened without following links: sandboxed code may have made
    ``.jianmu`` a link to a folder outside, and the host (maybe root) must not delete there.
    """
    for path in paths:
        workspace = path.parent.parent.parent
        with contextlib.suppress(OSError):
            ws_fd = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
            try:
                _remove_session(ws_fd, path.name)
            finally:
                os.close(ws_fd)


def _remove_session(ws_fd: int, name: str) -> None:
    top, sub = STATE_DIR.split("/")
    top_fd = os.open(top, _DIR_FLAGS, dir_fd=ws_fd)
    try:
        sub_fd = os.open(sub, _DIR_FLAGS, dir_fd=top_fd)
        try:
            for entry in os.listdir(sub_fd):
                if entry == name or entry.startswith(name + ".tmp"):
                    with contextlib.suppress(OSError):
                        os.unlink(entry, dir_fd=sub_fd)
        finally:
            os.close(sub_fd)
        # Drop .jianmu/python_repl and .jianmu when this was the last session in them.
        with contextlib.suppress(OSError):
            os.rmdir(sub, dir_fd=top_fd)
    finally:
        os.close(top_fd)
    with contextlib.suppress(OSError):
        os.rmdir(top, dir_fd=ws_fd)


@dataclass(eq=False)
class _Session:
    """One REPL session: its file's name, the key that seals it, and the SHA-256 of the file
    its last call saved (the only one the next call restores)."""

    name: str = field(default_factory=lambda: secrets.token_hex(8))
    key: bytes = field(default_factory=lambda: secrets.token_bytes(32), repr=False)
    digest: str | None = None
    cell: int = 0

    @property
    def path(self) -> str:
        return f"{STATE_DIR}/{self.name}.pkl"


class PythonREPLTool(SandboxedTool):
    """Run Python code like a REPL; variables persist across calls of this instance."""

    name = "python_repl"
    effect_tags = ("code_exec",)
    exec_timeout: float = 60.0
    """Seconds before the code's process group is killed."""
    timeout_seconds = 70.0
    max_result_length = 30_000

    def __init__(self) -> None:
        self._own = _Session()  # calls without a ToolRunner: the tool's own default sandbox
        self._last = self._own
        # One session per sandbox life (`SandboxLife`): a run's, or an `mcp serve` client's.
        self._sessions: weakref.WeakKeyDictionary[SandboxLife, _Session] = (
            weakref.WeakKeyDictionary()
        )
        self._state_files: set[Path] = set()
        # Remove the session files when the tool goes away; a finalizer, not __del__, so the
        # set (not self) is what it keeps alive.
        self._finalizer = weakref.finalize(self, _remove_files, self._state_files)

    @property
    def state_path(self) -> str:
        """The file of the session used last, relative to the sandbox workspace."""
        return self._last.path

    def reset(self) -> None:
        """Forget every variable: delete the session files and start new sessions."""
        _remove_files(self._state_files)
        self._state_files.clear()
        self._sessions.clear()
        self._own = self._last = _Session()

    def _session(self, sandbox: Sandbox) -> _Session:
        life = sandbox_life()
        if life is None:
            return self._own
        session = self._sessions.get(life)
        if session is None:
            session = self._sessions[life] = _Session()
            # the run is over when its life goes: its file goes too, not left for the next
            files = {Path(sandbox.workspace) / session.path}
            weakref.finalize(life, _remove_files, files)
        return session

    async def run(self, code: str) -> str:
        """Run Python 3 code in a sandboxed process, like a REPL cell.

        Use it for data processing, quick experiments and calculations that need more than a
        single expression. Variables, functions, classes and imports from earlier calls in
        the same session are still defined (names that cannot be pickled, like open files,
        are listed as not kept). Returns what the code printed, then anything on stderr under
        [stderr], then the repr of the last line's value under [value] when the last line is
        an expression; an exception or a syntax error is an error with its traceback. Runs
        are killed after 60 seconds.

        Args:
            code: Python code to run (one or more statements), e.g.
                'import math\\nx = math.pi\\nx * 2'.

        Returns:
            stdout, stderr and the last value.
        """
        return await self.run_in_default_sandbox(code=code)

    async def run_sandboxed(self, sandbox: Sandbox, code: str) -> str:  # type: ignore[override]
        """Run ``code`` through ``sandbox.exec`` and report its output and last value.

        Raises:
            ToolInputError: ``code`` is empty.
            ToolTimeoutError: the code ran past ``exec_timeout`` (its processes were killed).
            ToolExecutionError: the code raised, or had a syntax error (traceback included).
        """
        if not isinstance(code, str) or not code.strip():
            raise ToolInputError("code is empty; give Python statements such as 'print(1 + 1)'")
        session = self._last = self._session(sandbox)
        session.cell += 1
        marker = f"\x1e@@JIANMU-REPL-{secrets.token_hex(8)}@@"
        request = {
            "code": code, "state": session.path, "cell": session.cell, "marker": marker,
            "key": session.key.hex(), "expect": session.digest,
        }
        self._state_files.add(Path(sandbox.workspace) / session.path)
        local = is_local_sandbox(sandbox)
        python = getattr(sandbox, "python", sys.executable) if local else "python3"
        env = {"PYTHONIOENCODING": "utf-8", "PYTHONDONTWRITEBYTECODE": "1"}
        result = await sandbox.exec(
            # -I: nothing in the workspace or the environment replaces what the driver imports
            [python, "-I", "-B", "-c", DRIVER], stdin=json.dumps(request), env=env,
            timeout=self.exec_timeout,
        )
        stdout, found, tail = result.stdout.rpartition(marker)
        report: dict[str, Any] | None = None
        if found:
            with contextlib.suppress(ValueError):
                report = json.loads(tail.strip().splitlines()[0])
            stdout = stdout[:-1] if stdout.endswith("\n") else stdout
        else:
            stdout = result.stdout
        limit = max(self.max_result_length // 2, 1000)
        stdout, _ = truncate_text(stdout, limit)
        stderr, _ = truncate_text(result.stderr, limit)
        sections = []
        if stdout.strip():
            sections.append(stdout.rstrip("\n"))
        if stderr.strip():
            sections.append("[stderr]\n" + stderr.rstrip("\n"))
        so_far = "\n".join(sections)
        if result.timed_out:
            raise ToolTimeoutError(
                f"the code ran past {self.exec_timeout:g}s and was killed; variables set in "
                "this call are lost" + (f"\noutput so far:\n{so_far}" if so_far else "")
            )
        if report is None and result.oom_killed:
            raise ToolExecutionError(
                "the Python process was killed for exceeding the sandbox's memory limit; "
                "variables set in this call are lost" + (f"\n{so_far}" if so_far else "")
            )
        if report is None:
            raise ToolExecutionError(
                f"the Python process ended abnormally (exit code {result.exit_code})"
                + (f"\n{so_far}" if so_far else "")
            )
        saved = report.get("state")
        if isinstance(saved, str) and _DIGEST.fullmatch(saved):
            session.digest = saved
        notes = []
        if report.get("restore_failed"):
            notes.append("could not restore: " + "; ".join(report["restore_failed"]))
        if report.get("dropped"):
            notes.append("not kept for the next call: " + "; ".join(report["dropped"]))
        if report.get("error"):
            raise ToolExecutionError(
                report["error"].rstrip("\n")
                + (f"\n[output before the error]\n{so_far}" if so_far else "")
                + "".join(f"\n[note] {n}" for n in notes)
            )
        value = report.get("value")
        if value is not None and not sections and not notes:
            return str(value)
        if value is not None:
            sections.append(f"[value]\n{value}")
        sections.extend(f"[note] {n}" for n in notes)
        return "\n".join(sections) if sections else "(no output)"

    def __repr__(self) -> str:
        return f"<PythonREPLTool session={self._last.name} cells={self._last.cell}>"


DRIVER = r'''
def _jianmu_repl():
    # Run with -I: sys.path holds only the standard library and site-packages here, so
    # nothing in the workspace replaces these modules while the state file is checked.
    import ast, hashlib, hmac, importlib, json, linecache, os, pickle, stat, sys, tempfile
    import traceback, types
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(encoding="utf-8")  # what PYTHONIOENCODING did (-I drops it)
        except Exception:
            pass
    req = json.loads(sys.stdin.read())
    sys.stdin = open(os.devnull)
    main = sys.modules["__main__"]
    ns = main.__dict__
    ns.pop("_jianmu_repl", None)  # the user's namespace holds nothing of the driver
    state_path, marker, key = req["state"], req["marker"], bytes.fromhex(req.pop("key"))
    report = {"value": None, "error": None, "dropped": [], "restore_failed": [],
              "state": None}
    saved = {"modules": {}, "defs": {}, "values": {}}
    magic, chunk = b"JIANMU-REPL-1\n", 1 << 20

    def crypt(nonce, data):
        # XOR with SHAKE-256(key, nonce, block) (the standard library has no AES)
        out = bytearray()
        for i in range(0, len(data), chunk):
            part = data[i:i + chunk]
            pad = hashlib.shake_256(key + nonce + (i // chunk).to_bytes(8, "big"))
            mixed = int.from_bytes(part, "big") ^ int.from_bytes(pad.digest(len(part)), "big")
            out += mixed.to_bytes(len(part), "big")
        return out

    if req["expect"]:
        # Only the file the previous call of this session saved: its digest is the host's.
        blob = b""
        try:
            fd = os.open(state_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            with open(fd, "rb") as fh:
                if stat.S_ISREG(os.fstat(fh.fileno()).st_mode):  # not a FIFO to hang on
                    blob = fh.read()
        except OSError:
            pass
        if not hmac.compare_digest(hashlib.sha256(blob).hexdigest(), req["expect"]):
            report["restore_failed"].append(
                "<state file>: changed or removed outside this session; the variables of "
                "earlier calls are lost")
        else:
            try:
                view = memoryview(blob)  # no copy of a large state
                saved = pickle.loads(crypt(bytes(view[len(magic):len(magic) + 16]),
                                           view[len(magic) + 16:]))
                del view, blob
            except Exception as exc:
                report["restore_failed"].append("<state file>: %s" % exc)
    # From here on the cell's imports see what `python -c` would: the workspace, PYTHONPATH.
    extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[0:0] = ["", *extra]
    if sys.prefix == sys.base_prefix:
        import site
        user_site = site.getusersitepackages()
        if os.path.isdir(user_site):
            site.addsitedir(user_site)
    for name, modname in saved["modules"].items():
        try:
            ns[name] = importlib.import_module(modname)
        except Exception as exc:
            report["restore_failed"].append("%s (module %s): %s" % (name, modname, exc))
    for name, src in saved["defs"].items():
        try:
            exec(compile(src, "<repl-def-%s>" % name, "exec"), ns)
        except Exception as exc:
            report["restore_failed"].append("%s: %s" % (name, exc))
    for name, value_blob in saved["values"].items():
        try:
            ns[name] = pickle.loads(value_blob)
        except Exception as exc:
            report["restore_failed"].append("%s: %s" % (name, exc))
    code = req["code"]
    filename = "<cell %d>" % req["cell"]
    # Tracebacks then show the offending source line.
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    defs = dict(saved["defs"])
    try:
        tree = ast.parse(code, filename, "exec")
    except SyntaxError as exc:
        report["error"] = "SyntaxError: %s (line %s, column %s)\n%s" % (
            exc.msg, exc.lineno, exc.offset, (exc.text or "").rstrip())
        tree = None
    if tree is not None:
        lines = code.splitlines(True)
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                start = min([d.lineno for d in node.decorator_list] + [node.lineno])
                defs.pop(node.name, None)
                defs[node.name] = "".join(lines[start - 1:node.end_lineno])
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        try:
            exec(compile(tree, filename, "exec"), ns)
            if last is not None:
                value = eval(compile(last, filename, "eval"), ns)
                if value is not None:
                    text = repr(value)
                    if len(text) > 20000:
                        more = len(text) - 20000
                        text = text[:20000] + "...[repr cut: %d more characters]" % more
                    report["value"] = text
        except BaseException as exc:
            if isinstance(exc, SystemExit) and exc.code in (None, 0):
                pass
            else:
                tb = traceback.extract_tb(exc.__traceback__)
                tb = [f for f in tb if f.filename.startswith("<cell")] or tb
                report["error"] = "".join(traceback.format_list(tb)) + "".join(
                    traceback.format_exception_only(type(exc), exc))
    new = {"modules": {}, "defs": {}, "values": {}}
    for name, value in list(ns.items()):
        if name.startswith("__") or name in ("In", "Out"):
            continue
        if isinstance(value, types.ModuleType):
            new["modules"][name] = value.__name__
        elif name in defs and getattr(value, "__module__", None) == "__main__":
            # Bound by a def/class statement (decorated or not): re-run its source next time.
            new["defs"][name] = defs[name]
        else:
            try:
                new["values"][name] = pickle.dumps(value)
            except Exception as exc:
                report["dropped"].append("%s (%s: %s)" % (name, type(value).__name__, exc))
    new["defs"] = {k: defs[k] for k in defs if k in new["defs"]}
    folder, tmp = os.path.dirname(state_path) or ".", None
    try:
        os.makedirs(folder, exist_ok=True)
        nonce = os.urandom(16)
        sealed = crypt(nonce, pickle.dumps(new))
        # a fresh name (O_EXCL): a link planted at a fixed name would lead the write elsewhere
        fd, tmp = tempfile.mkstemp(prefix=os.path.basename(state_path) + ".tmp", dir=folder)
        digest = hashlib.sha256()
        with open(fd, "wb") as fh:
            for part in (magic, nonce, sealed):
                fh.write(part)
                digest.update(part)
        os.replace(tmp, state_path)
        report["state"] = digest.hexdigest()
    except Exception as exc:  # another run may have put a folder there: report, go on
        report["dropped"].append("every name (the session could not be saved: %s)" % exc)
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except Exception:
            pass
    # Straight to fd 1: the user's code may have replaced or closed sys.stdout.
    os.write(1, ("\n" + marker + json.dumps(report) + "\n").encode("utf-8"))
    sys.exit(1 if report["error"] else 0)


_jianmu_repl()
'''
"""The program run in the sandbox for each call (sent as ``python -I -B -c``).

It reads ``{"code", "state", "cell", "marker", "key", "expect"}`` as JSON on stdin, restores
the session from the state file (only when its SHA-256 is ``expect``; decrypted with ``key``),
runs the code like a REPL cell (the value of a final expression is kept), saves the session
again (sealed anew), and prints one JSON line after ``marker`` on stdout with the value, the
error, the names it could not keep and the new file's SHA-256. It uses only the standard
library, so it works in any sandbox image with Python 3."""
