"""Every route of a real `footprint serve` (the host, the gateway and durable sessions, with a
token) fuzzed from its own OpenAPI schema by schemathesis: no generated request, valid or not,
gets a 5xx, and the server writes no traceback.

Found this way: a durable message naming a provider the host does not have was queued (202); the
setting then stayed in effect and the session's compaction answered 502, and once refused, the
refusal came back as 503 instead of 422.

Each operation gets schemathesis's coverage phase (each field's boundaries and wrong types) and 25
generated requests; ``FOOTPRINT_FUZZ=slow`` generates 200.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, settings  # noqa: E402
from schemathesis.checks import not_a_server_error  # noqa: E402

from tests.hosting.hostkit import host_process  # noqa: E402

TOKEN = "fuzz-token-1234567890"
SLOW = os.environ.get("FOOTPRINT_FUZZ") == "slow"
EXAMPLES = 200 if SLOW else 25


@pytest.fixture(scope="module")
def host_schema(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    import httpx2

    folder = tmp_path_factory.mktemp("fuzz")
    with host_process(folder / "host.duckdb", folder, "--gateway", "--durable", "--token", TOKEN,
                      agent="echo") as (server, url):
        spec = httpx2.get(f"{url}/openapi.json", headers={"Authorization": f"Bearer {TOKEN}"}).json()
        schema = schemathesis.openapi.from_dict(spec)
        schema.config.update(base_url=url)
        yield schema
        text = "".join(server.stderr_lines)  # type: ignore[attr-defined]
    assert "Traceback" not in text, text[-4000:]
    assert TOKEN not in text


# (server-sent events never end: a client reads them until it hangs up)
schema = schemathesis.pytest.from_fixture("host_schema").exclude(path_regex="stream|events")


@schema.parametrize()
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
def test_no_generated_request_gets_a_server_error(case: Any) -> None:
    response = case.call_and_validate(headers={"Authorization": f"Bearer {TOKEN}"}, checks=[not_a_server_error])
    assert TOKEN not in response.text
