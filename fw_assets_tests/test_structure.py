"""The package's structure, read from its source: where each asset lives, what its code version
covers, and which modules may import which. Each rule here is what the next step folder copies."""

import ast
import importlib
from functools import cache
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import dagster as dg
import pytest

import fw_assets
from fw_assets.definitions import defs
from fw_assets.lib.sql import sql_dir
from fw_assets.lib.versions import code_version
from fw_assets.sampling_policy import SEED_POLICY
from fw_assets_tests.support.scheduling import LONGEST_FIRST
from fw_assets_tests.support.source_imports import load_time_imports, parents

PACKAGE = Path(fw_assets.__file__).parent
STATEMENTS = {path.stem for path in sql_dir().glob("*.sql")}

# Layers, lowest first: a module imports only from its own layer or below. Step folders (one per
# part of the chain, each holding its steps' assets) form the step layer; what is not listed (a new
# step folder) is one too.
LAYERS = (
    ("settings", "sampling_policy", "paths"),  # the project's facts: settings, the policy, every path
    ("lib",),  # tools with no domain: publishing, slots, disk, SQL loading, code versions, ...
    ("formats",),  # files one step writes and another reads
    ("synthetic",),  # generated FineWeb-Edu-shaped dumps, for the demo, tests and benchmarks
    ("partitions", "resources", "jobs", "contracts", "run_health", "crawl_order"),  # Dagster plumbing
    (),  # the step folders: bucketing, dedup, tokenizing, probe, mixtures
    ("automation", "definitions", "demo", "deploy", "backfill", "verify"),  # entry points
)
STEP_LAYER = 5
# Modules that must never import Dagster: plain logic, called by tests, benchmarks and workers.
WITHOUT_DAGSTER = ("settings", "sampling_policy", "paths", "lib", "formats", "synthetic")
# Each step's work, apart from Dagster so that tests and benchmarks call it directly.
STEP_WORK = (
    "fw_assets.bucketing.sample_and_bucket", "fw_assets.tokenizing.tokenize_buckets", "fw_assets.probe.scoring"
)


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


@cache
def tree(module: str) -> ast.Module:
    return ast.parse(modules()[module].read_text())


def runtime_nodes(node: ast.AST):
    """Every node under `node` but those of `if TYPE_CHECKING:` blocks (imports for annotations
    only, never run)."""
    yield node
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and ast.unparse(child.test).endswith("TYPE_CHECKING"):
            for branch in child.orelse:
                yield from runtime_nodes(branch)
        else:
            yield from runtime_nodes(child)


@cache
def imports(module: str) -> frozenset[str]:
    """The fw_assets modules `module` imports (anywhere in it, but for annotations only), and
    whether it imports dagster."""
    found = set()
    for node in runtime_nodes(tree(module)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                found.add(submodule if submodule in modules() else node.module)
    return frozenset(found)


def internal_imports(module: str) -> set[str]:
    return {name for name in imports(module) if name in modules() and name != module}


def top(module: str) -> str:
    """`fw_assets.bucketing.raw` -> `bucketing`; the package itself -> ``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def layer(module: str) -> int:
    part = top(module)
    if part == "":
        return 0
    return next((rank for rank, tops in enumerate(LAYERS) if part in tops), STEP_LAYER)


def is_plain(module: str) -> bool:
    """Modules free of Dagster: the plain layers, every step's work and contract rules (`contract`,
    `*_contract`, `contract_*`), and the contracts' findings."""
    name = module.rsplit(".", 1)[-1]
    return (
        top(module) in WITHOUT_DAGSTER
        or name == "contract" or name.endswith("_contract") or name.startswith("contract_")
        or module in ("fw_assets.contracts.findings", *STEP_WORK)
    )


def statements_named(module: str) -> set[str]:
    """The `sql/*.sql` statements a module runs: named in a call (`load_sql("x")`,
    `fetch_tallies(con, "x", …)`), whatever the helper."""
    return {
        argument.value
        for node in ast.walk(tree(module))
        if isinstance(node, ast.Call)
        for argument in node.args
        if isinstance(argument, ast.Constant) and argument.value in STATEMENTS
    }


