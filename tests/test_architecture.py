"""The layout's promise: layers only look down, modules form no import cycle, the core imports no plugin, no
module patches the libraries it extends, and no module or parameter list outgrows what a reader can hold.

The order (lowest first) is written down in CONTRIBUTING.md; every import counts, at module level or inside a
function, relative or absolute, under `TYPE_CHECKING` too (a type-only cycle is still a cycle for the reader).
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# Where each installed package lives in the checkout (see package-dir in pyproject.toml).
PACKAGE_DIRS = {
    "shambench": REPO / "shambench",
    "shambench.adapters": REPO / "adapters",
    "shambench.detectors": REPO / "detectors",
    "shambench.leaderboard": REPO / "leaderboard",
}
# The core's layers, lowest first: a module may import its own layer and those below it.
LAYERS: tuple[tuple[str, ...], ...] = (
    (
        "shambench.controls",
        "shambench.errors",
        "shambench.memory",
        "shambench.paths",
        "shambench.schema",
        "shambench.secrets",
    ),
    (
        "shambench.fs",
        "shambench.io",
        "shambench.records",
        "shambench.registry",
        "shambench.provenance",
        "shambench.http",
        "shambench.sources",
        "shambench.sealing",
        "shambench.extras",
        "shambench.structured",
        "shambench.documented",
        "shambench.selection_fields",
    ),
    ("shambench.scoring",),
    ("shambench.data", "shambench.detection"),
    ("shambench.llm",),
    ("shambench.runs",),
    ("shambench.reporting",),
    ("shambench.leaderboard",),
    ("shambench.cli", "shambench.__main__"),
)
# Plugins sit beside the core: they may use any layer up to reporting, never the leaderboard or the CLI, and
# no core module imports them (the registries reach them lazily).
PLUGINS = ("shambench.adapters", "shambench.detectors", "shambench.data.providers")
PLUGIN_CEILING = "shambench.reporting"
# The package's face: `shambench/__init__.py` re-exports the public API from every layer.
FACADE = "shambench"
# Libraries extended only through the hooks they offer (subclasses, adapters, callbacks, settings), never by
# assigning to their modules or classes: such a patch reaches every other user of the library in the process,
# and outlives its scope whenever restoring it is skipped.
UNPATCHED = ("dspy",)


def imported_modules(source: str, package: str) -> set[str]:
    """Every module the source imports, anywhere (function-level imports too), as absolute names."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parent = parts[: len(parts) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def module_files() -> dict[str, Path]:
    """Every module of the installed package, by its dotted name."""
    found: dict[str, Path] = {}
    for package, folder in PACKAGE_DIRS.items():
        for path in folder.rglob("*.py"):
            parts = [*package.split("."), *path.relative_to(folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def import_graph() -> dict[str, set[str]]:
    """Each module's imports of other shambench modules (a `from pkg import name` counts as `pkg.name` when that
    is a module, else as `pkg`)."""
    modules = module_files()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets = set()
        for imported in imported_modules(path.read_text(encoding="utf-8"), package):
            while imported and imported not in modules:
                imported = imported.rpartition(".")[0]
            if imported and imported != name:
                targets.add(imported)
        graph[name] = targets
    return graph


def _within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def plugin_of(module: str) -> str | None:
    """The plugin package a module belongs to, or None for the core."""
    return next((p for p in PLUGINS if _within(module, p)), None)


def layer_of(module: str) -> int:
    """The index of the module's layer in LAYERS (plugins and the facade have none: ValueError)."""
    for index, members in enumerate(LAYERS):
        if any(_within(module, prefix) for prefix in members):
            return index
    raise ValueError(f"{module} is in no layer: add it to LAYERS in tests/test_architecture.py and CONTRIBUTING.md")


def violation(source: str, target: str) -> str | None:
    """Why `source` may not import `target`, or None when the import looks down (or sideways within a layer)."""
    if plugin_of(target) and not plugin_of(source):
        return "the core imports a plugin"
    if source == FACADE:
        return None
    if plugin_of(source):
        return None if plugin_of(target) or layer_of(target) <= layer_of(PLUGIN_CEILING) else "a plugin looks up"
    return "looks up" if layer_of(target) > layer_of(source) else None


def _root(node: ast.expr) -> str | None:
    """The name an attribute chain (`a.b.c`) starts from; None when it passes through a call or a subscript (an
    instance, not a module or class)."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def patched_attributes(source: str) -> list[str]:
    """The attributes the source assigns or deletes on an `UNPATCHED` library's modules or classes (`x.a = ...`,
    `setattr(x, "a", ...)`, `del x.a`), as `x.a` (`x` a name bound to the library, to something imported from
    it, or to an alias of either)."""
    tree = ast.parse(source)
    bound = set(UNPATCHED)  # also covers `dspy = import_dspy()`
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names if a.name.split(".")[0] in UNPATCHED)
        elif isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] in UNPATCHED:
            bound.update(a.asname or a.name for a in node.names)
    aliases = [n for n in ast.walk(tree) if isinstance(n, ast.Assign)]
    while True:  # `P = dspy.propose.GroundedProposer`, then `Q = P`: P and Q name the library's class too
        grown = {t.id for n in aliases if _root(n.value) in bound for t in n.targets if isinstance(t, ast.Name)} - bound
        if not grown:
            break
        bound |= grown
    found = []
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, (ast.Assign, ast.Delete)):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif (
            isinstance(node, ast.Call)
            and ast.unparse(node.func) in ("setattr", "delattr")
            and len(node.args) >= 2
            and _root(node.args[0]) in bound
        ):
            name = node.args[1].value if isinstance(node.args[1], ast.Constant) else "?"
            found.append(f"{ast.unparse(node.args[0])}.{name}")
        found += [ast.unparse(t) for t in targets if isinstance(t, ast.Attribute) and _root(t) in bound]
    return sorted(found)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import graph's strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_every_module_has_a_layer_or_is_a_plugin():
    unplaced = []
    for module in module_files():
        if module == FACADE or plugin_of(module):
            continue
        try:
            layer_of(module)
        except ValueError:
            unplaced.append(module)
    assert unplaced == []


def test_layers_only_look_down():
    graph = import_graph()
    wrong = {
        f"{source} -> {target}": why
        for source, targets in graph.items()
        for target in targets
        if (why := violation(source, target))
    }
    assert wrong == {}


def test_no_import_cycles():
    assert cycles(import_graph()) == []


def test_no_module_patches_dspy():
    patched = {
        name: found
        for name, path in module_files().items()
        if (found := patched_attributes(path.read_text(encoding="utf-8")))
    }
    assert patched == {}


def test_patches_are_seen_through_imports_and_aliases():
    replaced = (
        "def f(engine):\n"
        "    from dspy.propose.grounded_proposer import GroundedProposer as GP\n"
        "    original = GP.propose_instruction_for_predictor\n"
        "    GP.propose_instruction_for_predictor = lambda *a: original(*a)\n"
    )
    assert patched_attributes(replaced) == ["GP.propose_instruction_for_predictor"]
    aliased = "import dspy.teleprompt as tp\nM = tp.MIPROv2\nsetattr(M, 'compile', None)\ndel dspy.settings.lm\n"
    assert patched_attributes(aliased) == ["M.compile", "dspy.settings.lm"]
    # Instances, subclasses and the project's own objects are free to change.
    allowed = (
        "import dspy\nlm = dspy.LM('m')\nlm.kwargs['n'] = 1\ndspy.LM('m').cache = False\n"
        "class A(dspy.JSONAdapter):\n    flag = True\nA.flag = False\nself.dspy_version = 1\n"
    )
    assert patched_attributes(allowed) == []


def test_function_level_and_relative_imports_are_seen():
    source = "def f():\n    from shambench.detectors.prompted import make\n    from ..detectors import baselines\n"
    found = imported_modules(source, "shambench.reporting")
    assert "shambench.detectors.prompted" in found
    assert "shambench.detectors.baselines" in found
    assert imported_modules("import shambench.adapters.fava as f\n", "shambench") == {"shambench.adapters.fava"}


def test_the_rules_catch_what_they_forbid():
    assert violation("shambench.scoring.scorer", "shambench.runs.scoring") == "looks up"
    assert violation("shambench.runs.scoring", "shambench.scoring.scorer") is None
    assert violation("shambench.runs.scoring", "shambench.detectors.prompted") == "the core imports a plugin"
    assert violation("shambench.detectors.prompted", "shambench.cli.exits") == "a plugin looks up"
    assert violation("shambench.detectors.prompted", "shambench.llm.client") is None
    assert cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


# --- sizes a reader can hold in mind ------------------------------------------------------------------------------

MAX_MODULE_LINES = 700
"""Longest module of the package (split a longer one along its seams)."""
MAX_PARAMETERS = 12
"""Most named parameters of a function (self and cls aside; *args and **kwargs are one way in each, not counted): a
longer list wants a model of its own (a `RunSpec` section, an options TypedDict)."""


def parameter_count(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """The named parameters of a function definition, self and cls aside."""
    args = node.args
    return sum(a.arg not in ("self", "cls") for a in args.posonlyargs + args.args + args.kwonlyargs)


def oversized(source: str, where: str) -> list[str]:
    """What in a module's source is over the limits: its length, and each function with too many parameters."""
    found = []
    if (lines := len(source.splitlines())) > MAX_MODULE_LINES:
        found.append(f"{where}: {lines} lines")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and parameter_count(node) > MAX_PARAMETERS:
            found.append(f"{where}:{node.lineno} {node.name}: {parameter_count(node)} parameters")
    return found


def test_no_module_too_long_and_no_function_with_too_many_parameters():
    found = [f for name, path in module_files().items() for f in oversized(path.read_text(encoding="utf-8"), name)]
    assert found == []


def test_the_size_rules_catch_what_they_forbid():
    many = "def f(" + ", ".join(f"a{i}" for i in range(13)) + ", *rest, **more): pass\n"
    method = "class C:\n    def m(self, " + ", ".join(f"a{i}" for i in range(12)) + ", **kw): pass\n"
    assert oversized(many, "m") == ["m:1 f: 13 parameters"]
    assert oversized(method, "m") == []  # self aside: 12
    assert oversized("x = 1\n" * 701, "m") == ["m: 701 lines"]
