"""The package's layers: every import statement in ``synth/`` (at any level, function bodies and
``TYPE_CHECKING`` blocks included) points to the module's own layer or one below, and the
import graph has no circle. The wheel's package list covers every folder."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "synth"

#: Bottom to top. A module may import its own layer and those listed before it.
LAYERS = ["_kernels", "base", "privacy", "data", "models", "engines", "report", "api"]
BASE = {"synth.errors", "synth._io"}
API = {"synth", "synth.__main__", "synth.synthesizer"}


def layer_of(module: str) -> str:
    if module in BASE:
        return "base"
    if module in API:
        return "api"
    parts = module.split(".")
    if len(parts) > 2 or (len(parts) == 2 and (PACKAGE / parts[1]).is_dir()):
        return parts[1]
    raise AssertionError(f"{module} is in no layer: put it in a layer folder (or add it to BASE or API)")


def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(REPO).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The synth modules ``module`` imports, resolved to the deepest known module."""
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(max(node.level - 1, 0)):
                base = base.rsplit(".", 1)[0]
            target = (f"{base}.{node.module}" if node.module else base) if node.level else (node.module or "")
            names = [target] + [f"{target}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            while name and name not in known and "." in name:
                name = name.rsplit(".", 1)[0]
            if name in known and name != module:
                out.add(name)
    return out


def graph() -> dict[str, set[str]]:
    known = modules()
    return {module: imports(module, path, known) for module, path in known.items()}


def layer_violations(edges: dict[str, set[str]]) -> list[str]:
    """Every import that reaches up a layer."""
    wrong = []
    for module, targets in edges.items():
        if module == "synth":
            continue  # the public API's lazy table names every layer (it imports nothing at load time)
        rank = LAYERS.index(layer_of(module))
        for target in sorted(targets - {"synth"}):
            if LAYERS.index(layer_of(target)) > rank:
                wrong.append(f"{module} ({layer_of(module)}) imports {target} ({layer_of(target)})")
    return wrong


def find_circle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import circle (as a path that returns to its start), or None. A package's
    ``__init__`` re-exporting its own modules is left out, as the shared tool does."""
    packages = {m for m, p in modules().items() if p.name == "__init__.py"}
    edges = {m: ts - packages for m, ts in edges.items() if m not in packages}
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_every_module_is_in_a_layer():
    for module in modules():
        assert layer_of(module) in LAYERS


def test_each_layer_imports_only_itself_and_the_layers_below():
    wrong = layer_violations(graph())
    assert not wrong, "imports reaching up a layer:\n" + "\n".join(wrong)


def test_the_import_graph_has_no_circle():
    assert find_circle(graph()) is None


def test_the_checks_catch_a_bad_import():
    """Both checks can fail: a data module importing an engine reaches up, and two engine
    modules importing each other make a circle."""
    edges = graph()
    edges["synth.data.schema"] = edges["synth.data.schema"] | {"synth.engines.mwem"}
    assert layer_violations(edges) == ["synth.data.schema (data) imports synth.engines.mwem (engines)"]
    edges = graph()
    edges["synth.engines.pmw_base"] = edges["synth.engines.pmw_base"] | {"synth.engines.pmw"}
    assert find_circle(edges) in (["synth.engines.pmw", "synth.engines.pmw_base", "synth.engines.pmw"],
                                  ["synth.engines.pmw_base", "synth.engines.pmw", "synth.engines.pmw_base"])


def test_the_wheel_lists_every_package_and_no_top_level_cli():
    """The wheel ships every subpackage, and the CLI under the project's name (``synth_cli``),
    never as a top-level ``cli`` that would shadow another project's."""
    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    listed = set(re.findall(r'"(synth[\w.]*)"', re.search(r"^packages = \[(.*?)\]", text, re.S | re.M).group(1)))
    folders = {".".join(p.parent.relative_to(REPO).parts) for p in PACKAGE.rglob("__init__.py")}
    assert listed - {"synth_cli"} == folders and "synth_cli" in listed
    assert re.search(r'^package-dir = \{ "synth_cli" = "cli" \}$', text, re.M)
    assert re.search(r'^synth = "synth_cli.main:main"$', text, re.M)


def test_every_public_name_resolves_to_its_layer():
    """``synth/__init__``'s names (today's and the engines' configs) load from their modules."""
    import synth

    for name in synth.__all__:
        value = getattr(synth, name)
        if name != "__version__":
            assert value.__module__.startswith("synth."), (name, value.__module__)
    schema = synth.Schema.load(synth.bundled("demo").schema)
    config = synth.MWEMConfig(rounds=2)
    engine = synth.make_engine(config, schema, synth.Workload.default(schema))
    assert engine.config is config and engine.name == "mwem"
