"""Redaction at record time: keys, patterns and a hook; the secret never reaches the file."""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from tracer import ContextItem, Item, Origin, Recorder, RedactionPolicy, Store
from tracer._redaction import _SCHEMA_MAPS, MASK, _is_schemas, masked_matches

SECRET_KEY = "sk-live-4f9a8b7c6d5e4f3a2b1c"
SSN = "123-45-6789"
CODENAME = "PROJECT-NIGHTJAR"


def test_key_pattern_and_hook_rules() -> None:
    policy = RedactionPolicy.with_extra(
        keys=["ssn"], patterns=[r"\d{3}-\d{2}-\d{4}"], hook=lambda s: s.replace(CODENAME, "[CODENAME]")
    )
    assert policy.value({"api_key": "anything", "Password": "x", "user": {"SSN": "1"}, "n": 3}) == {
        "api_key": MASK, "Password": MASK, "user": {"SSN": MASK}, "n": 3,
    }
    assert policy.text(f"key {SECRET_KEY} and {SSN} for {CODENAME}") == f"key {MASK} and {MASK} for [CODENAME]"
    assert policy.text("Authorization: Bearer abcdefghijklmnopqrstuvwxyz") == f"Authorization: {MASK}"
    assert policy.text("login with PASSWORD=hunter2hunter2, then password: s3cr3t; url ?passwd=x&u=1") == \
        f"login with {MASK}, then {MASK}; url ?{MASK}&u=1"
    assert policy.text("the password is long") == "the password is long"  # no value given: nothing to mask
    # a JSON field pasted into a message (the text as a whole is not JSON): the quoted value goes
    # its value is masked by key, the field keeping its shape (any sensitive key, any JSON scalar)
    assert policy.text('my settings: {"user": "ada", "Password" : "hunter 2"} ok') == \
        f'my settings: {{"user": "ada", "Password" : "{MASK}"}} ok'
    assert policy.text('use {"token": "t-9\\"q", "API_KEY": 123, "secret": null, "user": "ada"}.') == \
        f'use {{"token": "{MASK}", "API_KEY": "{MASK}", "secret": "{MASK}", "user": "ada"}}.'
    assert policy.text('max token: 4096, {"max_tokens": 4096}') == 'max token: 4096, {"max_tokens": 4096}'
    assert policy.text('{"x": 1} and "secret": {"nested": "kept"}') == '{"x": 1} and "secret": {"nested": "kept"}'
    assert policy.text("config {'passwd': 'x y'}") == f"config {{'{MASK}}}"
    assert policy.text('{"password": "x"}') == f'{{"password": "{MASK}"}}'  # whole JSON: masked by key, shape kept
    assert RedactionPolicy.none().is_noop and not policy.is_noop
    assert policy.describe()["hook"] == "test_key_pattern_and_hook_rules.<locals>.<lambda>"


def test_a_key_ending_in_a_sensitive_key_is_sensitive_in_any_case_and_spelling() -> None:
    """'db_password', 'client_secret', 'refresh_token', 'x-api-key', 'accessToken' hold secrets as
    'password' does (they were stored as they were); 'max_tokens' and 'secret_name' do not. A JSON
    text keeps its shape: '"echo_password": "x"' was cut to '"echo_[REDACTED]}' by the text pattern."""
    policy = RedactionPolicy()
    secret = {"db_password": "p1", "client_secret": "c1", "refresh_token": "r1", "x-api-key": "k1",
              "OPENAI_API_KEY": "k2", "apiKey": "k3", "accessToken": "a1", "private_key": "pk", "passwd": "pw"}
    kept = {"max_tokens": 5, "input_tokens": 3, "token_count": 2, "secret_name": "n", "user": "ada"}
    assert policy.value({**secret, **kept}) == {**dict.fromkeys(secret, MASK), **kept}
    text = json.dumps({"ok": True, "echo_password": "hunter2", "nested": {"Refresh-Token": "r2"}})
    assert json.loads(policy.text(text)) == {"ok": True, "echo_password": MASK, "nested": {"Refresh-Token": MASK}}
    assert json.loads(policy.json_text({"user_password": "p", "n": 1})) == {"user_password": MASK, "n": 1}
    assert policy.may_change('{"clientSecret":"x"}') and not policy.may_change('{"max_tokens":1}')
    assert policy.text('pasted {"db_password": "x y", "user": "a"} here') == \
        f'pasted {{"db_password": "{MASK}", "user": "a"}} here'


