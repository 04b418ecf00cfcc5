"""What a module imports, read from its source (ast), for the tests of the package's layers
(test_structure.py) and of the extras a test module needs (test_extras.py)."""

import ast


def load_time_imports(tree: ast.Module) -> set[str]:
    """Modules a module imports when it is loaded: its top-level import statements (also inside a
    top-level `if`/`try`, except `if TYPE_CHECKING:`), not those inside functions. `from a import
    b` gives both `a` and `a.b` (b may be a module)."""
    found, pending = set(), list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.If) and not ast.unparse(node.test).endswith("TYPE_CHECKING"):
            pending += node.body + node.orelse
        elif isinstance(node, ast.Try):
            pending += node.body + node.orelse + node.finalbody
    return found


def all_imports(tree: ast.Module) -> set[str]:
    """Modules a module imports anywhere, functions included, named as `load_time_imports` names them."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def parents(module: str) -> list[str]:
    """The packages loaded before `module`: `a.b.c` -> `a.b`, `a`."""
    return [module.rsplit(".", depth)[0] for depth in range(1, module.count(".") + 1)]
