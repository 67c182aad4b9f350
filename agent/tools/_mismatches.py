"""Why a value does not match a JSON schema, said so that a model can correct it.

jsonschema reports a value that fits none of an ``anyOf``'s or a ``oneOf``'s options (an optional
pydantic model, a union, a discriminated union) as "... is not valid under any of the given
schemas", which names no field. :func:`mismatches` names them: it follows the option the value
comes nearest to (the one the discriminator names; else the one whose JSON type it has and that
fails only deeper in), and when no option is nearest it says why each option refuses it.
"""

from __future__ import annotations

from typing import Any

from ._schema import kind_text

#: an option's refusal in a list of them: this many of its errors, then "…"
_REASONS_PER_OPTION = 3


def mismatches(validator: Any, value: Any, limit: int = 5) -> list[tuple[str, str]]:
    """Each way ``value`` breaks the schema of ``validator`` (a jsonschema validator) as (the path of
    the value that is wrong, ``a/0/b``, '' for ``value`` itself; what is wrong), at most ``limit``."""
    found: list[tuple[tuple[Any, ...], str]] = []
    for error in sorted(validator.iter_errors(value), key=lambda e: list(e.path)):
        found.extend(_explained(error))
        if len(found) >= limit:
            break
    return [("/".join(map(str, path)), text) for path, text in found[:limit]]


def _explained(error: Any) -> list[tuple[tuple[Any, ...], str]]:
    """``error`` as (the absolute path of what is wrong, what is wrong): those of the option nearest, for
    an anyOf or a oneOf."""
    if not error.context:  # not an anyOf or a oneOf (or a oneOf the value fits more than one option of)
        return [(tuple(error.absolute_path), error.message)]
    options: dict[int, list[Any]] = {}
    for sub in error.context:
        options.setdefault(sub.relative_schema_path[0], []).append(sub)
    written = error.schema.get(error.validator) or []
    nearest = _nearest(error, options, written)
    if nearest is not None:
        return [found for sub in sorted(nearest, key=lambda e: list(e.path)) for found in _explained(sub)]
    depth = len(error.absolute_path)
    reasons = "; ".join(f"option {n + 1}{_label(written, n)}: {_reasons(subs, depth)}"
                        for n, subs in sorted(options.items()))
    return [(tuple(error.absolute_path), f"fits none of its options ({reasons})")]


def _nearest(error: Any, options: dict[int, list[Any]], written: Any) -> list[Any] | None:
    """The errors of the option ``error.instance`` comes nearest to, or None when two come as near."""
    candidates = list(options.items())
    key = (error.schema.get("discriminator") or {}).get("propertyName")  # pydantic writes one (OpenAPI's)
    if isinstance(key, str) and isinstance(error.instance, dict) and key in error.instance:
        named = [(n, subs) for n, subs in candidates if not any(list(e.path) == [key] for e in subs)]
        candidates = named or candidates
    ranked = sorted(((_fit(_option(written, n), subs), subs) for n, subs in candidates), key=lambda r: r[0],
                    reverse=True)
    if len(ranked) == 1 or ranked[0][0] > ranked[1][0]:
        return ranked[0][1]
    return None


def _fit(option: dict[str, Any], errors: list[Any]) -> tuple[bool, int]:
    """How near an option came: the value is of the JSON type the option names, then how deep in its
    first error is (an enum or an option of no type names none: the value may be anything it says)."""
    of_its_type = "type" in option and not any(e.validator == "type" and not e.path for e in errors)
    return of_its_type, min(len(e.path) for e in errors)


def _option(written: Any, n: int) -> dict[str, Any]:
    option = written[n] if isinstance(written, list) and n < len(written) else None
    return option if isinstance(option, dict) else {}


def _label(written: Any, n: int) -> str:
    option = _option(written, n)
    name = option.get("title") if isinstance(option.get("title"), str) else kind_text(option, "|")
    return f" ({name})" if name else ""


def _reasons(errors: list[Any], depth: int) -> str:
    """An option's errors, shallowest first, each path from the value the options are for (``depth`` deep)."""
    ordered = sorted(errors, key=lambda e: (len(e.path), list(e.path)))
    texts = []
    for error in ordered[:_REASONS_PER_OPTION]:
        path, text = _explained(error)[0]
        texts.append(f"{'/'.join(map(str, path[depth:]))}: {text}" if path[depth:] else text)
    return ", ".join(texts) + (", …" if len(ordered) > _REASONS_PER_OPTION else "")
