"""The one reader of repeatable KEY=VALUE flags (`--model-arg`, `--dataloader-arg`, `--sampler-option`,
`--node-selector`), with one value rule (issue 56: four parsers had three rules, so `x=1` was a number to one flag
and text to another).

The rule (VALUE_RULE, quoted in each flag's --help): a value is read as a Python literal (a number, True/False,
None, a quoted string, a list, a dict: `ast.literal_eval`), with true/false also taken as booleans (the spelling
of JSON and YAML, which the dataloader and sampler flags took before: a shell user's `shuffle=false` must not
arrive as the truthy text 'false'); anything else is kept as the text given. `text=True` keeps every value as
text (Kubernetes labels are strings: `zone=1` is the label value '1').

Bad input is one line naming the flag, what is wrong and what to do: no '=', an empty key, a key given twice, a
value too long or too deeply nested to read as a literal.
"""
from __future__ import annotations

import ast
from typing import Any, Iterable

from ..errors import UserInputError

VALUE_RULE = ("VALUE is read as a Python literal (3, 0.5, True, None, 'text', [1, 2], {'a': 1}; true/false too), "
              "else kept as text")
MAX_LITERAL = 10_000  # characters of a value read as a Python literal (longer ones exhausted memory before)
BOOLEANS = {"true": True, "false": False}


def parse_pairs(values: Iterable[str], flag: str, *, text: bool = False) -> dict[str, Any]:
    """The KEY=VALUE items of a repeatable `flag` as a dict, in the order given (keys stripped of spaces), each value
    read by the one rule (VALUE_RULE), or kept as text with `text=True`."""
    out: dict[str, Any] = {}
    for item in values:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            what = "no '='" if not sep else "an empty key"
            raise UserInputError(f"{flag} {item!r}: give KEY=VALUE ({what}), e.g. {flag} name=value")
        value = raw if text else read_value(raw, flag)
        if key in out:
            raise UserInputError(f"{flag}: {key} is given twice ({out[key]!r} and {value!r}): give it once")
        out[key] = value
    return out


def read_value(raw: str, flag: str) -> Any:
    """One value by the rule: a Python literal, true/false, else the text itself. A literal too long or too deeply
    nested to read is one line (it exhausted memory or the parser's recursion before)."""
    if raw.strip().lower() in BOOLEANS:
        return BOOLEANS[raw.strip().lower()]
    if len(raw) > MAX_LITERAL:
        raise UserInputError(f"a {flag} value of {len(raw):,} characters is past the {MAX_LITERAL:,} taken: pass "
                             "large settings in a file your code reads")
    try:
        return ast.literal_eval(raw)
    except (ValueError, SyntaxError, TypeError):  # TypeError: an unhashable dict key, {[1]: 2}
        return raw
    except (MemoryError, RecursionError):
        raise UserInputError(f"a {flag} value nests too deeply to read ({raw[:40]}...): pass it in a file your code "
                             "reads") from None


__all__ = ["MAX_LITERAL", "VALUE_RULE", "parse_pairs", "read_value"]
