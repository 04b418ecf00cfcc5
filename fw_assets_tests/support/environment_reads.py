"""The environment variables a code base reads, found in its source: Python's `os.environ` and
`os.getenv`, a shell script's `${NAME:-default}`, an instance file's `{env: NAME}`."""

import ast
import re
from pathlib import Path

ENVIRON_METHODS = ("get", "setdefault", "pop")  # os.environ.<method>(name, ...) reads name
# ${NAME:-...}: a variable given or not; upper case, as environment variables are named (a script's
# own lower-case variables, set for one of its commands, are not the environment's)
SHELL_READ = re.compile(r"\$\{([A-Z_][A-Z0-9_]*)(?::?[-?+=])")
INSTANCE_READ = re.compile(r"\{\s*env:\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}")  # Dagster's {env: NAME}


def _is_environ(node: ast.AST) -> bool:
    """`os.environ`, or `environ` imported from os."""
    return (isinstance(node, ast.Attribute) and node.attr == "environ" and isinstance(node.value, ast.Name)
            and node.value.id == "os") or (isinstance(node, ast.Name) and node.id == "environ")


def _read_name(node: ast.AST) -> ast.expr | None:
    """The expression naming the variable, when `node` reads one."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
        environ_method = node.func.attr in ENVIRON_METHODS and _is_environ(node.func.value)
        getenv = node.func.attr == "getenv" and isinstance(node.func.value, ast.Name) and node.func.value.id == "os"
        if environ_method or getenv:
            return node.args[0]
    if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _is_environ(node.value):
        return node.slice
    if isinstance(node, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops) \
            and _is_environ(node.comparators[-1]):
        return node.left
    return None


class PythonReads:
    """Every variable the modules under `package` read. A name may be a string, a module-level
    constant of the package, or a parameter of the function that reads it, given such a name by
    every call of that function in the package."""

    def __init__(self, package: Path):
        self.trees = {path: ast.parse(path.read_text()) for path in sorted(package.rglob("*.py"))}
        self.constants: dict[str, set[str]] = {}
        for tree in self.trees.values():
            for node in tree.body:
                if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) \
                        and isinstance(node.value.value, str):
                    for target in node.targets:
                        if isinstance(target, ast.Name):
                            self.constants.setdefault(target.id, set()).add(node.value.value)
        self.variables: set[str] = set()
        self.unknown: list[str] = []  # reads whose name this cannot tell
        for path, tree in self.trees.items():
            self._visit(path, tree, None)

    def _visit(self, path: Path, node: ast.AST, function: ast.FunctionDef | None) -> None:
        for child in ast.iter_child_nodes(node):
            if (name := _read_name(child)) is not None:
                found = self._resolve(name, function)
                self.variables |= found
                if not found:
                    self.unknown.append(f"{path.name} line {child.lineno}: {ast.unparse(child)}")
            inner = child if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else function
            self._visit(path, child, inner)

    def _resolve(self, name: ast.expr, function: ast.FunctionDef | None) -> set[str]:
        if isinstance(name, ast.Constant) and isinstance(name.value, str):
            return {name.value}
        identifier = name.id if isinstance(name, ast.Name) else name.attr if isinstance(name, ast.Attribute) else None
        if identifier in self.constants:
            return self.constants[identifier]
        parameters = [a.arg for a in function.args.args] if function else []
        if identifier not in parameters:
            return set()
        given = [self._argument(call, parameters.index(identifier), identifier) for call in self._calls(function.name)]
        resolved = [self._resolve(argument, None) if argument is not None else set() for argument in given]
        return set().union(*resolved) if resolved and all(resolved) else set()

    def _calls(self, function: str) -> list[ast.Call]:
        return [node for tree in self.trees.values() for node in ast.walk(tree) if isinstance(node, ast.Call)
                and (getattr(node.func, "id", None) == function or getattr(node.func, "attr", None) == function)]

    @staticmethod
    def _argument(call: ast.Call, index: int, keyword: str) -> ast.expr | None:
        if index < len(call.args):
            return call.args[index]
        return next((k.value for k in call.keywords if k.arg == keyword), None)


def shell_reads(script: Path) -> set[str]:
    """Variables a shell script takes from its environment when they are set (`${NAME:-default}`)."""
    return set(SHELL_READ.findall(script.read_text()))


def instance_reads(instance_yaml: Path) -> set[str]:
    """Variables a Dagster instance file reads (`{env: NAME}`)."""
    return set(INSTANCE_READ.findall(instance_yaml.read_text()))