def asset_modules() -> dict[str, object]:
    """Each asset of the definitions that runs code, with the module that defines it."""
    found = {}
    for asset in defs.assets:
        if isinstance(asset, (dg.AssetSpec, dg.SourceAsset)):  # external or observed: no code version
            continue
        function = asset.op.compute_fn.decorated_fn
        found[asset.key.to_user_string()] = importlib.import_module(function.__module__)
    return found


def test_every_asset_lives_in_a_step_module_named_after_it():
    for name, module in asset_modules().items():
        folder = top(module.__name__)
        assert module.__name__ == f"fw_assets.{folder}.{name}", f"asset {name} is in {module.__name__}"
        assert layer(module.__name__) == STEP_LAYER


def test_every_external_asset_lives_in_a_step_module_named_after_it():
    specs = [asset for asset in defs.assets if isinstance(asset, dg.AssetSpec)]
    for spec in specs:
        name = spec.key.to_user_string()
        homes = [m for m in modules() if m.endswith(f".{name}") and layer(m) == STEP_LAYER]
        assert [getattr(importlib.import_module(m), name, None) for m in homes] == [spec], name


@pytest.mark.parametrize("asset", sorted(asset_modules()))
def test_an_assets_code_version_covers_every_statement_its_code_runs(asset):
    """Each statement named by the asset module or a module it declares is declared, and every
    fw_assets module they import that names a statement is declared as well (an upstream asset's
    module has a code version of its own)."""
    module = asset_modules()[asset]
    upstream = {m.__name__ for m in asset_modules().values()}
    declared_sql, declared_modules = set(module.SQL), set(module.MODULES)
    hashed = {module.__name__, *declared_modules}
    for name in hashed:
        missing = statements_named(name) - declared_sql
        assert not missing, f"{asset}: {name} runs {sorted(missing)}, not in its SQL"
        for imported in internal_imports(name):
            if statements_named(imported) and imported not in upstream:
                assert imported in declared_modules, f"{asset}: {name} imports {imported}"
    assert declared_sql <= STATEMENTS


@pytest.mark.parametrize("asset", sorted(asset_modules()))
def test_an_assets_code_version_is_the_hash_of_its_declarations(asset):
    module = asset_modules()[asset]
    (version,) = defs.resolve_assets_def(asset).code_versions_by_key.values()
    assert version in (
        code_version(sql=module.SQL, modules=module.MODULES),
        code_version(sql=module.SQL, modules=module.MODULES, policy=SEED_POLICY),
        code_version(sql=module.SQL, modules=module.MODULES, fingerprint=getattr(module, "FINGERPRINT", "")),
    )


# Modules run by people, not by an asset: their statements decide no output.
COMMANDS = ("fw_assets.dedup.explain",)


def test_every_statement_is_in_some_assets_code_version():
    """No orphan SQL: every statement is hashed into an asset's code version, except those of the
    commands (explain), which only read what assets published."""
    declared = set().union(*(module.SQL for module in asset_modules().values()))
    commands = set().union(*map(statements_named, COMMANDS))
    assert declared | commands == STATEMENTS and not declared & commands


def test_a_changed_statement_or_module_changes_the_code_version(monkeypatch):
    before = code_version(sql=["select_sample"], modules=["fw_assets.sampling_policy"])
    monkeypatch.setattr("fw_assets.lib.versions.load_sql", lambda name: "SELECT 1")
    assert code_version(sql=["select_sample"], modules=["fw_assets.sampling_policy"]) != before
    monkeypatch.undo()
    monkeypatch.setattr("fw_assets.lib.versions.module_source", lambda name: b"")
    assert code_version(sql=["select_sample"], modules=["fw_assets.sampling_policy"]) != before


