"""The house's layers, read from the code (ast, nothing executed): no import circles, and the
arrows DESIGN.md allows — cir_core imports nothing of the project outside itself, db imports the
library only, training the library only, nothing imports the app's UI but app.py, and studies/
(experiments, probes, oracles) sits above everything: it may import the product, and nothing in
the product (cir_core, ui, db, app.py, the trainers) imports a study."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("cir_core", "ui", "db", "training", "bench", "studies")
# package -> the project packages it may import (besides itself)
ALLOWED = {"cir_core": set(), "db": {"cir_core"}, "training": {"cir_core"}, "ui": {"cir_core", "db"},
           "bench": {"cir_core", "db", "training"}, "app": {"ui", "db", "cir_core"},
           "studies": {"cir_core", "db", "training"}}
PRODUCT = ("cir_core", "ui", "db", "training", "app")  # what ships: none of it may import a study


def modules() -> dict[str, Path]:
    """Every project module by dotted name (a package by its __init__)."""
    out = {"app": ROOT / "app.py"}
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            rel = path.relative_to(ROOT).with_suffix("")
            parts = list(rel.parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


def dynamic_imports(node: ast.Call, name: str, is_pkg: bool, known: set[str]) -> list[str]:
    """What an `importlib.import_module(...)` call imports: a module named by a constant, or, for an
    f-string on `__name__` / `__package__` (a package importing each of its modules by name, as the
    method, benchmark and trainer registries do), every module of that package."""
    func = node.func
    called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    if called != "import_module" or not node.args:
        return []
    arg = node.args[0]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return [arg.value]
    head = arg.values[0] if isinstance(arg, ast.JoinedStr) and arg.values else None
    if isinstance(head, ast.FormattedValue) and getattr(head.value, "id", "") in ("__name__", "__package__"):
        pkg = name if is_pkg or head.value.id == "__name__" else name.rpartition(".")[0]
        return [m for m in known if m.rpartition(".")[0] == pkg]
    return []


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The project modules `name` imports anywhere in its file (lazy imports and
    `importlib.import_module` included)."""
    is_pkg = path.name == "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            targets = dynamic_imports(node, name, is_pkg, known)
        elif isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = name.split(".") if is_pkg else name.split(".")[:-1]
                pkg = pkg[:len(pkg) - (node.level - 1)]
                base = ".".join(pkg + ([base] if base else []))
            # `from X import y`: y itself when it is a module, else X
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in known:  # `import a.b.c` names a.b.c; fall back to its package
                t = t.rpartition(".")[0]
            if t and t != name:
                found.add(t)
    return found


def graph() -> dict[str, set[str]]:
    mods = modules()
    return {m: imports(m, p, set(mods)) for m, p in mods.items()}


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in g.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def test_the_graph_sees_the_project():
    g = graph()
    assert len(g) > 100 and "cir_core.engine.core" in g and "cir_core.methods" in g["cir_core.engine.core"]
    assert "db.sqlite" in g["db.migrate"] and "ui.settings" in g["app"]


def test_no_import_cycles():
    assert cycles(graph()) == []


def test_the_graph_follows_import_module():
    """The registries import their packages' modules by name: the graph sees those arrows."""
    g = graph()
    assert {"cir_core.methods.pact", "cir_core.methods.lincir"} <= g["cir_core.methods"]
    assert {"cir_core.benchmarks.cirr", "cir_core.benchmarks.world"} <= g["cir_core.benchmarks"]


def test_a_cycle_would_be_found():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_layers():
    bad = []
    for mod, deps in graph().items():
        top = mod.split(".")[0]
        for d in deps:
            other = d.split(".")[0]
            if other != top and other not in ALLOWED[top]:
                bad.append(f"{mod} -> {d}")
    assert bad == []


def study_users(g: dict[str, set[str]]) -> list[str]:
    """'module -> study' for every arrow from the product into studies/."""
    return sorted(f"{m} -> {d}" for m, deps in g.items() if m.split(".")[0] in PRODUCT
                  for d in deps if d.split(".")[0] == "studies")


