"""Predicates over a shard's per-sample columns, vectorised: a small expression language walked on numpy
arrays (never ``eval``), or a Python function; whole shards at a time, never one sample."""

# The expression is parsed with ``ast`` once and checked node by node before any shard is read: column
# names, int and float constants, comparisons (chained too), and/or/not, ``in``/``not in`` a tuple or list of
# numbers, + - * / // % and unary minus. Anything else (calls, attributes, subscripts, lambdas, strings,
# ``**``) is refused with a ValueError naming the construct, so a hostile string can do nothing but compare
# numbers. Integer columns are widened to int64 and floats to float64 first: ``cost - 5000 < 0`` on a u8
# column would otherwise wrap around.

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

Columns = Mapping[str, np.ndarray]
WhereFunction = Callable[[dict[str, np.ndarray]], Any]
MAX_LENGTH = 10_000  # characters: ast's recursion is bounded before it is reached

_BINARY = {
    ast.Add: np.add,
    ast.Sub: np.subtract,
    ast.Mult: np.multiply,
    ast.Div: np.true_divide,
    ast.FloorDiv: np.floor_divide,
    ast.Mod: np.mod,
}
_COMPARE = {
    ast.Lt: np.less,
    ast.LtE: np.less_equal,
    ast.Gt: np.greater,
    ast.GtE: np.greater_equal,
    ast.Eq: np.equal,
    ast.NotEq: np.not_equal,
}
_NAMES = {
    ast.Call: "a call",
    ast.Attribute: "an attribute",
    ast.Subscript: "a subscript",
    ast.Lambda: "a lambda",
    ast.IfExp: "an if-else",
    ast.NamedExpr: "an assignment (:=)",
    ast.Starred: "a starred item",
    ast.JoinedStr: "an f-string",
    ast.Dict: "a dict",
    ast.ListComp: "a comprehension",
    ast.GeneratorExp: "a generator",
    ast.Await: "await",
}
_SYMBOLS = {
    ast.Pow: "**",
    ast.BitAnd: "&",
    ast.BitOr: "|",
    ast.BitXor: "^",
    ast.LShift: "<<",
    ast.RShift: ">>",
}
_SYMBOLS.update({ast.MatMult: "@", ast.Is: "is", ast.IsNot: "is not"})
ALLOWED = "column names, numbers, comparisons, and/or/not, in (...), + - * / // % and unary minus"


@dataclass(frozen=True)
class Where:
    """A parsed, checked expression: ``names``, the columns it reads; ``mask(columns)`` evaluates it."""

    text: str
    tree: ast.Expression
    names: frozenset[str]

    def mask(self, columns: Columns, samples: int | None = None) -> np.ndarray:
        """The samples the expression keeps, a bool array of the shard's length."""
        unknown = sorted(self.names - set(columns))
        if unknown:
            have = ", ".join(sorted(columns)) or "none"
            raise ValueError(
                f"where: {unknown[0]!r} in {self.text!r} is not a column; the columns are: {have}"
            )
        count = _length(columns, samples)
        widened = {name: _widened(columns[name]) for name in self.names}
        with np.errstate(all="ignore"):  # x / 0 is inf, x // 0 is 0: a comparison then decides
            try:
                result = np.asarray(_Evaluate(self.text, widened).visit(self.tree.body))
            except OverflowError as exc:
                raise ValueError(f"where: a number in {self.text!r} is too large ({exc})") from None
        if result.dtype != bool:
            raise ValueError(
                f"where: {self.text!r} gives numbers, not true or false; compare them (e.g. x > 0)"
            )
        return np.array(np.broadcast_to(result, (count,)))


def compile_where(expression: str) -> Where:
    """``expression`` parsed and checked; ValueError naming the construct that is not allowed."""
    if not isinstance(expression, str):
        raise ValueError(f"where must be an expression (str) or a function, not {type(expression).__name__}")
    if len(expression) > MAX_LENGTH:
        raise ValueError(f"where: an expression of {len(expression)} characters; at most {MAX_LENGTH}")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except (SyntaxError, RecursionError, MemoryError) as exc:
        raise ValueError(f"where: {expression!r} is not an expression ({exc})") from None
    names: set[str] = set()
    for node in ast.walk(tree):
        _check_node(node, expression, names)
    return Where(expression, tree, frozenset(names))


def where_mask(
    expression_or_function: str | WhereFunction, columns: Columns, *, samples: int | None = None
) -> np.ndarray:
    """The samples of one shard that ``expression_or_function`` keeps, from its ``columns`` (name -> one
    value a sample): an expression (see ``compile_where``) or a function of the columns dict that returns a
    bool array of the shard's length. ``samples``: the shard's count (default: the columns' length)."""
    if callable(expression_or_function):
        return function_mask(expression_or_function, columns, samples)
    return compile_where(expression_or_function).mask(columns, samples)


def function_mask(function: WhereFunction, columns: Columns, samples: int | None = None) -> np.ndarray:
    """A function predicate's answer, checked: a bool array with one value a sample, else ValueError."""
    count = _length(columns, samples)
    result = np.asarray(function(dict(columns)))
    name = getattr(function, "__name__", repr(function))
    if result.dtype != bool or result.shape != (count,):
        raise ValueError(
            f"where: the function {name} returned {result.dtype} of shape {result.shape}; it must return a "
            f"bool array of the shard's {count} samples (e.g. columns['cost'] < 4096)"
        )
    return result


