"""Architecture contracts: the engine never imports Qt; heavy libraries load lazily."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

WALK = r"""
import importlib, pkgutil, sys
import strived
bad = []
for m in pkgutil.walk_packages(strived.__path__, "strived."):
    if not m.name.endswith("__main__"):
        importlib.import_module(m.name)
qt = sorted(k for k in sys.modules if k.split(".")[0] in ("PySide6", "PyQt5", "PyQt6", "pyqtgraph", "app"))
print("QT", qt)
"""

LAZY = r"""
import sys
import strived.cli, strived.engine, strived.store, strived.rules, strived.evaluation.runner, strived.api
strived.cli.build_parser()
heavy = sorted(k for k in ("torch", "transformers", "openai", "hnswlib", "cv2", "ray", "xllamacpp", "PySide6")
               if k in sys.modules)
print("HEAVY", heavy)
"""


def _run(code: str) -> str:
    p = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_engine_never_imports_qt():
    out = _run(WALK)
    assert "QT []" in out, out
    for path in (REPO / "strived").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        for line in text.splitlines():
            s = line.strip()
            assert not (s.startswith(("import PySide6", "from PySide6", "import pyqtgraph", "from pyqtgraph",
                                      "from app", "import app"))), f"{path}: {s}"


def test_cli_start_imports_no_heavy_library():
    out = _run(LAZY)
    assert "HEAVY []" in out, out


def _project_import_graph() -> dict[str, set[str]]:
    """Module -> project modules it imports, counting imports inside functions (issue 35), not
    those under ``if TYPE_CHECKING:`` (annotations only)."""
    import ast

    mods = {}
    for pkg in ("strived", "app"):
        for p in (REPO / pkg).rglob("*.py"):
            name = ".".join(p.relative_to(REPO).with_suffix("").parts)
            mods[name.removesuffix(".__init__")] = p
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for m, p in mods.items():
        base = m if p.name == "__init__.py" else m.rsplit(".", 1)[0]
        tree = ast.parse(p.read_text(encoding="utf-8"))
        typing_only = {id(n) for b in ast.walk(tree) if isinstance(b, ast.If)
                       and getattr(b.test, "id", None) == "TYPE_CHECKING" for n in ast.walk(b)}
        for node in ast.walk(tree):
            if id(node) in typing_only:    # annotations only: never imported at run time
                continue
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = base.split(".")
                    tgt = ".".join(parts[:len(parts) - (node.level - 1)] + ([node.module] if node.module else []))
                else:
                    tgt = node.module or ""
                for a in node.names:   # `from pkg import mod` is an import of pkg.mod
                    edges[m].add(f"{tgt}.{a.name}" if f"{tgt}.{a.name}" in mods else tgt)
            elif isinstance(node, ast.Import):
                edges[m].update(a.name for a in node.names)
    return {m: {t for t in ts if t in mods and t != m} for m, ts in edges.items()}


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    x = stack.pop()
                    on.discard(x)
                    comp.append(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_the_cycle_finder_finds_a_cycle_through_a_function_level_import():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles_even_through_imports_inside_functions():
    """Issue 35: zero import cycles among the project's modules, imports inside functions
    included (they only hide a cycle from the import system, not from the reader)."""
    assert _cycles(_project_import_graph()) == []


# -- issue 35: the store owns every SQL statement
_SQL_START = ("SELECT", "INSERT", "UPDATE", "DELETE", "CREATE", "PRAGMA")
_EXECUTE = ("execute", "executemany", "executescript")
# Only strived/store/ may hold SQL (the LLM answer cache's own file included: store/answers.py).
_SQL_HOMES = ("strived/store/",)


def _sql_statements(source: str) -> list[tuple[int, str]]:
    """(line, text) of the SQL in ``source``: a string literal (plain or f-string) passed to an
    ``.execute``/``.executemany``/``.executescript`` call, or one that starts with an SQL verb in
    capitals (a statement built before it is run). Docstrings and UI text ("Select a folder") are
    not SQL."""
    import ast

    tree = ast.parse(source)
    found: dict[int, tuple[int, str]] = {}

    def text(node) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.JoinedStr):
            return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
        return None

    parts = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    for node in ast.walk(tree):
        if id(node) in parts:       # a piece of an f-string: the f-string is judged whole
            continue
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _EXECUTE:
            for arg in node.args[:1]:
                s = text(arg)
                if s is not None:
                    found[id(arg)] = (arg.lineno, s)
        s = text(node)
        if s is not None and s.lstrip().split(" ", 1)[0].rstrip("(") in _SQL_START:
            found.setdefault(id(node), (node.lineno, s))
    return sorted(found.values())


def test_the_sql_finder_finds_statements_not_ui_text():
    code = ('c.execute("SELECT 1")\n'
            'db.executemany(f"INSERT INTO {t} VALUES (?)", rows)\n'
            'sql = "DELETE FROM marks WHERE query=?"\n'
            'conn.executescript("vacuum")\n'
            'label = "Select a folder"\n'
            'tip = "Update the index: select videos to delete"\n'
            'pool.submit(work, "SELECTED")\n')
    assert [n for n, _ in _sql_statements(code)] == [1, 2, 3, 4]


def test_only_the_store_holds_sql_statements():
    """Issue 35: every SQL statement lives in ``strived/store/`` (behind `Library` and the store's
    modules): no other module of the engine or the app builds or runs one."""
    bad = []
    for pkg in ("strived", "app"):
        for p in sorted((REPO / pkg).rglob("*.py")):
            rel = p.relative_to(REPO).as_posix()
            if rel.startswith(_SQL_HOMES):
                continue
            bad += [f"{rel}:{line}: {s[:60]!r}" for line, s in _sql_statements(p.read_text(encoding="utf-8"))]
    assert bad == [], "SQL outside strived/store/:\n" + "\n".join(bad)


# -- issue 35: a project import inside a function only where it keeps a heavy library lazy
# Every module of the app and the engine.
_LAZY_SCOPE = ("app/", "strived/")
_LAZY_OUTSIDE: tuple[str, ...] = ()
#: what a `# lazy: loads X` may name: a library heavy enough to keep off a start-up path
_HEAVY = {"numpy", "PySide6", "pyqtgraph", "torch", "torchvision", "cv2", "transformers", "onnxruntime",
          "hnswlib", "openai", "ray", "pytesseract", "sentence_transformers", "matplotlib"}


def _lazy_scope_files() -> list[Path]:
    files = [p for d in _LAZY_SCOPE for p in (REPO / d).rglob("*.py")]
    return sorted(p for p in set(files) if not p.relative_to(REPO).as_posix().startswith(_LAZY_OUTSIDE))


def _unjustified_imports(source: str) -> list[tuple[int, str]]:
    """(line, text) of each import of a project module (``strived``, ``app``, relative) inside a
    function whose statement carries no ``# lazy: loads X`` naming a heavy library."""
    import ast
    import re

    lines = source.splitlines()
    out = {}
    for fn in ast.walk(ast.parse(source)):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.ImportFrom):
                project = node.level > 0 or (node.module or "").split(".")[0] in ("strived", "app")
            elif isinstance(node, ast.Import):
                project = any(a.name.split(".")[0] in ("strived", "app") for a in node.names)
            else:
                continue
            text = "\n".join(lines[node.lineno - 1:node.end_lineno])
            named = re.findall(r"# lazy: loads (\w+)", text)
            if project and not (named and all(n in _HEAVY for n in named)):
                out[node.lineno] = lines[node.lineno - 1].strip()
    return sorted(out.items())


