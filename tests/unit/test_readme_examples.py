"""Goal: the README's Python examples cannot rot silently. A walk of the README against a live
cluster runs them by hand; between walks, a renamed SDK name or a snippet broken by an edit
would only show when a newcomer copies it.

Method: read README.md as text (no cluster). Every ```python block must compile; every
`from samsa... import NAME` in one must name a module that imports and a NAME it has (other
packages, such as pyspark, are the reader's to install and are not checked); every
`python -m samsa...` the README tells a user to run, and every `samsa....()` call it names in
prose, must exist. Each check is parametrized by the block's line, so a failure says where.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
TEXT = README.read_text(encoding="utf-8")

PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
RUN_MODULE = re.compile(r"python -m (samsa(?:\.\w+)+)")
PROSE_CALL = re.compile(r"`(samsa(?:\.\w+)+)\(\)`")


def python_blocks() -> list[tuple[int, str]]:
    """(README line of the block's first code line, its source) for each ```python block."""
    return [(TEXT.count("\n", 0, m.start(1)) + 1, m.group(1)) for m in PYTHON_BLOCK.finditer(TEXT)]


def samsa_imports(source: str) -> list[tuple[str, str]]:
    """(module, name) of each `from samsa... import name` in `source`."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []  # test_every_python_example_compiles names the block
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "samsa":
            found += [(node.module or "", alias.name) for alias in node.names]
    return found


BLOCKS = python_blocks()
IMPORTS = [(line, module, name) for line, src in BLOCKS for module, name in samsa_imports(src)]


def test_the_readme_has_its_python_examples() -> None:
    # The SDK example, consumer groups, the transactional loop and Spark, at least: a change
    # in the fence (say ```py) would otherwise leave every other test here with nothing to check.
    assert len(BLOCKS) >= 4, [line for line, _ in BLOCKS]
    assert len(IMPORTS) >= 5, IMPORTS


@pytest.mark.parametrize(("line", "source"), BLOCKS, ids=[f"line{line}" for line, _ in BLOCKS])
def test_every_python_example_compiles(line: int, source: str) -> None:
    compile(source, f"README.md:{line}", "exec")


@pytest.mark.parametrize(
    ("line", "module", "name"), IMPORTS, ids=[f"line{line}-{name}" for line, _, name in IMPORTS]
)
def test_every_samsa_name_an_example_imports_exists(line: int, module: str, name: str) -> None:
    try:
        imported = importlib.import_module(module)
    except ModuleNotFoundError as missing:
        if (missing.name or "").split(".")[0] == "samsa":
            raise  # the README names a samsa module that is not there
        pytest.skip(f"{module} needs {missing.name}, not installed here")
    assert hasattr(imported, name), f"README.md:{line}: {module} has no {name}"


@pytest.mark.parametrize("module", sorted(set(RUN_MODULE.findall(TEXT))))
def test_every_python_m_module_exists(module: str) -> None:
    assert importlib.util.find_spec(module) is not None, f"README: python -m {module}"


@pytest.mark.parametrize("call", sorted(set(PROSE_CALL.findall(TEXT))))
def test_every_samsa_call_named_in_prose_exists(call: str) -> None:
    module, _, name = call.rpartition(".")
    assert callable(getattr(importlib.import_module(module), name, None)), f"README: {call}()"
