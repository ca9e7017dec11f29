"""The package is laid out by stage and data flows one way through it.

Every import of a ``whileai_datasets`` module is read from the source (lazy
imports inside functions and ``TYPE_CHECKING`` blocks included), and each must
point at the importer's own stage or an earlier one. docs/layout.md ("How the code
is laid out") names the same order.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import whileai_datasets
import whileai_datasets.builders

#: Stages in the order data flows; a module may import its own stage or an earlier one.
STAGES = (
    ("base", ("whileai_datasets.errors", "whileai_datasets._typing", "whileai_datasets._options",
              "whileai_datasets.option_names", "whileai_datasets._gc",
              "whileai_datasets._version", "whileai_datasets._files", "whileai_datasets._storage",
              "whileai_datasets._compat",
              "whileai_datasets.data", "whileai_datasets.templates")),
    ("rows", ("whileai_datasets.rows",)),
    ("reading", ("whileai_datasets.reading",)),
    ("sessions", ("whileai_datasets.sessions",)),
    ("builders", ("whileai_datasets.builders",)),
    ("columnar", ("whileai_datasets.columnar",)),
    ("privacy", ("whileai_datasets.privacy",)),
    ("chat_template", ("whileai_datasets.chat_template",)),
    ("tokenize", ("whileai_datasets.tokenize",)),
    ("transforms", ("whileai_datasets.transforms",)),
    ("hub", ("whileai_datasets.hub",)),
    ("shaping", ("whileai_datasets.shaping",)),
    ("ray_engine", ("whileai_datasets.ray_engine",)),
    ("export", ("whileai_datasets.export",)),
    ("auditing", ("whileai_datasets.auditing",)),
    ("front door", ("whileai_datasets",)),
    ("cli", ("whileai_datasets.cli",)),
)
#: chat_template's sub-rooms, lowest first; the room's own modules (``inspect``, ``template``) sit on top.
CHAT_TEMPLATE_ROOMS = ("sandbox", "rendering", "analysis", "patching", "masks")
#: The most internal floors (the longest chain of imports between a room's own modules) a room may have.
MOST_FLOORS = 6
#: The most modules (``__init__`` aside) one room may hold before it needs splitting.
MOST_MODULES = 14
#: The tests folder of a room whose own name would hide a standard module on pytest's path (``tokenize``).
TESTS_FOLDER = {"tokenize": "tokenizing"}
#: The ecosystem's own short names; any other alias of one or two letters is refused.
ECOSYSTEM_ALIASES = {"pa", "pc", "np", "pq", "pds", "ds"}


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    roots = [("whileai_datasets", Path(whileai_datasets.__file__).parent),
             ("whileai_datasets.builders", Path(whileai_datasets.builders.__file__).parent)]
    for prefix, root in roots:
        for path in sorted(root.rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            name = ".".join([prefix, *parts])
            if name.startswith("whileai_datasets.builders") and prefix == "whileai_datasets":
                continue  # a stale copy under the package folder; the mapped folder is the real one
            found[name] = path
    return found


MODULES = _modules()


def _stage(module: str) -> int:
    best = (-1, -1)  # (length of the matching prefix, stage index)
    for index, (_, prefixes) in enumerate(STAGES):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best[0]:
                best = (len(prefix), index)
    assert best[1] >= 0, f"{module} belongs to no stage: add it to STAGES and to docs/layout.md"
    return best[1]


def _resolve(name: str) -> str:
    """The module an imported dotted name lives in (``a.b.func`` -> ``a.b``)."""
    while name not in MODULES and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def _imports(path: Path) -> list[tuple[int, str, str | None]]:
    """(line, imported module, alias) for every whileai_datasets import in a file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name, a.asname) for a in node.names if a.name.startswith("whileai_datasets")]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("whileai_datasets"):
            found += [(node.lineno, _resolve(f"{node.module}.{a.name}"), a.asname) for a in node.names]
    return found