def test_the_lazy_import_finder_finds_a_bare_import_inside_a_function():
    code = ("from .a import b\n"
            "def f():\n"
            "    from ..x import y\n"
            "    import strived.engine\n"
            "    from . import z  # lazy: loads numpy\n"
            "    from .w import (v,\n"
            "                    u)  # lazy: loads PySide6\n"
            "    from .q import r  # lazy: loads nothing\n"
            "    import json\n"
            "    def g():\n"
            "        from app.settings import AppSettings\n"
            "    return y\n")
    assert [n for n, _ in _unjustified_imports(code)] == [3, 4, 8, 11]


def test_project_imports_inside_functions_only_where_a_heavy_library_stays_lazy():
    """Issue 35: in every module of the app and the engine, a project import sits inside a
    function only with ``# lazy: loads X`` (X a heavy library it keeps off a start-up path: the CLI
    parser, a worker's start, the app's entry point and its facade `strived.api`); every other one
    is at the module's top."""
    bad = [f"{p.relative_to(REPO).as_posix()}:{line}: {s}" for p in _lazy_scope_files()
           for line, s in _unjustified_imports(p.read_text(encoding="utf-8"))]
    assert bad == [], "imports inside functions without `# lazy: loads X`:\n" + "\n".join(bad)


START_PATHS = r"""
import sys
import strived.cli
strived.cli.build_parser()            # every command module: `strived --help`, `strived events`
import strived.indexing.workers       # what a perception worker imports before its thread limits
import strived.indexing.text_process  # what the text-index process imports before its parent-death signal
import app.__main__, app.window_export
print("LOADED", sorted(m for m in ("numpy", "PySide6", "pyqtgraph") if m in sys.modules))
"""


def test_the_lazy_imports_keep_their_libraries_off_the_start_paths():
    """What the `# lazy: loads X` comments keep lazy is not loaded by the start paths they serve:
    numpy by the CLI's parser (every command module), by a perception worker before its thread
    limits are set and by the text-index process before its parent-death signal; PySide6 by the
    app's entry point before its self-test or window."""
    out = _run(START_PATHS)
    assert "LOADED []" in out, out