def test_a_tool_parameter_named_password_keeps_its_schema() -> None:
    """A JSON schema's 'properties' (and '$defs') name parameters: their schemas are kept, the
    values inside them still masked; an object under 'properties' that is not schemas is masked as
    any other object."""
    policy = RedactionPolicy()
    definition = {"name": "login", "parameters": {
        "type": "object", "required": ["password"],
        "properties": {"password": {"type": "string"}, "api_key": {"type": "string", "default": SECRET_KEY}},
        "$defs": {"Token": {"type": "object", "properties": {"value": {"type": "string"}}}}}}
    masked = policy.value(definition)
    assert masked["parameters"]["properties"]["password"] == {"type": "string"}
    assert masked["parameters"]["properties"]["api_key"] == {"type": "string", "default": MASK}
    assert masked["parameters"]["$defs"] == definition["parameters"]["$defs"]
    assert json.loads(policy.text(json.dumps(definition))) == masked  # the JSON text keeps its shape
    assert policy.value({"properties": {"password": "x"}}) == {"properties": {"password": MASK}}
    assert policy.value({"properties": {"password": {"value": "x"}}}) == {"properties": {"password": MASK}}


def test_an_api_key_or_secret_given_in_text_loses_its_value_and_keeps_its_name() -> None:
    policy = RedactionPolicy()
    assert policy.text("my api_key: qwertyuiop12345, ok") == f"my api_key: {MASK}, ok"
    assert policy.text("OPENAI_API_KEY=abcdefgh1234 python x.py") == f"OPENAI_API_KEY={MASK} python x.py"
    assert policy.text("OPENAI_API_KEY=sk-abcdefghijklmnopqrstu") == f"OPENAI_API_KEY={MASK}"
    assert policy.text("x api-key='a b' y") == f"x api-key='{MASK}' y"
    assert policy.text("export SECRET_KEY=abcd; ?client_secret=zz&x=1") == \
        f"export SECRET_KEY={MASK}; ?client_secret={MASK}&x=1"
    assert policy.text('{"api_key": "v"}') == f'{{"api_key": "{MASK}"}}'
    assert policy.text("the secret is out, secrets: none") == "the secret is out, secrets: none"


def test_the_secret_is_absent_from_the_whole_file(tmp_path: Path) -> None:
    path = tmp_path / "s.duckdb"
    store = Store.open(path)
    policy = RedactionPolicy.with_extra(
        keys=["ssn"], patterns=[r"\d{3}-\d{2}-\d{4}"], hook=lambda s: s.replace(CODENAME, "[CODENAME]")
    )
    recorder = Recorder(store, redaction=policy)
    run = recorder.start_run(agent="a", input=f"my key is {SECRET_KEY}", attributes={"ssn": SSN},
                             session_id="s1")
    with run.stage("input") as stage:
        user = stage.output(Item.of_text("user", f"my key is {SECRET_KEY}, ssn {SSN}, about {CODENAME}"),
                            origin_kind="user")
    with run.stage("tool", "lookup", after=[stage]) as tool:
        tool.inputs([ContextItem(Item("tool_call", {"id": "1", "name": "lookup",
                                                    "arguments": {"ssn": SSN, "q": CODENAME}}),
                                 Origin("stage", run.id, stage.id))])
        tool.set(api_key=SECRET_KEY, note=f"looked up {SSN}")
        result = tool.output(Item("tool_result", {"call_id": "1", "content": f"record of {SSN}"}))
    with run.stage("inference", after=[tool]) as inference:
        inference.inputs([user, result])
        inference.output(Item.of_text("assistant", f"Your key {SECRET_KEY} works."))
    run.end("answered", output=f"Your key {SECRET_KEY} works.", error=None)
    store.close()

    raw = path.read_bytes()
    wal = Path(f"{path}.wal")
    raw += wal.read_bytes() if wal.exists() else b""
    for secret in (SECRET_KEY, SSN, CODENAME):
        assert secret.encode() not in raw, f"{secret} reached the store file"
    with Store.open(path, read_only=True) as reader:
        data = reader.load_run(run.id)
        texts = [i.text for i in data.items.values()]
        assert f"my key is {MASK}, ssn {MASK}, about [CODENAME]" in texts
        assert data.run.input == f"my key is {MASK}" and data.run.attributes == {"ssn": MASK}
        assert data.stage(tool.id).attributes == {"api_key": MASK, "note": f"looked up {MASK}"}
        # the snapshot names the redacted items, so every entry resolves to a stored item
        assert all(e.item_hash in data.items for entries in data.inputs.values() for e in entries)


