"""A static screen of a utility file's source, run before any of its code (hardening issue, item 8).

Restricted builtins alone do not confine Python code: `().__class__.__mro__[1].__subclasses__()`
reaches every class the daemon has loaded (os._wrap_close, hence os.system), and a traceback's
`tb_frame.f_globals` or a generator's `gi_frame` reaches the daemon's modules. A bare `except:`,
or a class whose `__exit__` returns True, swallows the watchdog's BudgetExceeded. Utility
functions are arithmetic on a job's numbers and strings, so the screen refuses every construct
those escapes need, and names the line:

* any attribute or name that starts with an underscore and ends with two (`__class__`,
  `__globals__`, `__builtins__`, ...), and the attributes of frames, tracebacks, generators,
  coroutines and code objects (`tb_frame`, `f_globals`, `gi_frame`, `co_code`, ...);
* `getattr`-style string access is closed by the loader's safe builtins (no getattr, hasattr,
  vars, dir, type, object);
* class definitions, `with` and `match` statements, decorators, `global` and `nonlocal`,
  `async` code, and `yield` (a generator's frame is the way out);
* `finally` blocks (a `return` or `continue` there discards any exception);
* exception handlers other than `except NAME` or `except (NAME, ...)` with NAME an Exception
  class the loader provides: so no handler can catch BudgetExceeded (a BaseException).
"""

from __future__ import annotations

import ast
from collections.abc import Collection
from pathlib import Path

from cobaltlite.policy.utility import PolicyError

_INTROSPECTION_PREFIXES = ("tb_", "f_", "gi_", "cr_", "ag_", "co_")
_FORBIDDEN_NODES: dict[type[ast.AST], str] = {
    ast.ClassDef: "class definitions",
    ast.With: "with statements",
    ast.AsyncWith: "async code",
    ast.AsyncFunctionDef: "async code",
    ast.AsyncFor: "async code",
    ast.Await: "async code",
    ast.Yield: "generators (yield)",
    ast.YieldFrom: "generators (yield)",
    ast.Match: "match statements",  # a class pattern reads attributes by name
    ast.Global: "global statements",
    ast.Nonlocal: "nonlocal statements",
    ast.Import: "imports (math is provided)",
    ast.ImportFrom: "imports (math is provided)",
}


def _is_dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


def _refuse(path: Path, node: ast.AST, what: str) -> PolicyError:
    line = getattr(node, "lineno", 0)
    return PolicyError(f"utility file {path}:{line}: {what} are not allowed in utility "
                       "functions (docs/policy-guide.md, What a utility file may contain)")


def screen_source(tree: ast.AST, path: Path, exception_names: Collection[str]) -> None:
    """Raise PolicyError naming file and line at the first construct a utility file may not use."""
    for node in ast.walk(tree):
        forbidden = _FORBIDDEN_NODES.get(type(node))
        if forbidden:
            raise _refuse(path, node, forbidden)
        if isinstance(node, ast.Attribute) and (
                _is_dunder(node.attr) or node.attr.startswith(_INTROSPECTION_PREFIXES)):
            raise _refuse(path, node, f"attributes such as {node.attr!r}")
        if isinstance(node, ast.Name) and _is_dunder(node.id):
            raise _refuse(path, node, f"names such as {node.id!r}")
        if isinstance(node, ast.FunctionDef) and (node.decorator_list or _is_dunder(node.name)):
            raise _refuse(path, node, "decorators and special methods")
        if isinstance(node, ast.Try | ast.TryStar) and node.finalbody:
            # A `return` or `continue` in a finally block discards the watchdog's interrupt.
            raise _refuse(path, node.finalbody[0], "finally blocks")
        if isinstance(node, ast.ExceptHandler):
            caught = node.type
            names = caught.elts if isinstance(caught, ast.Tuple) else [caught]
            if caught is None or not all(
                    isinstance(n, ast.Name) and n.id in exception_names for n in names):
                raise _refuse(path, node, "handlers other than `except` with the provided "
                              "Exception classes")
