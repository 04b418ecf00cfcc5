"""The README and the docs site say true things about the code and read as a guide, not a changelog:
every file path and every dotted name of the package they cite exists, the README stays a front
door, and no work-item tag or history word is left in their prose."""

import ast
import importlib.util
import re
import unicodedata
from functools import cache
from pathlib import Path

import pytest

from fw_assets_tests.support.documented_errors import CODE_SPAN, documented_errors, failure_mode_messages
from fw_assets_tests.support.drawings import Drawing
from fw_assets_tests.support.environment_reads import PythonReads, instance_reads, shell_reads

REPO_ROOT = Path(__file__).resolve().parents[1]
PAGES = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
README_MAX_LINES = 300

# Repository paths a page may cite; folders the project generates (gitignored) are not checked.
CITED_ROOTS = ("fw_assets", "sql", "deploy", "bench")
GENERATED = ("bench/work/", "bench/results/")
PATH = re.compile(r"(?<![\w/$.-])((?:%s)/[\w./*<>{}-]*)" % "|".join(CITED_ROOTS))
DOTTED = re.compile(r"(?<![\w./-])fw_assets(?:\.[A-Za-z_]\w*)+")
CALL = re.compile(r"(?<![\w./-])([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)(?=\()")

# What a guide does not say: work-item tags such as "(25.4)" or "(26)", and the history of the work.
HISTORY = {
    "a work-item tag": re.compile(r"(?<![\w)\]])\(\s*\d{1,2}(?:\.\d{1,2})?\s*\)|\b[Ii]ssues? \d+"),
    "'pass'": re.compile(r"\bpass\b", re.I),
    "'next'": re.compile(r"\bnext\b", re.I),
    "'used to'": re.compile(r"\bused to\b", re.I),
    "'before this version'": re.compile(r"\bbefore this version\b", re.I),
}


def page_id(page: Path) -> str:
    return str(page.relative_to(REPO_ROOT))


def lines_with(page: Path, pattern: re.Pattern, text: str | None = None) -> list[tuple[int, str]]:
    """(line number, match) of every match of `pattern` in `text` (default: the page)."""
    text = page.read_text() if text is None else text
    return [(text.count("\n", 0, m.start()) + 1, m.group(0)) for m in pattern.finditer(text)]


def prose(text: str) -> str:
    """The page without its code (fenced blocks, inline spans), line for line: code quotes the
    program's own messages and commands."""
    text = re.sub(r"^( *)(```|~~~).*?^\1\2", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S | re.M)
    text = re.sub(r"^(    |\t).*$", "", text, flags=re.M)  # indented blocks
    return re.sub(r"(`+)(?!`).+?(?<!`)\1(?!`)", lambda m: " " * len(m.group(0)), text)


def cites_a_path(text: str) -> bool:
    """A file (a name with an extension), a folder (a trailing slash), a glob or a placeholder;
    not a Dagster tag such as `fw_assets/host`."""
    path = text.rstrip(".,:;)")
    return path.endswith("/") or any(mark in path for mark in "*<{") or "." in path.rsplit("/", 1)[-1]


def cited_path_exists(path: str) -> bool:
    """A path exists; a glob matches something; a path with a placeholder (`<dump>`, `{…}`) has
    its part before the placeholder as an existing folder."""
    path = path.rstrip(".,:;)")
    for mark in "<{":
        if mark in path:
            path = path[: path.index(mark)].rsplit("/", 1)[0]
    if "*" in path:
        return any(REPO_ROOT.glob(path))
    return (REPO_ROOT / path).exists()


@cache
def module_tree(module: str) -> ast.Module | None:
    """The parsed source of an fw_assets module, or None when there is no such module."""
    try:
        spec = importlib.util.find_spec(module)
    except ModuleNotFoundError:
        return None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    return ast.parse(Path(spec.origin).read_text())