def test_redaction_can_be_switched_off(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "s.duckdb")
    run = Recorder(store, redaction=RedactionPolicy.none()).start_run(agent="a", input=f"key {SECRET_KEY}")
    run.end("answered")
    store.flush()
    assert store.get_run(run.id).input == f"key {SECRET_KEY}"
    store.close()


def _scanned(policy: RedactionPolicy, value: str) -> str:
    """What text() returns without its literal guard: the sensitive keys' fields masked (as text()
    does first), then every pattern's substitution in turn."""
    value = policy._keys_inside(value)
    for pattern in policy._compiled:
        value = masked_matches(pattern, value)
    return value


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["sk-", "SK-", "bearer ", "BeArEr\t", "AKIA", "akia", "x" * 16, "ABCDEFGHIJKLMNOP",
                                 "0123456789abcdef", " ", "ſ", "é", "-", "_", "password", "PassWd", "=", ": ",
                                 "AIza", "ghp_", "github_pat_", "xoxb-", "eyJ", ".", "-----BEGIN", "PRIVATE KEY-----",
                                 "://", "@", ":", "api_key", "Api-Key", "APIKEY", "secret", "_key", '"', "'",
                                 "[REDACTED]", "{"]),
                max_size=12).map("".join))
def test_the_literal_guard_never_changes_what_is_masked(value: str) -> None:
    policy = RedactionPolicy()
    assert policy._guards is not None  # the default patterns all start with a literal
    assert policy.text(value) == _scanned(policy, value)


def test_patterns_without_a_leading_literal_are_always_scanned() -> None:
    policy = RedactionPolicy(keys=(), patterns=(r"sk-\w{4}", r"\d{3}-\d{4}"))
    assert policy._guards is None
    assert policy.text("call 555-1234 or sk-abcd") == "call [REDACTED] or [REDACTED]"


_strings = st.lists(st.sampled_from(["sk-", "bearer ", "AKIA", "x" * 16, "ABCDEFGHIJKLMNOP", "token", "Password",
                                     '"token": ', "\\", '"', "é", "ſ", " ", "a"]), max_size=6).map("".join)
_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | _strings,
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.sampled_from(["token", "Token", "input_tokens", "api_key", "note", "sk-key", "é"]) | _strings,
                      inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=400, deadline=None)
@given(_json_values)
def test_json_text_is_the_masked_value_encoded(value: object) -> None:
    """json_text() searches the encoded text first; whatever it finds or not, it equals masking then
    encoding (as a JSON value: a flat object is written compactly)."""
    for policy in (RedactionPolicy(), RedactionPolicy.with_extra(keys=["note"]), RedactionPolicy.none()):
        text, expected = policy.json_text(value), json.dumps(policy.value(value), default=str)
        assert json.loads(text) == json.loads(expected)
        if not isinstance(value, dict):
            assert text == expected


_scalars = st.none() | st.booleans() | st.integers() | st.floats() | _strings | st.sampled_from(
    ['{"Token": "x"}', '[{"api_key": 1}]', '{"\\u0074oken": "x"}', "line\nbreak", "tab\there", "\x00", "bEaReR "])


@settings(max_examples=500, deadline=None)
@given(st.dictionaries(st.sampled_from(["token", "Token", "input_tokens", "api_key", "APIKEY", "note", "arguments",
                                        "sk-key", "é"]) | _strings, _scalars, max_size=6))
def test_a_flat_object_is_masked_as_json_dumps_masks_it(value: dict[str, object]) -> None:
    """The compiled path for flat objects (stage attributes) masks what the general path masks, also
    the second time (it remembers the keys and strings it found clean); NaN and infinities, which
    it does not write, go the general way."""
    for policy in (RedactionPolicy(), RedactionPolicy.with_extra(keys=["note"]), RedactionPolicy.none()):
        expected = json.dumps(json.loads(json.dumps(policy.value(value), default=str)), sort_keys=True)
        for _ in range(2):
            assert json.dumps(json.loads(policy.json_text(value)), sort_keys=True) == expected