def _graph() -> dict[str, set[str]]:
    return {module: {target for _, target, _ in _imports(path) if target != module} for module, path in MODULES.items()}


def test_every_module_is_in_a_stage() -> None:
    for module in MODULES:
        _stage(module)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_point_to_the_same_or_an_earlier_stage(module: str) -> None:
    here = _stage(module)
    late = [f"line {line}: {target} ({STAGES[_stage(target)][0]})" for line, target, _ in _imports(MODULES[module])
            if _stage(target) > here]
    assert late == [], f"{module} ({STAGES[here][0]}) imports a later stage: {late}"


def test_no_import_circles() -> None:
    graph = _graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    # a package front door importing its own submodules is not a circle unless they import it back
    assert circles == []


def test_no_one_or_two_letter_module_aliases() -> None:
    short = re.compile(r"^_?[A-Za-z]{1,2}$")
    found = []
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                found += [f"{module} line {node.lineno}: {a.name} as {a.asname}" for a in node.names
                          if a.asname and short.match(a.asname) and a.asname not in ECOSYSTEM_ALIASES]
    assert found == []


def test_stage_order_is_the_one_the_docs_describe() -> None:
    page = Path(__file__).resolve().parents[1] / "docs" / "layout.md"
    section = page.read_text().split("| folder | stage |", 1)[1].split("\n\n", 1)[0]
    folders = re.findall(r"^\| `([a-z_]+)/` \|", section, flags=re.MULTILINE)
    expected = [name for name, _ in STAGES if name not in ("base", "front door")]
    assert folders == expected


def _room(module: str) -> str:
    """The package a module belongs to (a package's ``__init__`` belongs to the package itself)."""
    path = MODULES[module]
    return module if path.name == "__init__.py" else module.rsplit(".", 1)[0]


def _chat_template_floor(module: str) -> int:
    parts = module.split(".")
    if parts[1] != "chat_template":
        raise ValueError(module)
    if len(parts) > 3 and parts[2] in CHAT_TEMPLATE_ROOMS:
        return CHAT_TEMPLATE_ROOMS.index(parts[2])
    return len(CHAT_TEMPLATE_ROOMS)  # the room's own modules: inspect, template, __init__


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.startswith("whileai_datasets.chat_template.")))
def test_chat_template_sub_rooms_import_only_the_ones_below(module: str) -> None:
    here = _chat_template_floor(module)
    late = [f"line {line}: {target}" for line, target, _ in _imports(MODULES[module])
            if target.startswith("whileai_datasets.chat_template.") and _chat_template_floor(target) > here]
    assert late == [], f"{module} imports a higher chat_template room: {late}"


def test_the_kernels_import_no_transform_and_tokenize_no_export_or_hub() -> None:
    rules = {"whileai_datasets.columnar": ("whileai_datasets.transforms", "whileai_datasets.tokenize"),
             "whileai_datasets.tokenize": ("whileai_datasets.export", "whileai_datasets.hub", "whileai_datasets.transforms")}
    found = [f"{module} line {line}: {target}" for module, path in MODULES.items() for room, banned in rules.items()
             if module.startswith(room) for line, target, _ in _imports(path) if target.startswith(banned)]
    assert found == []


def test_no_room_holds_both_public_modules_and_private_kernels() -> None:
    """The top-level package is the exception: its ``_private`` modules are the base every stage stands on."""
    rooms: dict[str, set[bool]] = {}
    for module, path in MODULES.items():
        if path.name != "__init__.py":
            rooms.setdefault(_room(module), set()).add(module.rsplit(".", 1)[1].startswith("_"))
    mixed = sorted(room for room, kinds in rooms.items() if len(kinds) > 1 and room != "whileai_datasets")
    assert mixed == []


def _floors(room: str) -> int:
    members = {m for m in MODULES if _room(m) == room and MODULES[m].name != "__init__.py"}
    graph = {m: {t for _, t, _ in _imports(MODULES[m]) if t in members and t != m} for m in members}
    depth: dict[str, int] = {}

    def floor(module: str) -> int:
        if module not in depth:
            depth[module] = 1 + max((floor(t) for t in graph[module]), default=0)
        return depth[module]

    return max((floor(m) for m in members), default=0)


