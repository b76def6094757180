"""The Drain log parser: group log lines, one at a time, by the statement that wrote them.

Drain is the algorithm of He, Zhu, Zheng and Lyu, "Drain: An Online Log Parsing Approach
with Fixed Depth Tree" (ICWS 2017, doi:10.1109/ICWS.2017.13). A line is split into tokens at
whitespace; a fixed-depth prefix tree picks a leaf by the line's token count, then by its
first `prefix_tokens` tokens; among the templates (log groups) of that leaf, the line joins
the most similar one if at least `similarity` of its tokens are equal position by position,
and the positions where they differ become the wildcard `<*>`. Otherwise the line starts a
template of its own. Its rules, as the paper gives them and drain3 0.9.11 (which this
replaces, with the same results) implements them:

* a template's similarity to a line is the share of positions where the template's token
  is not `<*>` and equals the line's; ties go to the template with more `<*>`, then to the
  older one;
* a prefix token with a digit in it goes down the `<*>` branch (numbers are parameters);
* a tree node has at most `max_children` children; once full, new tokens go down `<*>`;
* a search follows the line's token where the tree has it, else the `<*>` branch.

Templates only ever widen, so every line added matches its template from then on (with
`<*>` read as any one token). Pure: no I/O, no clock, no randomness; the same lines in the
same order give the same templates and ids. What varies inside a token (addresses,
timestamps) is masked before, by `setpoint.insight.templates`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

WILDCARD = "<*>"
"""A template's token that stands for any one token of a line."""


@dataclass(frozen=True)
class MinedLine:
    """A line's template: its id (stable for the parser's life, from 1), text, and whether this
    line is the first one of that template."""

    template_id: int
    template: str
    first_seen: bool


@dataclass(slots=True)
class _Group:
    """A log group: the lines of one template."""

    id: int
    tokens: tuple[str, ...]


@dataclass(slots=True)
class _Node:
    """A node of the prefix tree; leaves hold groups, oldest first."""

    children: dict[str, _Node] = field(default_factory=dict)
    groups: list[_Group] = field(default_factory=list)


class Drain:
    """One parse tree and its templates; `add` one line at a time.

    `prefix_tokens` is the number of leading tokens that pick a leaf (drain3's and
    logparser's `depth` counts the root, the length layer and the leaf besides: their
    default depth 4 is one prefix token)."""

    def __init__(
        self, *, similarity: float = 0.4, prefix_tokens: int = 1, max_children: int = 100
    ) -> None:
        if not 0.0 <= similarity <= 1.0:
            raise ValueError(f"similarity must be within [0, 1], not {similarity}")
        if prefix_tokens < 0 or max_children < 1:
            raise ValueError("prefix_tokens must be >= 0 and max_children >= 1")
        self.similarity = similarity
        self.prefix_tokens = prefix_tokens
        self.max_children = max_children
        self._by_length: dict[int, _Node] = {}
        self._groups: list[_Group] = []

    def add(self, line: str) -> MinedLine:
        """Parse `line` (split at whitespace) into the tree; return its template."""
        tokens = tuple(line.split())
        group = self._search(tokens)
        if group is None:
            group = _Group(len(self._groups) + 1, tokens)
            self._groups.append(group)
            self._insert(group)
            return MinedLine(group.id, " ".join(group.tokens), first_seen=True)
        group.tokens = tuple(
            t if t == u else WILDCARD for t, u in zip(group.tokens, tokens, strict=True)
        )
        return MinedLine(group.id, " ".join(group.tokens), first_seen=False)

    @property
    def template_count(self) -> int:
        return len(self._groups)

    @property
    def templates(self) -> list[str]:
        """Every template, oldest first (a template's id is its place in this list + 1)."""
        return [" ".join(g.tokens) for g in self._groups]

    def _prefix(self, tokens: tuple[str, ...]) -> tuple[str, ...]:
        """The tokens that choose a leaf below the length layer (never a line's last one)."""
        return tokens[: min(self.prefix_tokens, len(tokens) - 1)]

    def _search(self, tokens: tuple[str, ...]) -> _Group | None:
        node = self._by_length.get(len(tokens))
        if node is None:
            return None
        if not tokens:
            return node.groups[0]  # the empty line has one template
        for token in self._prefix(tokens):
            child = node.children.get(token)
            if child is None:
                child = node.children.get(WILDCARD)
            if child is None:
                return None
            node = child
        return self._most_similar(node.groups, tokens)

    def _most_similar(self, groups: list[_Group], tokens: tuple[str, ...]) -> _Group | None:
        best: _Group | None = None
        best_score = (-1.0, -1)
        for group in groups:
            equal = wildcards = 0
            for t, u in zip(group.tokens, tokens, strict=True):
                if t == WILDCARD:
                    wildcards += 1
                elif t == u:
                    equal += 1
            score = (equal / len(tokens), wildcards)
            if score > best_score:
                best, best_score = group, score
        return best if best_score[0] >= self.similarity else None

    def _insert(self, group: _Group) -> None:
        node = self._by_length.setdefault(len(group.tokens), _Node())
        for token in self._prefix(group.tokens):
            node = self._child_for(node, token)
        node.groups.append(group)

    def _child_for(self, node: _Node, token: str) -> _Node:
        """The child a new template's `token` goes down, made if needed."""
        children = node.children
        if token in children:
            return children[token]
        full = len(children) + (WILDCARD not in children) >= self.max_children
        if full or any(c.isdigit() for c in token):
            return children.setdefault(WILDCARD, _Node())
        return children.setdefault(token, _Node())