class _Tone(StrEnum):
    LOUD = "loud"


@settings(max_examples=500, deadline=None)
@given(st.dictionaries(st.sampled_from(["token", "input_tokens", "note", "loud"]) | st.just(_Tone.LOUD) | _strings,
                       _scalars | st.just(_Tone.LOUD) | st.just(2**70) | st.sampled_from(["loud", 1, 1.0, True]),
                       max_size=6))
@example({"turn": 1, "cost": float("nan")})
@example({"cost": float("-inf"), "model": "m"})
@example({"tone": _Tone.LOUD})
@example({_Tone.LOUD: 1})
@example({"tokens": 2**70, "cost": 1.5})
def test_a_flat_object_seen_again_is_written_as_the_first_time(value: dict[Any, object]) -> None:
    """Once its keys and strings are remembered clean, a flat object takes a shorter path (checked
    in C): it writes the very text the first call wrote, or goes the general way as that one did
    (NaN and infinities, a str subclass as a key or a value, an int too large for a float)."""
    for policy in (RedactionPolicy(), RedactionPolicy.with_extra(keys=["note"]), RedactionPolicy.none()):
        first = policy._flat_text(value)
        for _ in range(2):
            assert policy._flat_text(value) == first
        if first is not None:
            assert policy.json_text(value) == first
            assert json.loads(first) == json.loads(json.dumps(policy.value(value), default=str))


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["text", "content", "api_key", "Token", "name"]), _json_values, max_size=4))
def test_may_change_is_false_only_when_masking_changes_nothing(body: dict[str, object]) -> None:
    """The recorder skips masking an item whose canonical JSON may_change() clears."""
    from tracer._records import canonical_json

    for policy in (RedactionPolicy(), RedactionPolicy.with_extra(keys=["name"]), RedactionPolicy.none()):
        if not policy.may_change(canonical_json(body)):
            assert policy.value(body) == body


_ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
_URLSAFE = _ALNUM + "_-"


def _token(prefix: str, alphabet: str, size: int) -> st.SearchStrategy[str]:
    return st.text(alphabet, min_size=size, max_size=size).map(lambda body: prefix + body)


# the credential shapes people paste: (the whole credential, the part that must not survive)
_credentials = st.one_of(
    _token("AIza", _URLSAFE, 35).map(lambda t: (t, t[4:])),
    st.sampled_from(["ghp_", "gho_", "ghu_", "ghs_", "ghr_"]).flatmap(lambda p: _token(p, _ALNUM, 36))
    .map(lambda t: (t, t[4:])),
    _token("github_pat_", _ALNUM + "_", 82).map(lambda t: (t, t[11:])),
    st.sampled_from(["xoxb-", "xoxp-", "xoxa-", "xoxs-"]).flatmap(lambda p: _token(p, _ALNUM + "-", 40))
    .map(lambda t: (t, t[5:])),
    st.sampled_from(["AKIA", "ASIA"]).flatmap(lambda p: _token(p, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16))
    .map(lambda t: (t, t[4:])),
    _token("sk-ant-api03-", _URLSAFE, 60).map(lambda t: (t, t[13:])),
    st.tuples(_token("eyJ", _URLSAFE, 20), _token("eyJ", _URLSAFE, 30), st.text(_URLSAFE, min_size=0, max_size=43))
    .map(lambda p: (".".join(p), p[1] + "." + p[2])),
    st.tuples(st.sampled_from(["RSA ", "EC ", "OPENSSH ", ""]), st.text(_ALNUM + "+/", min_size=24, max_size=64),
              st.booleans())
    .map(lambda p: (f"-----BEGIN {p[0]}PRIVATE KEY-----\n{p[1]}\n{p[1][::-1]}=="
                    + (f"\n-----END {p[0]}PRIVATE KEY-----" if p[2] else ""), p[1])),
    st.tuples(st.sampled_from(["postgresql", "https", "redis", "amqp"]), st.text(_ALNUM, max_size=8),
              st.text(_ALNUM + "!$%*+-.~", min_size=6, max_size=20))
    .map(lambda p: (f"{p[0]}://{p[1]}:{p[2]}@db.internal:5432/app", ":" + p[2] + "@")),
    st.tuples(st.sampled_from(["Authorization: ", "authorization=", "Proxy-Authorization: ", "'authorization': '",
                               '"Authorization": "']),
              st.sampled_from(["Basic ", "Token ", "token ", "ApiKey ", ""]),
              st.text(_ALNUM + "+/", min_size=12, max_size=40), st.sampled_from(["", "=", "=="]))
    .map(lambda p: (p[0] + p[1] + p[2] + p[3], p[2])),
)
_around = st.sampled_from(["", " ", "my key is ", "\n", "(", "'", '"', "key=", "token: ", ", then "])