def defined_names(body: list[ast.stmt]) -> set[str]:
    """Names a module or class body binds: definitions, assignments and imports."""
    names = set()
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def resolves(dotted: str) -> bool:
    """`fw_assets.a.b.Name.attr`: the longest prefix that is a module, then each further part
    defined in the module, then in the class before it."""
    parts = dotted.split(".")
    for split in range(len(parts), 0, -1):
        tree = module_tree(".".join(parts[:split]))
        if tree is not None:
            break
    else:
        return False
    body = tree.body
    for name in parts[split:]:
        if name not in defined_names(body):
            return False
        found = [n for n in body if isinstance(n, ast.ClassDef) and n.name == name]
        body = found[0].body if found else []
    return True


@cache
def package_names() -> dict[str, set[str]]:
    """Each public top-level name of the package's modules, with the modules that define it."""
    index: dict[str, set[str]] = {}
    for path in (REPO_ROOT / "fw_assets").rglob("*.py"):
        parts = path.relative_to(REPO_ROOT).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_"):
                index.setdefault(node.name, set()).add(module)
    return index


def misnamed_module(chain: str) -> str | None:
    """For `cache.write_stage_cache(...)`: a function or class of the package called under a module
    name that is not its module's; returns the full name to write instead."""
    parts = chain.split(".")
    for i in range(1, len(parts)):
        modules = package_names().get(parts[i], set())
        prefix = ".".join(parts[:i])
        if modules and not any(m == prefix or m.endswith("." + prefix) for m in modules):
            return " or ".join(f"{m}.{parts[i]}" for m in sorted(modules))
    return None


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_cited_path_exists(page):
    missing = [
        f"line {line}: {path}"
        for line, path in lines_with(page, PATH)
        if cites_a_path(path) and not path.startswith(GENERATED) and not cited_path_exists(path)
    ]
    assert not missing, f"{page_id(page)} cites paths that do not exist: {missing}"


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_cited_module_function_and_class_exists(page):
    missing = [f"line {line}: {name}" for line, name in lines_with(page, DOTTED) if not resolves(name)]
    assert not missing, f"{page_id(page)} names modules or attributes that do not exist: {missing}"


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_the_packages_functions_are_cited_under_their_own_module(page):
    wrong = [
        f"line {line}: {chain} (is {full})"
        for line, chain in lines_with(page, CALL)
        if not chain.startswith("fw_assets.") and (full := misnamed_module(chain))
    ]
    assert not wrong, f"{page_id(page)} cites functions under a module that does not hold them: {wrong}"


