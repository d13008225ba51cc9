"""The program `python_repl` runs in the sandbox for each call (sent as ``python -c``).

It reads ``{"code", "state", "cell", "marker"}`` as JSON on stdin, restores the session from
the state file, runs the code like a REPL cell (the value of a final expression is kept),
saves the session again, and prints one JSON line after ``marker`` on stdout with the value,
the error and the names it could not keep. It uses only the standard library, so it works in
any sandbox image with Python 3.
"""

from __future__ import annotations

__all__ = ("DRIVER",)

DRIVER = r'''
def _jianmu_repl():
    import ast, importlib, json, linecache, os, pickle, sys, traceback, types
    req = json.loads(sys.stdin.read())
    sys.stdin = open(os.devnull)
    main = sys.modules["__main__"]
    ns = main.__dict__
    ns.pop("_jianmu_repl", None)  # the user's namespace holds nothing of the driver
    state_path, marker = req["state"], req["marker"]
    report = {"value": None, "error": None, "dropped": [], "restore_failed": []}
    saved = {"modules": {}, "defs": {}, "values": {}}
    if os.path.exists(state_path):
        try:
            with open(state_path, "rb") as fh:
                saved = pickle.load(fh)
        except Exception as exc:
            report["restore_failed"].append("<state file>: %s" % exc)
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
    for name, blob in saved["values"].items():
        try:
            ns[name] = pickle.loads(blob)
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
    os.makedirs(os.path.dirname(state_path) or ".", exist_ok=True)
    tmp = state_path + ".tmp"
    with open(tmp, "wb") as fh:
        pickle.dump(new, fh)
    os.replace(tmp, state_path)
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