@settings(max_examples=500, deadline=None)
@given(_credentials, _around, _around)
def test_a_pasted_credential_of_any_common_shape_is_masked(credential: tuple[str, str], before: str,
                                                         after: str) -> None:
    """Google API keys, GitHub, Slack and AWS tokens, Anthropic keys, JWTs, private key blocks, URL
    passwords and the credentials of an Authorization header are masked wherever they sit: in free text, in a JSON text (a tool call's
    arguments, a tool result) and in a JSON value's strings, under a key that says nothing."""
    whole, secret = credential
    policy = RedactionPolicy()
    text = f"{before}{whole}{after}"
    assert secret not in policy.text(text)
    assert policy.text(text) == _scanned(policy, policy._keys_inside(text))
    arguments = json.dumps({"query": text, "n": 1})
    masked_arguments = policy.text(arguments)
    assert secret not in masked_arguments and json.loads(masked_arguments)["n"] == 1
    value = {"note": text, "rows": [{"detail": text}]}
    assert secret not in json.dumps(policy.value(value))
    assert secret not in policy.json_text(value)


def test_a_url_keeps_all_but_its_password() -> None:
    policy = RedactionPolicy()
    assert policy.text("connect to postgresql://app:s3cr3t-pw@db:5432/x, not https://example.com:8080/a@b") == \
        f"connect to postgresql://app:{MASK}@db:5432/x, not https://example.com:8080/a@b"
    assert policy.text("redis://:hunter22@cache/0") == f"redis://:{MASK}@cache/0"
    assert policy.text("git clone ssh://git@github.com/x.git") == "git clone ssh://git@github.com/x.git"
    custom = RedactionPolicy.with_extra(patterns=[r"api-key=(?P<secret>\w+)"])
    assert custom.text("send api-key=abc123 along") == f"send api-key={MASK} along"


def test_an_authorization_header_loses_its_credentials_and_prose_about_authorization_is_kept() -> None:
    policy = RedactionPolicy()
    assert policy.text("401 for Authorization: Basic dXNlcjpwYXNzd29yZA==") == f"401 for Authorization: Basic {MASK}"
    assert policy.text("{'authorization': 'Token abcdef0123456789'}") == f"{{'authorization': 'Token {MASK}'}}"
    assert policy.text("Proxy-Authorization: 0123456789abcdefXYZ") == f"Proxy-Authorization: {MASK}"
    for prose in ("authorization: none", "Authorization: the process of granting access", "authorization failed: 401"):
        assert policy.text(prose) == prose


_schema_values = st.recursive(
    _json_values,
    lambda inner: st.dictionaries(st.sampled_from(["properties", "$defs", "password"]),
                                  st.dictionaries(st.sampled_from(["password", "q"]),
                                                  st.fixed_dictionaries({"type": st.just("string")}, optional={"x": inner}),
                                                  max_size=2), max_size=2)
    | st.lists(inner, max_size=3),
    max_leaves=10,
)


@settings(max_examples=400, deadline=None)
@given(_schema_values)
def test_the_stackless_walk_masks_as_the_recursive_one(value: object) -> None:
    """Values are masked without recursion (deep ones too); on any value the walk agrees with a
    recursive one, schemas' parameter names and tuples included."""
    for policy in (RedactionPolicy(), RedactionPolicy.with_extra(keys=["note"]), RedactionPolicy.none()):
        assert policy.value(value) == _recursive_value(policy, value)
        assert policy.value((value, value)) == _recursive_value(policy, (value, value))


