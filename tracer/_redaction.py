"""Redaction at record time: secrets never reach the store or an exporter.

A policy masks the values of sensitive keys in JSON objects, text matching regular expressions,
and whatever a user hook changes. It is applied to every item, attribute, input and output before
they are written; the policy's description is stored with each run.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import json
import logging
import re
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from math import isfinite
from typing import Any

from ._json import capped, compact_json, encode_json

MASK = "[REDACTED]"
_CLEAN_KEPT = 4096  # keys and strings a policy remembers it leaves as they are (bounds its memory)
_CLEAN_LONGEST = 200  # a longer string is checked every time it is seen
_PLAIN = re.compile(r'[ -~]*')  # printable ASCII: what the JSON text shows as is

#: Sensitive JSON keys. A key is sensitive when it ends with one of them, in any case, its words
#: joined by '_', '-' or nothing: "password" covers "db_password" and "newPassword", "secret"
#: "client_secret", "token" "refresh_token" and "accessToken" (but not "max_tokens"), "api_key"
#: "x-api-key" and "OPENAI_API_KEY".
DEFAULT_KEYS = ("api_key", "apikey", "password", "passwd", "passphrase", "secret", "secret_key", "private_key",
                "access_key", "authorization", "token", "access_token")
# the value of a 'name=value' or 'name: value' secret: inside its quotes, if quoted; unless masked already
_SECRET_VALUE = r"[\"']?(?P<secret>(?!\[REDACTED\])(?:(?<=\")[^\"]*|(?<=')[^']*|(?<![\"'])[^\s\"',;&{}\[\]][^\s\"',;&]*))"

_CREDENTIAL_LIKE = r"(?P<secret>(?!\[REDACTED\])(?=[A-Za-z0-9+/=._~\-]{8})[^\s\"'\\,;&{}\[\]][^\s\"'\\,;&]*)"

DEFAULT_PATTERNS = (
    r"sk-[A-Za-z0-9_\-]{16,}",  # OpenAI-style secret keys
    r"(?i)bearer\s+[A-Za-z0-9._\-]{16,}",  # bearer tokens
    r"AKIA[0-9A-Z]{16}",  # AWS access key ids
    r"ASIA[0-9A-Z]{16}",  # AWS temporary access key ids
    r"AIza[0-9A-Za-z_\-]{35}",  # Google API keys
    r"ghp_[A-Za-z0-9]{30,}",  # GitHub personal access tokens (classic) ...
    r"gho_[A-Za-z0-9]{30,}",  # ... OAuth, user-to-server, server-to-server and refresh tokens
    r"ghu_[A-Za-z0-9]{30,}",
    r"ghs_[A-Za-z0-9]{30,}",
    r"ghr_[A-Za-z0-9]{30,}",
    r"github_pat_[A-Za-z0-9_]{22,}",  # GitHub fine-grained tokens
    r"xox[abposr]-[A-Za-z0-9\-]{10,}",  # Slack tokens
    r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*",  # JSON Web Tokens (header.payload.signature)
    # a private key block, whole, or up to where a cut one ends (a quote, a backslash other than an
    # escaped newline: the block inside a JSON text keeps the text JSON)
    r"-----BEGIN[A-Z ]*PRIVATE KEY-----(?:(?!-----END)[^\"'\\]|\\[nrt])*(?:-----END[A-Z ]*PRIVATE KEY-----)?",
    # the password of a URL ('postgresql://app:s3cret@db/x'): only the group named 'secret' is masked
    r"://[^\s/:@\"']*:(?P<secret>[^\s/@\"']+)@",
    # password=... / passwd: ... pasted into text (a config line, a URL query), or a JSON or Python
    # field ('"password": "..."'); a value already masked, or an object or array (a tool parameter's
    # schema), is left as it is (a JSON text keeps its shape)
    r"(?i)passw(?:or)?d[\"']?\s*[=:]\s*(?:\"(?!\[REDACTED\]\")[^\"]*\"|'[^']*'|[^\s\"',;&{}\[\]][^\s\"',;&]*)",
    # an API key or a secret given in text ('OPENAI_API_KEY=...', 'api_key: ...', 'client_secret=...',
    # 'SECRET_KEY=...'): only the value is masked, the name kept (each spelling a pattern of its own, so
    # each starts with a literal the guard looks for: see _literal_guards)
    *(rf"(?i){name}[\"']?\s*[=:]\s*" + _SECRET_VALUE for name in ("api_key", "api-key", "apikey")),
    r"(?i)secret(?:[_\-]?key)?[\"']?\s*[=:]\s*" + _SECRET_VALUE,
    # a credential given as an environment variable, as a tool's env dump prints them
    # ('AWS_SECRET_ACCESS_KEY=...', 'HF_TOKEN=...', 'NPM_TOKEN="..."', 'STRIPE_KEY=...'), or an OAuth
    # token in a URL query ('?access_token=...'): only a value that looks like one (8 or more
    # characters of a token's alphabet: 'SORT_KEY=name' is kept), the name kept
    *(rf"{suffix}[\"']?\s*=\s*[\"']?" + _CREDENTIAL_LIKE for suffix in ("_TOKEN", "_KEY", "_SECRET", "_PAT")),
    *(rf"(?i){name}=" + _CREDENTIAL_LIKE for name in ("access_token", "refresh_token", "id_token")),
    # an HTTP Authorization (or Proxy-Authorization) header's credentials in text ('Authorization:
    # Basic dXNl...', "{'authorization': 'Token ...'}"): the scheme is kept, the credentials masked
    # (up to a quote, a backslash or a separator: a JSON text escaping the header's quotes stays JSON)
    # (with no scheme, only a value that looks like one: 12 or more characters of a token's alphabet,
    # so that 'authorization: none' or 'authorization: the process' in prose is kept)
    r"(?i)authorization(?:\\?[\"'])?\s*[=:]\s*(?:\\?[\"'])?"
    r"(?:(?:basic|token|digest|negotiate|ntlm|apikey|key)\s+|(?=[A-Za-z0-9+/=._~\-]{12}))"
    r"(?P<secret>(?!\[REDACTED\])[^\s\"'\\,;&{}\[\]][^\s\"'\\,;&]*)",
)


@dataclass(frozen=True)
class RedactionPolicy:
    """What to mask before anything is written.

    ``keys``: JSON object keys whose values are replaced by ``[REDACTED]``: a key is sensitive when
    it ends with one of them, in any case, its words joined by ``_``, ``-`` or nothing (``api_key``
    covers ``x-api-key``, ``OPENAI_API_KEY`` and ``apiKey``).
    ``patterns``: regular expressions whose matches in any string are replaced.
    ``hook``: a function applied to every string after the patterns.
    """

    keys: tuple[str, ...] = DEFAULT_KEYS
    patterns: tuple[str, ...] = DEFAULT_PATTERNS
    hook: Callable[[str], str] | None = None
    _compiled: tuple[re.Pattern[str], ...] = field(init=False, repr=False, compare=False)
    _keyset: frozenset[str] = field(init=False, repr=False, compare=False)  # every spelling, lower case
    _key_endings: tuple[str, ...] = field(init=False, repr=False, compare=False)
    _guards: tuple[tuple[str, bool], ...] | None = field(init=False, repr=False, compare=False)
    _guards_each: bool = field(init=False, repr=False, compare=False)
    _key_needles: tuple[str, ...] | None = field(init=False, repr=False, compare=False)
    _key_fields: re.Pattern[str] | None = field(init=False, repr=False, compare=False)
    _key_quoted: tuple[str, ...] = field(init=False, repr=False, compare=False)
    _clean_keys: dict[str, None] = field(init=False, repr=False, compare=False)
    _clean_strings: dict[str, None] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # what the keys and patterns make (compiled, parsed for their guards) is the same for every
        # policy of the same keys and patterns: made once (a blame makes a recorder per re-run)
        derived = _derived(tuple(self.keys), tuple(self.patterns))
        for name, value in zip(_DERIVED, derived, strict=True):
            object.__setattr__(self, name, value)
        # keys that are not sensitive and strings that text() leaves as they are, seen lately
        object.__setattr__(self, "_clean_keys", {})
        object.__setattr__(self, "_clean_strings", {})

    @classmethod
    def none(cls) -> RedactionPolicy:
        """A policy that masks nothing."""
        return cls(keys=(), patterns=())

    @classmethod
    def with_extra(
        cls, keys: Iterable[str] = (), patterns: Iterable[str] = (), hook: Callable[[str], str] | None = None
    ) -> RedactionPolicy:
        """The default policy plus more keys and patterns."""
        return cls(DEFAULT_KEYS + tuple(keys), DEFAULT_PATTERNS + tuple(patterns), hook)

    @property
    def is_noop(self) -> bool:
        """True when the policy can change nothing."""
        return not self._compiled and not self._keyset and self.hook is None

    def describe(self) -> dict[str, Any]:
        """The policy as stored with each run."""
        hook_name = getattr(self.hook, "__qualname__", repr(self.hook)) if self.hook else None
        return {"keys": list(self.keys), "patterns": list(self.patterns), "hook": hook_name}

    def text(self, value: str) -> str:
        """``value`` with every pattern match masked and the hook applied.

        A string that is itself JSON (a tool call's arguments, a JSON tool result) is masked by key
        inside, too: ``'{"password": "x"}'`` keeps its shape and loses the password.
        """
        value = self._keys_inside(value)
        guards = self._guards
        if guards is not None and value.isascii():
            if not self._may_match(value):
                return value if self.hook is None else self.hook(value)
            if self._guards_each:  # only the patterns whose literal the string holds (as it came)
                original, lowered = value, value.lower()
                for pattern, (literal, ignore_case) in zip(self._compiled, guards, strict=True):
                    if literal in (lowered if ignore_case else original):
                        value = masked_matches(pattern, value)
                return value if self.hook is None else self.hook(value)
        for pattern in self._compiled:
            value = masked_matches(pattern, value)
        if self.hook is not None:
            value = self.hook(value)
        return value

    def _keys_inside(self, value: str) -> str:
        """``value`` with the values of sensitive keys masked: by key when it is a JSON object or
        array (re-encoded, its shape kept), else in each of its sensitive key's JSON fields, wherever
        they sit (a fragment pasted into a message: ``'... {"token": "x"} ...'``)."""
        fields = self._key_fields
        if fields is None or len(value) < 2 or '"' not in value:
            return value
        if value.lstrip()[:1] in ("{", "["):
            lowered = value.lower()
            has_key = any(n in lowered for n in self._key_quoted)
            if has_key or "\\u" in value:
                try:
                    parsed = json.loads(value)
                except (ValueError, RecursionError):  # not JSON, or nested deeper than the stack
                    parsed = None
                if isinstance(parsed, dict | list):
                    with contextlib.suppress(RecursionError):  # too deep to write again: masked field
                        return self._masked_json(value, parsed)  # by field below
            if not has_key:
                return value
        elif '":' not in value and '" :' not in value:
            return value
        else:
            lowered = value.lower()
            if not any(n in lowered for n in self._key_quoted):
                return value
        return fields.sub(lambda m: f'"{m.group(1)}"{m.group(2)}"{MASK}"', value)

    def _masked_json(self, value: str, parsed: dict[str, Any] | list[Any]) -> str:
        """The JSON text ``value`` (``parsed``) masked by key, written in the same style."""
        masked = self.value(parsed)
        if masked == parsed:
            return value
        compact = ", " not in value and ": " not in value
        return json.dumps(masked, ensure_ascii=False, separators=(",", ":") if compact else None)

    def json_text(self, value: Any) -> str:
        """``value`` as JSON text with the policy applied: the JSON value of
        ``json.dumps(self.value(value), default=str)``.

        A flat object (a stage's attributes) is checked value by value and written compactly by a
        compiled encoder (see :meth:`_flat_text`). Any other value is encoded first; only when
        :meth:`may_change` the text is the value masked piece by piece and encoded again.
        """
        if type(value) is dict and self.hook is None:
            text = self._flat_text(value)
            if text is not None:
                return text
        try:
            text = encode_json(value)
        except (RecursionError, ValueError):  # nested past the stack, or inside itself: cut where it
            value = capped(value)            # is too deep to write, and written as far as it goes
            text = encode_json(value)
        return encode_json(self.value(value)) if self.may_change(text) else text

    def _flat_text(self, value: dict[Any, Any]) -> str | None:
        """The compact JSON text of a flat object (string keys; strings, ints, bools, None and
        finite floats) that masking leaves as it is; None for any other value.

        Each key is checked as :meth:`value` checks it and each string as :meth:`text` masks it;
        keys and short strings that pass are remembered, so the keys and the recurring values of
        a stage's attributes are looked up, not searched. (Only without a hook: a hook may change
        a string it passed before.)
        """
        clean_keys, clean_strings = self._clean_keys, self._clean_strings
        values = value.values()
        if not set(map(type, values)) <= _FLAT_KINDS:
            return None  # a list, a dict, a str subclass: not flat (what the loop below finds too)
        # the usual case, checked in C: keys seen before, strings seen before
        if value.keys() <= clean_keys.keys() and set(map(type, value)) <= _STR_KIND:
            numbers = set(values).difference(clean_strings)  # and None, and strings not seen before
            numbers.discard(None)
            if str not in set(map(type, numbers)):
                try:
                    finite = all(map(isfinite, numbers))  # inf or NaN: json writes Infinity / NaN, msgspec null
                except OverflowError:  # an int too large for a float (finite): the loop below sees to it
                    finite = None
                if finite is not None:
                    return compact_json(value) if finite else None
        for key, item in value.items():
            if type(key) is not str:
                return None
            if key not in clean_keys:
                if key.lower().endswith(self._key_endings):
                    return None
                _remember(clean_keys, key)
            kind = type(item)
            if kind is str:
                if item not in clean_strings:
                    if self.text(item) != item:
                        return None
                    if len(item) <= _CLEAN_LONGEST:
                        _remember(clean_strings, item)
            elif kind is float:
                if item - item != 0.0:  # inf or NaN: json writes Infinity / NaN, msgspec null
                    return None
            elif kind is not int and kind is not bool and item is not None:
                return None
        return compact_json(value)

    def may_change(self, json_text: str) -> bool:
        """False when masking the JSON value whose text is ``json_text`` is sure to change nothing.

        The text is searched once for the sensitive keys (as ``"key":``) and the patterns' leading
        literals. A text with non-ASCII characters or escapes, a hook, or a pattern without a
        leading literal always counts as a possible change.
        """
        needles = self._key_needles
        if needles == () and not self._compiled and self.hook is None:  # a policy that masks nothing
            return False
        if needles is None or self.hook is not None or not json_text.isascii() or "\\u" in json_text:
            return True
        lowered = json_text.lower()
        for needle in needles:
            if needle in lowered:
                return True
        return self._may_match(json_text, lowered)

    def _may_match(self, value: str, lowered: str | None = None) -> bool:
        """False when ``value`` (ASCII; ``lowered`` its lower case, if known) holds none of the
        patterns' leading literals."""
        for literal, ignore_case in self._guards or ():
            if ignore_case:
                lowered = value.lower() if lowered is None else lowered
                if literal in lowered:
                    return True
            elif literal in value:
                return True
        return False

    def value(self, value: Any) -> Any:
        """A JSON value with sensitive keys and matching strings masked (a new value; the input is kept).

        The walk keeps a stack of its own, so a value nested deeper than Python's stack allows (a
        model's or a user's JSON of a thousand levels) is masked like any other: each container is
        made empty when it is met and filled when it is taken from the stack (a container inside
        itself is cut there).
        """
        endings = self._key_endings
        if type(value) is dict:  # the usual case, a flat object (an item's body): no walk to set up
            for v in value.values():
                if isinstance(v, _CONTAINERS):
                    break
            else:
                text = self.text
                return {k: MASK if isinstance(k, str) and k.lower().endswith(endings)
                        else text(v) if isinstance(v, str) else v for k, v in value.items()}
        stack: list[tuple[Any, Any, bool]] = []  # (original, its copy, names are schemas' names)
        open_ids: set[int] = set()  # the containers being filled, to stop at a cycle

        def copy(original: Any, schema_names: bool = False) -> Any:
            if isinstance(original, str):
                return self.text(original)
            if not isinstance(original, dict | list | tuple):
                return original
            if id(original) in open_ids:
                return "<circular reference>"
            made: Any = {} if isinstance(original, dict) else []
            stack.append((original, made, schema_names))
            return made

        made_root = copy(value)
        while stack:
            original, made, schema_names = stack.pop()
            if made is None:  # the marker that every part of ``original`` has been filled
                open_ids.discard(id(original))
                continue
            open_ids.add(id(original))
            stack.append((original, None, False))
            if isinstance(original, dict):
                for k, v in original.items():
                    if schema_names:
                        made[k] = copy(v)
                    elif k in _SCHEMA_MAPS and isinstance(v, dict) and _is_schemas(v):
                        made[k] = copy(v, schema_names=True)
                    elif isinstance(k, str) and k.lower().endswith(endings):
                        made[k] = MASK
                    else:
                        made[k] = copy(v)
            else:
                made.extend(copy(v) for v in original)
        return made_root



_CONTAINERS = (dict, list, tuple)

#: The JSON-schema keywords whose keys are names, each naming a schema (a tool's parameters): a
#: parameter named "password" is not a password, and masking its schema broke the tool's recorded
#: definition (replay and re-runs refused it: "'[REDACTED]' is not of type 'object'").
_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions"})
_SCHEMA_WORDS = frozenset({"type", "$ref", "enum", "const", "anyOf", "oneOf", "allOf", "not", "items",
                           "properties", "description", "title", "format"})


def _is_schemas(value: Any) -> bool:
    """True when ``value`` maps names to JSON schemas (objects with a schema keyword each)."""
    return isinstance(value, dict) and all(
        isinstance(schema, dict) and not _SCHEMA_WORDS.isdisjoint(schema) for schema in value.values())


def _key_spellings(key: str) -> set[str]:
    """``key`` in lower case, its words (split at ``_``, ``-`` and spaces) joined by ``_``, ``-`` and
    nothing: the endings a sensitive key is known by (``api_key``: ``api_key``, ``api-key``, ``apikey``)."""
    lowered = key.lower()
    words = [w for w in re.split(r"[_\-\s]+", lowered) if w]
    return {lowered} | ({sep.join(words) for sep in ("_", "-", "")} if words else set())


def masked_matches(pattern: re.Pattern[str], value: str) -> str:
    """``value`` with each match of ``pattern`` replaced by the mask, or only its group named
    ``secret`` when the pattern has one (a URL's password, its scheme, user and host kept)."""
    group = pattern.groupindex.get("secret")
    if group is None:
        return pattern.sub(MASK, value)
    return pattern.sub(lambda m: m.group(0)[:m.start(group) - m.start()] + MASK + m.group(0)[m.end(group) - m.start():],
                       value)


_FLAT_KINDS = frozenset({str, int, bool, float, type(None)})
_STR_KIND = frozenset({str})


def _remember(seen: dict[str, None], text: str) -> None:
    if len(seen) >= _CLEAN_KEPT:
        seen.clear()
    seen[text] = None


_DERIVED = ("_compiled", "_keyset", "_key_endings", "_guards", "_guards_each", "_key_needles", "_key_fields",
            "_key_quoted")


@functools.lru_cache(maxsize=64)
def _derived(keys: tuple[str, ...], patterns: tuple[str, ...]) -> tuple[Any, ...]:
    """What a policy of ``keys`` and ``patterns`` works with, in the order of ``_DERIVED``."""
    compiled = tuple(re.compile(p) for p in patterns)
    spellings = {v for k in keys for v in _key_spellings(k)}
    # (a spelling that ends with another adds nothing: 'access_token' ends with 'token')
    keyset = frozenset(v for v in spellings if not any(v != w and v.endswith(w) for w in spellings))
    guards = _literal_guards(compiled) if compiled else None
    # each pattern need only scan a string holding its own literal, unless masking could make a
    # literal that was not there: one inside the mask, or across its edge (holding '[' or ']')
    guards_each = guards is not None and all(
        "[" not in g and "]" not in g and g.lower() not in MASK.lower() for g, _ in guards)
    # what json_text() looks for in a JSON text before masking it value by value: each key as
    # it appears in the text, and the patterns' leading literals (None: always mask the values)
    plain = all(_PLAIN.fullmatch(k) and '"' not in k and "\\" not in k for k in keyset) and all(
        _PLAIN.fullmatch(g) and '"' not in g and "\\" not in g for g, _ in guards or ()
    )
    # (a key may also sit inside a JSON string value, escaped: '"args": "{\\"password\\": ..."')
    needles = tuple(n for k in keyset for n in (f'{k}":', f'{k}\\"')) \
        if plain and (guards or not compiled) else None
    # a sensitive key's field in a text that is not JSON as a whole ('... {"token": "x"} ...')
    fields = re.compile(
        r'"([^"\\]*?(?:' + "|".join(re.escape(k) for k in sorted(keyset)) + r'))"(\s*:\s*)'
        r'(?:"(?!\[REDACTED\]")(?:[^"\\]|\\.)*"|[^\s"{\[,}\]][^\s,}\]]*)',
        re.IGNORECASE,
    ) if keyset else None
    return (compiled, keyset, tuple(sorted(keyset)), guards, guards_each, needles, fields,
            tuple(f'{k}"' for k in sorted(keyset)))


def _literal_guards(compiled: tuple[re.Pattern[str], ...]) -> tuple[tuple[str, bool], ...] | None:
    """For each pattern, the literal text every match starts with (lowercased, with True, when the
    pattern ignores case); None when some pattern starts with no literal.

    An ASCII string that contains none of them cannot match any pattern, so it skips the regex
    scans: a substring search is several times faster than a scan, and most strings hold no secret.
    """
    try:  # the parser re itself uses (private, so looked up at run time); absent: no guards
        _parser = importlib.import_module("re._parser")
        literal = importlib.import_module("re._constants").LITERAL
    except (ImportError, AttributeError):  # pragma: no cover - a Python whose re is laid out differently
        return None
    guards = []
    for pattern in compiled:
        try:
            parsed = _parser.parse(pattern.pattern, pattern.flags)
        except Exception:  # pragma: no cover - it compiled, so it parses; be safe anyway
            return None
        prefix = []
        for op, arg in parsed:
            if op is not literal or not 0 < arg < 128:
                break
            prefix.append(chr(arg))
        if not prefix:
            return None
        ignore_case = bool(parsed.state.flags & re.IGNORECASE)
        text = "".join(prefix)
        guards.append((text.lower() if ignore_case else text, ignore_case))
    return tuple(guards)


def mask_footprint_log_records(policy: RedactionPolicy | None = None) -> None:
    """Mask credentials in every standard-library log record of a ``footprint`` logger.

    The message is formatted and masked when the record is made, and an exception's traceback is
    rendered and masked then too: an error text that quotes an API key (a provider's answer, a
    DSN) never reaches a log handler. Installed once, when ``tracer`` is imported; records of
    other loggers are untouched.
    """
    global _log_policy
    _log_policy = policy if policy is not None else RedactionPolicy()
    previous = logging.getLogRecordFactory()
    if getattr(previous, "_footprint_masking", False):
        return

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        if record.name == "footprint" or record.name.startswith("footprint."):
            _mask_record(record, _log_policy)
        return record

    factory._footprint_masking = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(factory)


def _mask_record(record: logging.LogRecord, policy: RedactionPolicy) -> None:
    try:
        message = record.getMessage()
    except Exception:  # a bad format string: logging reports it itself later
        return
    masked = policy.text(message)
    if masked != message:
        record.msg, record.args = masked, None
    if record.exc_info and record.exc_info[1] is not None:
        text = "".join(traceback.format_exception(*record.exc_info)).rstrip()
        record.exc_text = policy.text(text)
        record.exc_info = None


_log_policy = RedactionPolicy()
mask_footprint_log_records()
