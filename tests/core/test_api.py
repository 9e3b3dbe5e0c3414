"""The app's facade (``strived/api.py``): every name it lists resolves to the engine's own object,
its typed imports and its lookup table agree, importing it loads no engine module, and a name
replaced in its owning module is what the facade then gives."""

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import strived.api as api

REPO = Path(__file__).resolve().parents[2]


def _typed_imports() -> dict[str, tuple[str, str]]:
    """name -> (module, attribute) of the facade's ``if TYPE_CHECKING:`` imports."""
    tree = ast.parse((REPO / "strived" / "api.py").read_text())
    out = {}
    for node in tree.body:
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
            for imp in ast.walk(node):
                if isinstance(imp, ast.ImportFrom):
                    for a in imp.names:
                        out[a.asname or a.name] = (f"strived.{imp.module}", a.name)
    return out


def test_every_listed_name_is_the_engines_own_object():
    typed = _typed_imports()
    assert set(typed) == set(api._REEXPORTS), "the typed imports and the lookup table differ"
    functions = {"__version__", "open_library", "find_model_file", "search", "explain",
                 "scorer_for", "camera_groups", "camera_group", "set_camera_group",
                 "reperceive_note", "split_camera_group", "merge_camera_groups"}
    assert set(api.__all__) == set(api._REEXPORTS) | functions
    for name, (module, attr) in typed.items():
        assert getattr(api, name) is getattr(importlib.import_module(module), attr), name
    assert sorted(dir(api)) == sorted(api.__all__)


def test_an_unknown_name_is_an_attribute_error():
    try:
        api.no_such_name  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("an unknown name resolved")


def test_importing_the_facade_loads_no_engine_module():
    code = ("import sys, strived.api; "
            "print(sorted(k for k in sys.modules if k.startswith('strived')))")
    p = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    loaded = set(eval(p.stdout))
    assert loaded <= {"strived", "strived.api", "strived.offline"}, loaded


def test_a_name_replaced_in_its_module_is_what_the_facade_gives(monkeypatch):
    from strived import engine
    from strived.perception import detect_nanodet

    monkeypatch.setattr(detect_nanodet, "find_model_file", lambda name: Path("/x") / name)
    assert api.find_model_file("m.onnx") == Path("/x/m.onnx")
    monkeypatch.setattr(engine, "search", lambda library, query, **kw: ("searched", query, kw))
    assert api.search(None, "q", top_k=3) == ("searched", "q", {"top_k": 3})
    monkeypatch.setattr(detect_nanodet, "DetectorError", KeyError)
    assert api.DetectorError is KeyError