@pytest.mark.parametrize("room", sorted({_room(m) for m in MODULES} - {"whileai_datasets"}))
def test_no_room_is_deeper_than_six_floors(room: str) -> None:
    assert _floors(room) <= MOST_FLOORS, f"{room} has {_floors(room)} internal floors: split it into sub-rooms"


def test_every_room_lists_its_public_names() -> None:
    missing = []
    for module, path in MODULES.items():
        if path.name == "__init__.py":
            tree = ast.parse(path.read_text())
            if not any(isinstance(node, (ast.Assign, ast.AnnAssign)) and "__all__" in ast.unparse(node).split("=")[0]
                       for node in tree.body):
                missing.append(module)
    assert missing == []


def test_every_package_folder_is_listed_for_the_wheel() -> None:
    """A room missing from pyproject's ``packages`` is left out of the wheel and fails only once installed."""
    import tomllib

    listed = set(tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
                 ["tool"]["setuptools"]["packages"])
    packages = {module for module, path in MODULES.items() if path.name == "__init__.py"}
    assert sorted(packages - listed) == []


def _private_crossings(module: str) -> list[str]:
    """Each ``_name`` this module takes from a module of another room (imported by name or read as an attribute)."""
    here = _room(module)
    tree = ast.parse(MODULES[module].read_text())
    imported: dict[str, str] = {}  # local name -> module
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("whileai_datasets"):
            for alias in node.names:
                if f"{node.module}.{alias.name}" in MODULES:
                    imported[alias.asname or alias.name] = f"{node.module}.{alias.name}"
                elif _is_private(alias.name) and node.module in MODULES and _room(node.module) != here:
                    found.append(f"line {node.lineno}: {node.module}.{alias.name}")
        elif isinstance(node, ast.Import):
            imported.update({a.asname: a.name for a in node.names if a.asname and a.name in MODULES})
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in imported
                and _is_private(node.attr) and _home(imported[node.value.id]) != here):
            found.append(f"line {node.lineno}: {imported[node.value.id]}.{node.attr}")
    return found


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _home(module: str) -> str:
    """The room whose private names a module's attributes are: a package's own room, else the module's room."""
    return module if MODULES[module].name == "__init__.py" else _room(module)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_reads_another_rooms_private_names(module: str) -> None:
    """A ``_name`` is its room's own; what another room needs gets a public name (``_private`` modules such as
    ``columnar._arrow`` are the package's shared kernels: their public names are for every room)."""
    assert _private_crossings(module) == [], f"{module} reads another room's private names: give them public names"


def test_no_room_holds_more_than_fourteen_modules() -> None:
    sizes: dict[str, int] = {}
    for module, path in MODULES.items():
        if path.name != "__init__.py":
            sizes[_room(module)] = sizes.get(_room(module), 0) + 1
    assert {room: n for room, n in sizes.items() if n > MOST_MODULES} == {}, "split the room into sub-rooms"


def test_every_room_has_its_tests_folder() -> None:
    """Each folder of docs/layout.md's table has one under tests/ (its sub-rooms' tests live in it)."""
    tests = Path(__file__).resolve().parent
    rooms = [name for name, _ in STAGES if name not in ("base", "front door")]
    missing = [room for room in rooms if not (tests / TESTS_FOLDER.get(room, room) / "__init__.py").is_file()]
    assert missing == []


def test_shared_test_helpers_live_in_support() -> None:
    """The top of tests/ holds conftest.py and the tests of the package as a whole; helpers go in tests/support/."""
    tests = Path(__file__).resolve().parent
    loose = sorted(p.name for p in tests.glob("*.py") if p.name != "conftest.py" and not p.name.startswith("test_"))
    assert loose == [] and (tests / "support" / "__init__.py").is_file()