def _length(columns: Columns, samples: int | None) -> int:
    lengths = {len(values) for values in columns.values()}
    if samples is not None:
        lengths.add(samples)
    if len(lengths) > 1:
        raise ValueError(f"where: columns of different lengths ({sorted(lengths)}): one value a sample each")
    if not lengths:
        raise ValueError("where: no columns and no sample count to evaluate over")
    return lengths.pop()


def _widened(values: np.ndarray) -> np.ndarray:
    values = np.asarray(values)
    if values.dtype.kind == "i" or (values.dtype.kind == "u" and values.dtype.itemsize < 8):
        return values.astype(np.int64)
    if values.dtype.kind == "u" and (not len(values) or int(values.max()) <= np.iinfo(np.int64).max):
        return values.astype(np.int64)
    if values.dtype.kind == "f":
        return values.astype(np.float64)
    return values


def _check_node(node: ast.AST, text: str, names: set[str]) -> None:
    """Refuse what the language does not have; collect the names (the columns read)."""
    ok = (
        ast.Expression,
        ast.BoolOp,
        ast.And,
        ast.Or,
        ast.Compare,
        ast.BinOp,
        ast.Load,
        ast.Tuple,
        ast.List,
        *_BINARY,
        *_COMPARE,
        ast.In,
        ast.NotIn,
    )
    if isinstance(node, ast.Name):
        names.add(node.id)
    elif isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
            _refuse(f"a {type(node.value).__name__} constant", node, text)
    elif isinstance(node, ast.UnaryOp):
        if not isinstance(node.op, (ast.Not, ast.USub, ast.UAdd)):
            _refuse("the operator ~", node, text)
    elif isinstance(node, (ast.Tuple, ast.List)):
        pass  # only as the right of in / not in: the evaluator refuses it anywhere else
    elif isinstance(node, (ast.Not, ast.USub, ast.UAdd)):
        pass
    elif isinstance(node, ast.operator) and not isinstance(node, tuple(_BINARY)):
        _refuse(f"the operator {_SYMBOLS.get(type(node), type(node).__name__)}", node, text)
    elif isinstance(node, ast.cmpop) and not isinstance(node, ok):
        _refuse(f"the comparison {_SYMBOLS.get(type(node), type(node).__name__)}", node, text)
    elif not isinstance(node, ok):
        _refuse(_NAMES.get(type(node), type(node).__name__), node, text)


def _refuse(what: str, node: ast.AST, text: str) -> None:
    segment = ast.get_source_segment(text.strip(), node) if hasattr(node, "lineno") else None
    shown = f" ({segment})" if segment else ""
    raise ValueError(f"where: {what}{shown} is not allowed in {text!r}; allowed: {ALLOWED}")


class _Evaluate(ast.NodeVisitor):
    """Walks a checked tree on numpy arrays; the shapes the checker cannot see are refused here."""

    def __init__(self, text: str, columns: dict[str, np.ndarray]) -> None:
        self.text, self.columns = text, columns

    def generic_visit(self, node: ast.AST) -> Any:
        _refuse(_NAMES.get(type(node), type(node).__name__), node, self.text)

    def visit_Name(self, node: ast.Name) -> Any:
        return self.columns[node.id]

    def visit_Constant(self, node: ast.Constant) -> Any:
        return node.value

    def visit_BinOp(self, node: ast.BinOp) -> Any:
        return _BINARY[type(node.op)](self.visit(node.left), self.visit(node.right))

    def visit_UnaryOp(self, node: ast.UnaryOp) -> Any:
        value = self.visit(node.operand)
        if isinstance(node.op, ast.Not):
            return np.logical_not(self._truth(value, node.operand, "not"))
        return np.negative(value) if isinstance(node.op, ast.USub) else np.positive(value)

    def visit_BoolOp(self, node: ast.BoolOp) -> Any:
        word = "and" if isinstance(node.op, ast.And) else "or"
        values = [self._truth(self.visit(v), v, word) for v in node.values]
        combine = np.logical_and if word == "and" else np.logical_or
        return combine.reduce(np.broadcast_arrays(*values))

    def visit_Compare(self, node: ast.Compare) -> Any:
        left, result = self.visit(node.left), None
        for op, right_node in zip(node.ops, node.comparators, strict=True):
            if isinstance(op, (ast.In, ast.NotIn)):
                right = self._numbers(right_node)
                step = np.isin(left, right, invert=isinstance(op, ast.NotIn))
            else:
                right = self.visit(right_node)
                step = _COMPARE[type(op)](left, right)
            result = step if result is None else np.logical_and(result, step)
            left = right
        return result

    def _numbers(self, node: ast.AST) -> list[Any]:
        if not isinstance(node, (ast.Tuple, ast.List)):
            _refuse("in with something other than a tuple or list of numbers", node, self.text)
        values = [self.visit(item) for item in node.elts]  # type: ignore[attr-defined]
        if any(np.ndim(v) for v in values):
            _refuse("a column inside in (...)", node, self.text)
        return values

    def _truth(self, value: Any, node: ast.AST, word: str) -> np.ndarray:
        value = np.asarray(value)
        if value.dtype != bool:
            _refuse(f"{word} over numbers rather than comparisons", node, self.text)
        return value
