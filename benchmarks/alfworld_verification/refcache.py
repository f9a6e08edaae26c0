"""Output-preserving speed-ups and rule-coverage instrumentation for the *reference* engine.

Used only by the differential fuzzer (:mod:`.fuzz`), never by the compiled engine. Inside
:func:`instrumented_reference`:

* the tatsu parses the reference repeats on every step are memoized: the grammar's symbol strings
  (``ContextSensitiveGrammar.derive`` parses each action's command template and feedback rule anew,
  ~29 times a step) and conjunctive queries (``Rule.parse_conjunctive_query``, once per rule
  condition and list query); a memoized symbol list is handed out as a deep copy, because
  ``derive`` writes contexts into the symbols it gets;
* Fast Downward's translator (``fast_downward.pddl2sas``) is memoized per (domain, problem,
  options): TextWorld translates each problem four times per load+reset and only reads the result;
* ``ContextSensitiveGrammar.replace`` is replaced by an equivalent that records which branch of
  which rule it took (the first whose condition holds, as the original's ``filter(...)[0]``).

Every replacement returns exactly what the original would; the fuzzer checks it by replaying golden
traces (recorded without any of this) through the instrumented reference (``check_golden``).
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["RuleCoverage", "instrumented_reference"]


class RuleCoverage(Counter):
    """``(rule name, branch index) -> times the reference derived that branch``."""


@contextmanager
def instrumented_reference() -> Iterator[RuleCoverage]:
    """Patch TextWorld / Fast Downward in-process for the duration; yields the live coverage counter."""
    import fast_downward
    from textworld.envs.pddl import textgen
    from textworld.logic import Rule

    coverage = RuleCoverage()
    parse_symbols = textgen._parse_and_convert
    parse_query = Rule.parse_conjunctive_query
    translate = fast_downward.pddl2sas
    replace = textgen.ContextSensitiveGrammar.replace
    symbols_cache: dict[tuple[Any, ...], Any] = {}
    query_cache: dict[str, Any] = {}
    sas_cache: dict[tuple[Any, ...], Any] = {}

    def cached_symbols(text: str, rule_name: str = "symbols", **kwargs: Any) -> Any:
        key = (text, rule_name, tuple(sorted(kwargs.items())))
        if key not in symbols_cache:
            symbols_cache[key] = parse_symbols(text, rule_name=rule_name, **kwargs)
        return copy.deepcopy(symbols_cache[key])

    def cached_query(cls: type, expr: str) -> Any:
        if expr not in query_cache:
            query_cache[expr] = parse_query(expr)
        return query_cache[expr]

    def cached_translate(domain: str, problem: str, verbose: bool = False, optimize: bool = False) -> Any:
        key = (domain, problem, verbose, optimize)
        if key not in sas_cache:
            sas_cache[key] = translate(domain, problem, verbose=verbose, optimize=optimize)
        return sas_cache[key]

    def recording_replace(self: Any, start: Any) -> list[Any]:
        rules = self._rules.get(str(start))
        if not rules:
            raise textgen.CSGUnknownSymbolError(start)
        state, mapping = start.context["state"], start.context["mapping"]
        for index, rule in enumerate(rules):  # noqa: B007 (the rule that breaks is read after the loop)
            if not rule.condition or any(
                True for _ in state.all_assignments(Rule.parse_conjunctive_query(rule.condition), mapping)
            ):
                break
        else:
            raise IndexError("list index out of range")  # what the original's rules[0] raises
        coverage[(str(start), index)] += 1
        symbols = copy.deepcopy(rule.rhs)
        for symbol in symbols:
            symbol.context = textgen.copy_context(start.context)
        return symbols

    textgen._parse_and_convert = cached_symbols
    Rule.parse_conjunctive_query = classmethod(cached_query)  # type: ignore[method-assign,assignment]
    fast_downward.pddl2sas = cached_translate
    textgen.ContextSensitiveGrammar.replace = recording_replace  # type: ignore[method-assign]
    try:
        yield coverage
    finally:
        textgen._parse_and_convert = parse_symbols
        Rule.parse_conjunctive_query = parse_query  # type: ignore[method-assign]
        fast_downward.pddl2sas = translate
        textgen.ContextSensitiveGrammar.replace = replace  # type: ignore[method-assign]