def _recursive_value(policy: RedactionPolicy, value: Any) -> Any:
    """The oracle: masking as a recursive walk writes it (how RedactionPolicy.value was written
    before it kept a stack of its own)."""
    if isinstance(value, str):
        return policy.text(value)
    if isinstance(value, dict):
        return {k: ({n: _recursive_value(policy, s) for n, s in v.items()} if k in _SCHEMA_MAPS and _is_schemas(v)
                    else MASK if isinstance(k, str) and k.lower().endswith(policy._key_endings)
                    else _recursive_value(policy, v))
                for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_recursive_value(policy, v) for v in value]
    return value


@given(st.integers(900, 6000), st.sampled_from(["[", '{"a":']), st.booleans())
@settings(max_examples=30, deadline=None)
def test_json_nested_deeper_than_the_stack_is_masked_not_a_crash(depth: int, opener: str, compact: bool) -> None:
    """A user's or a model's JSON of thousands of levels: parsing, masking or writing it again
    overflowed the stack, and the recording (the run) failed with a RecursionError."""
    closer = "]" if opener == "[" else "}"
    inner = '{"password": "hunter2", "note": "kept"}' if compact else '{"password" : "hunter2", "note" : "kept"}'
    text = opener * depth + inner + closer * depth
    policy = RedactionPolicy()
    masked = policy.text(text)
    assert "hunter2" not in masked and "kept" in masked
    squeezed = masked.replace(" ", "")  # written again where it could be, in the style it came in
    assert squeezed.startswith(opener * depth) and squeezed.endswith(closer * depth)
    value: object = {"password": "hunter2", "note": "kept"}
    for _ in range(depth):
        value = [value] if opener == "[" else {"a": value}
    walked = policy.value(value)
    for _ in range(depth):
        walked = walked[0] if opener == "[" else walked["a"]  # type: ignore[index, call-overload]
    assert walked == {"password": MASK, "note": "kept"}
    loop: list[object] = ["sk-" + "A1b2" * 8]
    loop.append(loop)
    deep_loop: object = loop
    for _ in range(depth):
        deep_loop = [deep_loop]
    cut = policy.value(deep_loop)
    for _ in range(depth):
        cut = cut[0]  # type: ignore[index]
    assert cut[1] == "<circular reference>" and "A1b2" not in cut[0]  # type: ignore[index]


_ENV_NAMES = st.builds(lambda words, suffix: "_".join(words) + suffix,
                       st.lists(st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", min_size=1, max_size=8), min_size=1,
                                max_size=3),
                       st.sampled_from(["_TOKEN", "_KEY", "_SECRET", "_PAT", "_ACCESS_KEY", "_API_KEY"]))
_CREDENTIALS_VALUES = st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-./+=",
                              min_size=8, max_size=60).filter(lambda v: v[0] not in "=")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_ENV_NAMES, _CREDENTIALS_VALUES, st.sampled_from(["", '"', "'"])), min_size=1, max_size=8))
def test_an_env_dump_keeps_each_name_and_loses_each_credential(variables: list[tuple[str, str, str]]) -> None:
    """A tool that ran `env` returned HF_TOKEN=..., AWS_SECRET_ACCESS_KEY=..., NPM_TOKEN="...": none of
    them was masked (only api_key, secret and password names were)."""
    dump = "\n".join(f"{name}={quote}{value}{quote}" for name, value, quote in variables) + "\nPATH=/usr/bin\n"
    masked = RedactionPolicy().text(dump)
    values_left = masked
    for name, _, quote in sorted(variables, key=lambda v: -len(v[0])):
        assert f"{name}={quote}" in masked
        values_left = values_left.replace(f"{name}={quote}", "")  # (a value may also be part of a name)
    for name, value, _ in variables:
        assert value not in values_left, (name, value, masked)
    assert "PATH=/usr/bin" in masked


def test_short_or_plain_values_of_key_names_and_oauth_tokens_in_urls() -> None:
    policy = RedactionPolicy()
    assert policy.text("SORT_KEY=name, MAX_TOKEN=12") == "SORT_KEY=name, MAX_TOKEN=12"  # not credentials
    assert policy.text("max_tokens=4096 input_tokens: 12") == "max_tokens=4096 input_tokens: 12"
    assert (policy.text("https://app.example/cb?code=1&access_token=ya29.a0AfH6SMBx3kz9&state=x")
            == f"https://app.example/cb?code=1&access_token={MASK}&state=x")
    assert policy.text("refresh_token=1//0gLkq9AbCdEfGh") == f"refresh_token={MASK}"