def test_the_import_graph_has_no_cycles():
    graph = {module: internal_imports(module) for module in modules()}
    try:
        tuple(TopologicalSorter(graph).static_order())
    except CycleError as error:
        pytest.fail(f"import cycle: {' -> '.join(error.args[1])}")


def test_the_import_graph_has_no_cycles_through_annotations_either():
    """A type named only for annotations (`if TYPE_CHECKING:`) lives in a module below both users:
    the classes two modules share are in a third they both import."""
    def every_import(module: str) -> set[str]:
        found = set()
        for node in ast.walk(tree(module)):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found |= {f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules() else node.module
                          for a in node.names}
            elif isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names}
        return {name for name in found if name in modules() and name != module}

    graph = {module: every_import(module) for module in modules()}
    try:
        tuple(TopologicalSorter(graph).static_order())
    except CycleError as error:
        pytest.fail(f"import cycle: {' -> '.join(error.args[1])}")


def test_no_module_imports_a_higher_layer():
    upward = [
        f"{module} imports {imported}"
        for module in modules()
        for imported in internal_imports(module)
        if layer(imported) > layer(module)
    ]
    assert not upward


def test_step_folders_import_another_only_for_an_upstream_asset():
    """A module of one step folder imports a module of another only when that module defines an asset
    the importing module's asset depends on (tokenized -> bucketing.bucketed)."""
    assets = asset_modules()
    deps = {
        module.__name__: {key.to_user_string() for key in defs.resolve_assets_def(name).dependency_keys}
        for name, module in assets.items()
    }
    crossing = [
        f"{module} imports {imported}"
        for module in modules()
        if layer(module) == STEP_LAYER
        for imported in internal_imports(module)
        if layer(imported) == STEP_LAYER and top(imported) != top(module)
        and imported.rsplit(".", 1)[-1] not in deps.get(module, set())
    ]
    assert not crossing


def test_only_lib_compiled_imports_numba():
    """One way to get a compiled loop (fw_assets.lib.compiled): the same options everywhere, and
    LLVM loaded only when a loop first runs."""
    importers = [module for module in modules() if any(n.split(".")[0] == "numba" for n in imports(module))]
    assert importers == ["fw_assets.lib.compiled"]


def test_an_asset_module_is_imported_only_for_its_asset():
    """What two assets share lives in a plain module: from an asset module, others import the asset
    (for `deps`, lineage and selections), nothing else."""
    asset_names = {module.__name__: name for name, module in asset_modules().items()}
    asset_names |= {
        m: m.rsplit(".", 1)[-1] for m in modules() for spec in defs.assets
        if isinstance(spec, dg.AssetSpec) and m.endswith("." + spec.key.to_user_string()) and layer(m) == STEP_LAYER
    }
    borrowed = []
    for module in modules():
        for node in ast.walk(tree(module)):
            if isinstance(node, ast.ImportFrom) and node.module in asset_names and node.module != module:
                extra = {alias.name for alias in node.names} - {asset_names[node.module]}
                borrowed += [f"{module} imports {name} from {node.module}" for name in sorted(extra)]
            elif isinstance(node, ast.Import):
                borrowed += [f"{module} imports {a.name} whole" for a in node.names if a.name in asset_names]
    assert not borrowed


def test_plain_modules_do_not_import_dagster():
    with_dagster = [
        module
        for module in modules()
        if is_plain(module)
        and any(name == "dagster" or name.startswith("dagster.") for name in imports(module))
    ]
    assert not with_dagster


# Libraries only a step uses: loading the code location (the webserver, the daemon, every run's
# process) must not import them. pandas + pandera cost ~0.45 CPU s (docs/benchmarks.md).
STEP_ONLY_LIBRARIES = ("pandas", "pandera", "tiktoken", "tokenizers", "numba", "torch", "datatrove")