def anchors(page: Path) -> set[str]:
    """The anchors of a page's headings, as MkDocs makes them (Python-Markdown's toc slugify)."""
    headings = re.findall(r"^#{1,6} +(.+?) *$", prose_keeping_code_text(page.read_text()), flags=re.M)
    slugs = set()
    for heading in headings:
        text = unicodedata.normalize("NFKD", heading.replace("`", "")).encode("ascii", "ignore").decode()
        slugs.add(re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", text).strip().lower()))
    return slugs


def prose_keeping_code_text(text: str) -> str:
    """The page without its fenced blocks (a `# comment` in a block is not a heading)."""
    return re.sub(r"^( *)(```|~~~).*?^\1\2", "", text, flags=re.S | re.M)


def test_the_readmes_links_into_the_docs_exist():
    """The site's own links are checked by `mkdocs build --strict`; the README is not part of it."""
    readme = REPO_ROOT / "README.md"
    broken = []
    for line, link in lines_with(readme, re.compile(r"\]\((docs/[^)#\s]*)(#[^)\s]*)?\)")):
        target, _, anchor = link[2:-1].partition("#")
        page = REPO_ROOT / target
        if not page.is_file() or (anchor and anchor not in anchors(page)):
            broken.append(f"line {line}: {link[2:-1]}")
    assert not broken, f"README.md links to pages or anchors that do not exist: {broken}"


def test_the_readme_is_a_front_door():
    lines = (REPO_ROOT / "README.md").read_text().count("\n")
    assert lines <= README_MAX_LINES, (
        f"README.md has {lines} lines: move sections to docs/ (at most {README_MAX_LINES})"
    )


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_the_prose_holds_no_work_item_tags_or_history(page):
    text = prose(page.read_text())
    found = [f"line {line}: {what} ({match!r})" for what, pattern in HISTORY.items()
             for line, match in lines_with(page, pattern, text)]
    assert not found, f"{page_id(page)} reads as a changelog: {found}"


def test_the_checks_fail_on_what_they_guard(tmp_path):
    """Each check above finds what it is for, so a green run means something."""
    page = tmp_path / "page.md"
    page.write_text("See `fw_assets/layout.py`, `fw_assets/host` and `fw_assets.resources.DuckDBSteps`, then\n"
                    "`cache.write_stage_cache(stage)`; (25.4) it used to fail before this version.\n")
    assert [p for _, p in lines_with(page, PATH) if cites_a_path(p) and not cited_path_exists(p)] == [
        "fw_assets/layout.py"]
    assert [n for _, n in lines_with(page, DOTTED) if not resolves(n)] == ["fw_assets.resources.DuckDBSteps"]
    assert [misnamed_module(c) for _, c in lines_with(page, CALL) if misnamed_module(c)] == [
        "fw_assets.mixtures.megatron.blended_megatron_dataset_builder.write_stage_cache"]
    text = prose(page.read_text())
    assert {what for what, pattern in HISTORY.items() if pattern.search(text)} == {
        "a work-item tag", "'used to'", "'before this version'"}


# --- the environment variables: every one the code reads is in the operations page's reference ---
OPERATIONS = REPO_ROOT / "docs" / "operations.md"
VARIABLES_SECTION = "## Reference: environment variables"
SHELL_SCRIPTS = sorted((REPO_ROOT / "deploy").rglob("*.sh"))
INSTANCE_FILES = [REPO_ROOT / "dagster.yaml", *sorted((REPO_ROOT / "deploy").rglob("*.yaml"))]


def table_rows(text: str) -> list[list[str]]:
    """The cells of every row of every markdown table in `text`, header and rule rows apart."""
    rows = []
    for block in re.findall(r"(?:^\|.*\|[ \t]*\n?)+", text, flags=re.M):
        lines = block.strip("\n").split("\n")
        rows += [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in lines[2:]]
    return rows


def documented_variables() -> set[str]:
    """The variables named in the first column of the tables of the operations page's reference."""
    section = OPERATIONS.read_text().split(VARIABLES_SECTION, 1)[1].split("\n## ", 1)[0]
    return {name for row in table_rows(section) for name in re.findall(r"`([A-Z][A-Z0-9_]*)`", row[0])}


def test_every_environment_variable_the_code_reads_is_in_the_operations_reference():
    """fw_assets' own reads (os.environ, os.getenv, through settings.py or not), the shell scripts
    of deploy/ and the instance files ({env: NAME}) read nothing the reference leaves out."""
    python = PythonReads(REPO_ROOT / "fw_assets")
    assert not python.unknown, f"environment reads whose variable the test cannot tell: {python.unknown}"
    read = python.variables | set().union(*map(shell_reads, SHELL_SCRIPTS), *map(instance_reads, INSTANCE_FILES))
    missing = sorted(read - documented_variables())
    assert not missing, f"{page_id(OPERATIONS)} ({VARIABLES_SECTION[3:]}) leaves out: {missing}"


def test_every_variable_in_the_operations_reference_is_one_the_code_or_dagster_names():
    """A variable the code no longer names leaves the reference too."""
    sources = [*(REPO_ROOT / "fw_assets").rglob("*.py"), *SHELL_SCRIPTS, *INSTANCE_FILES]
    text = "\n".join(path.read_text() for path in sources)
    stale = sorted(name for name in documented_variables() if not re.search(rf"\b{name}\b", text))
    assert not stale, f"{page_id(OPERATIONS)} documents variables nothing reads: {stale}"


def test_the_environment_reads_are_found_however_the_name_is_given(tmp_path):
    package = tmp_path / "package"
    package.mkdir()
    (package / "settings.py").write_text(
        'import os\nSCOPE_ENV = "X_SCOPE"\n'
        'def number(name, default):\n    return os.environ.get(name, default)\n'
        'def limit():\n    return number("X_LIMIT", 1)\n'
        'def scope():\n    return os.getenv(SCOPE_ENV) or os.environ["X_PLAIN"]\n'
        'def told(which):\n    return "X_SET" in os.environ or os.environ.setdefault(which, "0")\n'
    )
    (package / "user.py").write_text("from package import settings\nsettings.told(input())\n")
    reads = PythonReads(package)
    assert reads.variables == {"X_SCOPE", "X_LIMIT", "X_PLAIN", "X_SET"}
    assert [line.split(":")[0] for line in reads.unknown] == ["settings.py line 10"]
    script = tmp_path / "run.sh"
    script.write_text('WORKERS=${X_WORKERS:-2}\nHOME_DIR=${X_HOME-}\necho "$PLAIN ${X_NEEDED:?}"\n')
    assert shell_reads(script) == {"X_WORKERS", "X_HOME", "X_NEEDED"}
    instance = tmp_path / "dagster.yaml"
    instance.write_text("storage:\n  postgres:\n    hostname: {env: X_PG_HOST}\n")
    assert instance_reads(instance) == {"X_PG_HOST"}


# --- the asset graph: drawn in the README and on the home page, as the definitions have it ---
# Each drawing is the ```{.text .drawing} block right after an HTML comment starting `<!-- the asset graph`.
# A changed graph fails here until its drawing (and the home page's table) say the same.
DRAWN_ON = [REPO_ROOT / "README.md", REPO_ROOT / "docs" / "index.md"]
DRAWING = re.compile(r"^<!-- the asset graph.*?-->\n```\{\.text \.drawing\}\n(.*?)\n```", flags=re.S | re.M)
HOME = REPO_ROOT / "docs" / "index.md"
HOME_TABLE_HEADER = "| asset | group | partitions | page |"
README_TABLE_HEADER = "| asset | what it does |"


@cache
def defined_graph() -> tuple[dict, set[tuple[str, str]]]:
    """Each asset of `fw_assets.definitions.defs` by name, and every (upstream, downstream) pair."""
    from fw_assets.definitions import defs

    graph = defs.resolve_asset_graph()
    nodes = {key.to_user_string(): graph.get(key) for key in graph.get_all_asset_keys()}
    edges = {(parent.to_user_string(), name) for name, node in nodes.items() for parent in node.parent_keys}
    return nodes, edges


@pytest.mark.parametrize("page", DRAWN_ON, ids=page_id)
def test_the_asset_graph_drawn_is_the_one_defined(page):
    drawings = DRAWING.findall(page.read_text())
    assert len(drawings) == 1, f"{page_id(page)}: expected one drawing of the asset graph, found {len(drawings)}"
    drawing = Drawing(drawings[0])
    assert not drawing.problems, f"{page_id(page)}'s asset graph: {drawing.problems}"
    nodes, edges = defined_graph()
    ends = {name for edge in drawing.edges for name in edge}
    assert not ends - nodes.keys(), f"{page_id(page)} draws arrows at names that are no asset: {ends - nodes.keys()}"
    assert not nodes.keys() - drawing.names, f"{page_id(page)} does not draw {sorted(nodes.keys() - drawing.names)}"
    assert not edges - drawing.edges, f"{page_id(page)} lacks the arrows {sorted(edges - drawing.edges)}"
    assert not drawing.edges - edges, f"{page_id(page)} draws arrows no asset has: {sorted(drawing.edges - edges)}"


def table_after(page: Path, header: str) -> list[list[str]]:
    text = page.read_text()
    assert header in text, f"{page_id(page)} has no table `{header}`"
    return table_rows(text[text.index(header):].split("\n\n", 1)[0])


def partitions_of(node) -> str:
    from fw_assets.mixtures.partitions import recipe_partitions
    from fw_assets.partitions import dump_partitions

    return {id(dump_partitions): "dumps", id(recipe_partitions): "recipes"}.get(id(node.partitions_def), "other")


def test_the_home_pages_table_gives_each_asset_its_group_and_partitions():
    """One row per set of assets: their names (`(observed)` for an asset no run materializes),
    their group and their partitions, as defined."""
    nodes, _ = defined_graph()
    listed, wrong = [], []
    for cells in table_after(HOME, HOME_TABLE_HEADER):
        names, group, partitions = re.findall(r"`(\w+)`", cells[0]), cells[1].strip("`"), cells[2]
        listed += names
        for name in names:
            node = nodes.get(name)
            if node is None:
                wrong.append(f"{name}: no such asset")
                continue
            said = (group, partitions, "(observed)" in cells[0])
            defined = (node.group_name, partitions_of(node), not node.is_materializable)
            if said != defined:
                wrong.append(f"{name}: the table says {said}, the definitions (group, partitions, observed) {defined}")
    assert sorted(listed) == sorted(nodes), f"{page_id(HOME)}'s asset table lists {sorted(listed)}"
    assert not wrong, wrong


def test_the_readmes_table_has_one_row_per_asset():
    nodes, _ = defined_graph()
    listed = [re.fullmatch(r"`(\w+)`", cells[0]).group(1) for cells in table_after(REPO_ROOT / "README.md",
                                                                                    README_TABLE_HEADER)]
    assert sorted(listed) == sorted(nodes), f"README.md's asset table lists {sorted(listed)}"


def test_a_drawing_is_read_as_drawn():
    """Branches and merges, a crossing, an arrowhead touching its name, and the mistakes reported."""
    drawing = Drawing(
        "a ──> b ──┬──> c\n"
        "│         │\n"
        "│     d ──┼──> e\n"
        "│         ▼\n"
        "└───────> f    g>h"
    )
    assert drawing.edges == {("a", "b"), ("b", "c"), ("b", "f"), ("d", "e"), ("a", "f"), ("g", "h")}
    assert not drawing.problems
    broken = Drawing("a ──> b\n\n  ──> c\nd ──>   e\n    │")
    assert broken.problems == [
        "line 3, column 3: a line that ends at no name",
        "line 3, column 5: an arrow into c that comes from no name",
        "line 4, column 5: an arrowhead that points at no name",
        "line 5, column 5: a line that leads to no arrowhead",
    ]


def test_the_data_formats_page_covers_every_path_paths_py_lists():
    """fw_assets/paths.py lists every path read or written in its docstring; the page says what
    each one holds."""
    listed = re.findall(r"^\s*<(?:source|output)_root>/(\S+)", ast.get_docstring(module_tree("fw_assets.paths")), re.M)
    page = (REPO_ROOT / "docs" / "data-formats.md").read_text()
    assert len(listed) > 10 and not [path for path in listed if path not in page], [p for p in listed if p not in page]
def test_recipe_errors_elsewhere_are_the_ones_the_recipes_page_shows():
    """docs/recipes.md's messages are each checked against what fw_assets prints (mixtures/test_recipe.py,
    test_plan.py); a recipe error that docs/failure-modes.md or docs/mixtures.md quote is one of them
    (or the failed run's, checked by mixtures/test_mixture_plan.py)."""
    shown = {row.message for row in documented_errors()}
    quoted = {f"failure-modes.md, {case}": messages for case, messages in failure_mode_messages().items()
              if case != "A recipe mistake found while a run plans it"}
    mixtures = (REPO_ROOT / "docs" / "mixtures.md").read_text()
    quoted["mixtures.md"] = [m.group(2) for m in CODE_SPAN.finditer(mixtures) if m.group(2).startswith("recipe ")]
    unknown = {where: sorted(set(messages) - shown) for where, messages in quoted.items() if set(messages) - shown}
    assert not unknown
