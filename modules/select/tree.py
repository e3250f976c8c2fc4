"""The expression tree: one frozen node per construct, each with its span in the text; how deep a tree may be."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Node:
    #: the node's characters in the expression (for messages and the drop detail)
    start: int = field(compare=False)
    end: int = field(compare=False)


@dataclass(frozen=True)
class Num(Node):
    value: float = 0.0


@dataclass(frozen=True)
class Str(Node):
    value: str = ""


@dataclass(frozen=True)
class Col(Node):
    name: str = ""


@dataclass(frozen=True)
class Neg(Node):
    operand: Node = None


@dataclass(frozen=True)
class Arith(Node):
    op: str = "+"
    left: Node = None
    right: Node = None


@dataclass(frozen=True)
class Compare(Node):
    op: str = "=="
    left: Node = None
    right: Node = None


@dataclass(frozen=True)
class In(Node):
    operand: Node = None
    values: tuple = ()
    negated: bool = False


@dataclass(frozen=True)
class IsNull(Node):
    operand: Node = None
    negated: bool = False


@dataclass(frozen=True)
class Not(Node):
    operand: Node = None


@dataclass(frozen=True)
class And(Node):
    operands: tuple = ()


@dataclass(frozen=True)
class Or(Node):
    operands: tuple = ()


#: the deepest expression tree accepted (parentheses, ``not``, signs and each operator of a ``+``/``*``
#: chain add a level) and the deepest nesting of parentheses, ``not`` and signs (the parser recurses
#: about eight frames per parenthesis): the parser, type checker and evaluator recurse per level and
#: Python's stack is about a thousand frames deep, so deeper is a syntax error naming where
MAX_DEPTH, MAX_NESTING = 200, 64


def _children(node: Node) -> tuple:
    if isinstance(node, (And, Or)):
        return node.operands
    if isinstance(node, (Arith, Compare)):
        return (node.left, node.right)
    if isinstance(node, (Neg, Not, In, IsNull)):
        return (node.operand,)
    return ()


def _too_deep(node: Node) -> Node | None:
    """The first node (in reading order) deeper than :data:`MAX_DEPTH` below ``node``; walked with a
    list, not recursion (a chain of 1,000 ``+`` is a tree 1,000 deep)."""
    stack = [(node, 1)]
    while stack:
        n, depth = stack.pop()
        if depth > MAX_DEPTH:
            return n
        stack.extend((c, depth + 1) for c in reversed(_children(n)))
    return None