def test_loading_the_definitions_imports_no_step_only_library():
    loaded, pending, libraries = set(), ["fw_assets.definitions"], set()
    while pending:
        module = pending.pop()
        if module in loaded:
            continue
        loaded.add(module)
        for name in load_time_imports(tree(module)) | set(parents(module)):
            if name in modules():
                pending.append(name)
            elif not name.startswith("fw_assets"):
                libraries.add(name.split(".")[0])
    assert "fw_assets.bucketing.raw" in loaded and "fw_assets.tokenizing.tokenized" in loaded
    assert sorted(libraries & set(STEP_ONLY_LIBRARIES)) == []


# File names every step folder may have, each meaning the same thing everywhere: a package, its command,
# its contract rules, its `explain` command, its partitions definition, its Dagster resources.
ROLE_FILES = ("__init__", "__main__", "contract", "explain", "partitions", "resources")


def test_no_two_modules_share_a_name_but_role_files():
    by_name: dict[str, list[str]] = {}
    for module, path in modules().items():
        by_name.setdefault(path.stem, []).append(module)
    shared = {name: found for name, found in by_name.items() if len(found) > 1 and name not in ROLE_FILES}
    assert not shared


# --- the tests' own structure -------------------------------------------------------------------
TESTS = Path(__file__).parent
# Test files about the repository rather than one module: the package's structure, the instance
# configurations (dagster.yaml, deploy/), what the test extra alone collects, the docs.
REPOSITORY_TESTS = ("test_structure.py", "test_instance_config.py", "test_extras.py", "test_docs.py")


def test_unit_tests_mirror_the_package():
    """`fw_assets_tests/<folder>/test_<name>.py` tests `fw_assets/<folder>/<name>.py` (or the
    package `<name>/`), `fw_assets_tests/bench/test_<name>.py` the benchmarks' `bench/<name>.py`;
    process-level tests are in e2e/, helpers in support/."""
    orphans = []
    for path in sorted(TESTS.rglob("test_*.py")):
        relative = path.relative_to(TESTS)
        if relative.parts[0] in ("e2e", "support") or str(relative) in REPOSITORY_TESTS:
            continue
        module = relative.parent / relative.name.removeprefix("test_")
        root = PACKAGE.parent if relative.parts[0] == "bench" else PACKAGE
        if not ((root / module).is_file() or (root / module.with_suffix("") / "__init__.py").is_file()):
            orphans.append(str(relative))
    assert not orphans, "test files named after no module of fw_assets"


def test_no_test_module_imports_another_test_module_or_a_conftest():
    borrowed = []
    for path in sorted(TESTS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [f"{node.module}.{alias.name}" for alias in node.names] if isinstance(node, ast.ImportFrom) else []
            names += [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            borrowed += [f"{path.relative_to(TESTS)} imports {name}" for name in names
                         if name.startswith("fw_assets_tests.")
                         and any(part.startswith("test_") or part == "conftest" for part in name.split("."))]
    assert not borrowed


def test_helpers_live_in_support_and_tests_outside_it():
    """Every module of fw_assets_tests is a test module, a conftest, a package or in support/."""
    misplaced = [
        str(path.relative_to(TESTS)) for path in sorted(TESTS.rglob("*.py"))
        if path.name not in ("conftest.py", "__init__.py")
        and (path.name.startswith("test_") == (path.relative_to(TESTS).parts[0] == "support"))
    ]
    assert not misplaced


def test_the_benchmarks_import_no_test_module():
    """One way only: tests may import bench/ (they test it, and share its harnesses: the local
    Dagster and Celery deployments, the tiny model), bench/ never imports fw_assets_tests."""
    bench = TESTS.parent / "bench"
    borrowed = []
    for path in sorted(bench.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [node.module] if isinstance(node, ast.ImportFrom) and node.module else []
            names += [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            borrowed += [f"{path.relative_to(bench.parent)} imports {name}" for name in names
                         if name.split(".")[0] == "fw_assets_tests"]
    assert not borrowed


def test_every_module_started_first_exists():
    missing = [module for module in LONGEST_FIRST if not (TESTS / module).is_file()]
    assert not missing, f"fw_assets_tests/support/scheduling.py names test modules that are gone: {missing}"
