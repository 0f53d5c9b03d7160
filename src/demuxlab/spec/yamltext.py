"""A spec's YAML text to a document: safe YAML, duplicate keys refused, nesting and the node count with
every alias expanded bounded (no "billion laughs", no recursive alias); a syntax error names its line.

YAML versions: the reader is PyYAML, which implements YAML 1.1. Its parser takes any ``%YAML 1.x``
directive (1.0, 1.2, even 1.3, which does not exist) and silently reads the document as 1.1; only a major
version other than 1 is refused. Where 1.1 and 1.2 differ, a 1.2 document would be misread without a word:
``yes``/``no``/``on``/``off`` are booleans in 1.1 and strings in 1.2, ``010`` is octal 8 in 1.1 and 10 in
1.2, ``1:30`` is the sexagesimal 90 in 1.1 and a string in 1.2, and ``<<`` merges only in 1.1. So a spec
may declare ``%YAML 1.1`` or no version (read as 1.1); any other ``%YAML`` directive is refused, naming
its line.
"""

from __future__ import annotations

from typing import Any

import yaml

from demuxlab import limits as lim
from demuxlab.errors import SpecError
from demuxlab.spec.problems import excerpt

#: The YAML versions the reader implements (see the module doc).
SUPPORTED_YAML_VERSIONS = ((1, 1),)


class _UnsupportedVersion(Exception):
    def __init__(self, version: tuple[int, int], line: int) -> None:
        super().__init__(version, line)
        self.version, self.line = version, line


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate mapping keys instead of keeping the last one, and bounds the
    nesting depth while composing (PyYAML's composer recurses once per level)."""

    _depth = 0
    _nodes = 0

    def get_token(self) -> Any:
        token = super().get_token()  # type: ignore[no-untyped-call]
        if isinstance(token, yaml.DirectiveToken) and token.name == "YAML":
            version = tuple(token.value)
            if version not in SUPPORTED_YAML_VERSIONS:
                raise _UnsupportedVersion((version[0], version[1]), token.start_mark.line + 1)
        return token

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        self._depth += 1
        self._nodes += 1
        try:
            problem = None
            if self._depth > lim.MAX_YAML_DEPTH:
                problem = f"nested more than {lim.MAX_YAML_DEPTH} levels deep"
            elif self._nodes > lim.MAX_YAML_NODES:  # stop reading at once (aliases are counted later)
                problem = f"more than {lim.MAX_YAML_NODES} YAML nodes"
            if problem is not None:
                mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
                raise yaml.composer.ComposerError(None, None, problem, mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # `<<: *defaults`: merged keys may be overridden, that is what merging is for
            key = self.construct_object(key_node, deep=deep)
            try:
                duplicate = key in seen
            except TypeError:
                continue  # unhashable: the base class reports it
            if duplicate:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _node_children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _check_expanded(root: yaml.Node, file: str) -> None:
    """Bound the document as it would be with every alias expanded: nodes, depth, no cycles.

    Iterative post-order over the node graph, each node measured once: linear in the file, whatever
    the aliases would expand to.
    """
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    open_: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        if finished:
            children = _node_children(node)
            size[key] = min(1 + sum(size[id(c)] for c in children), lim.MAX_YAML_NODES + 1)
            depth[key] = 1 + max((depth[id(c)] for c in children), default=0)
            open_.discard(key)
            line = node.start_mark.line + 1
            if size[key] > lim.MAX_YAML_NODES:
                raise SpecError(
                    f"{file}: line {line}: more than {lim.MAX_YAML_NODES} YAML nodes with aliases expanded"
                )
            if depth[key] > lim.MAX_YAML_DEPTH:
                raise SpecError(
                    f"{file}: line {line}: nested more than {lim.MAX_YAML_DEPTH} levels deep "
                    "with aliases expanded"
                )
            continue
        if key in size:
            continue
        if key in open_:
            raise SpecError(f"{file}: line {node.start_mark.line + 1}: YAML alias refers to itself")
        open_.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _node_children(node) if id(child) not in size)


def parse_yaml(text: str, file: str) -> Any:
    loader: _StrictLoader | None = None
    try:
        loader = _StrictLoader(text)  # the reader refuses control characters here already
        node = loader.get_single_node()
        if node is None:
            return None
        _check_expanded(node, file)
        return loader.construct_document(node)
    except _UnsupportedVersion as exc:
        major, minor = exc.version
        raise SpecError(
            f"{file}: line {exc.line}: %YAML {major}.{minor}: the spec reader implements YAML 1.1 only and "
            "would read this document as 1.1 (where versions differ, yes/no, 010 and 1:30 mean other "
            "things): declare %YAML 1.1 or no version"
        ) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}" if mark is not None else "(unknown line)"
        problem = exc.problem or exc.context or "invalid YAML"
        raise SpecError(f"{file}: {where}: YAML syntax error: {excerpt(problem)}") from exc
    except yaml.YAMLError as exc:
        raise SpecError(f"{file}: YAML syntax error: {excerpt(str(exc).splitlines()[0])}") from exc
    except RecursionError:  # cannot happen with the bounds above; never a traceback if it does
        raise SpecError(f"{file}: YAML nested too deeply") from None
    finally:
        if loader is not None:
            loader.dispose()