def test_nothing_in_the_product_imports_a_study():
    """Issue 43: the lab lives in studies/, above the product. A trainer, the library, the UI, the
    annotation store or the app reaching into a study (even lazily) fails here, by name."""
    g = graph()
    assert {"studies.progression_failures", "studies.progression_oracle", "studies.chord_analysis"} <= set(g)
    assert "training.train_pace" in g and "cir_core.eval.loop" in g  # the graph sees both sides
    assert study_users(g) == []


def test_an_arrow_into_a_study_would_be_found():
    g = {"training.train_pace": {"studies.pace_label_audit"}, "cir_core.eval.cli": {"studies.chord_analysis"},
         "ui.compare": {"cir_core.engine"}, "app": {"studies"}, "studies.val_seeds": {"training.loop"},
         "bench.bench_topk": {"cir_core.search"}}
    assert study_users(g) == ["app -> studies", "cir_core.eval.cli -> studies.chord_analysis",
                              "training.train_pace -> studies.pace_label_audit"]


def test_nothing_but_the_app_imports_the_ui():
    users = {m for m, deps in graph().items() if any(d.split(".")[0] == "ui" for d in deps)}
    assert {m.split(".")[0] for m in users} <= {"ui", "app"}


def test_no_module_imports_a_private_name_of_another():
    mods = modules()
    bad = []
    for name, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").split(".")[0] in
                                                     {*PACKAGES, "app"}):
                bad += [f"{name}: {a.name}" for a in node.names
                        if a.name.startswith("_") and not a.name.startswith("__")]
    assert bad == []


def rooms(g: dict[str, set[str]], package: str = "cir_core") -> dict[str, set[str]]:
    """`package`'s graph by its top-level entries (`cir_core.hub` for every module under it), as
    `farm-studio look --place cir_core` draws them: a circle here is an arrow running back up."""
    def room(m: str) -> str | None:
        parts = m.split(".")
        return ".".join(parts[:2]) if parts[0] == package and len(parts) > 1 else None

    out: dict[str, set[str]] = {}
    for mod, deps in g.items():
        r = room(mod)
        if r is not None:
            out.setdefault(r, set()).update(d for d in map(room, deps) if d and d != r)
    return out


def test_no_arrow_runs_back_up_between_cir_cores_rooms():
    """Files may form no circle, and neither may cir_core's folders: the backbone loader pins Hub
    revisions through storage.repo (below it), not the hub package that builds gallery indexes
    with a backbone (above it); the metrics sit below the benchmarks that the eval loop runs."""
    assert cycles(rooms(graph())) == []
    assert cycles(rooms({"cir_core.a.x": {"cir_core.b.y"}, "cir_core.b.z": {"cir_core.a.w"}})) == \
        [["cir_core.a", "cir_core.b"]]


ENV_READERS = {"cir_core/env.py", "cir_core/settings.py", "ui/settings.py"}


def environ_reads(path: Path) -> list[int]:
    """Lines of `path` that read the process environment: os.environ[...] / .get / .copy /
    passed along, os.getenv; an assignment into it or `setdefault` (a process default) is no read."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    writes = {id(t) for node in ast.walk(tree) if isinstance(node, ast.Assign) for t in node.targets}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "getenv":
            out.append(node.lineno)
        elif isinstance(node, ast.Attribute) and node.attr == "environ":
            out.append(node.lineno)
    for node in ast.walk(tree):  # forgive the writes and setdefault
        if isinstance(node, ast.Subscript) and id(node) in writes and isinstance(node.value, ast.Attribute) \
                and node.value.attr == "environ":
            out.remove(node.lineno)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "setdefault" \
                and isinstance(node.func.value, ast.Attribute) and node.func.value.attr == "environ":
            out.remove(node.lineno)
    return sorted(out)


def test_the_environment_is_read_in_the_settings_only():
    """Every environment variable goes through cir_core.env (declared there, with what it does) or
    the settings modules, never read deep in the library (issue 43)."""
    found = {}
    for path in modules().values():
        rel = str(path.relative_to(ROOT))
        if rel in ENV_READERS or rel.startswith("bench/"):
            continue
        lines = environ_reads(path)
        if lines:
            found[rel] = lines
    assert found == {}


def test_the_environment_check_sees_a_read(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("import os\nos.environ['A'] = '1'\nos.environ.setdefault('B', '2')\nx = os.environ.get('C')\n"
                 "y = os.getenv('D')\n")
    assert environ_reads(f) == [4, 5]
