"""Credentials in an OpenAIProvider's ``base_url`` are masked wherever the provider shows the URL:
its repr and the errors it raises (which a run records). ``repr`` showed
``http://user:secret@host/v1`` and ``?api_key=...`` as they were."""

from __future__ import annotations

from typing import Any

import pytest

from agent.errors import ProviderServerError
from agent.providers import OpenAIProvider
from agent.providers._openai import masked_url
from tests.agent.providers.openaikit import MakeRequest

SECRET = "hunter2-Zq81"
URLS = [
    f"http://user:{SECRET}@{{host}}/v1",
    f"http://{SECRET}@{{host}}/v1",  # a token given as the user
    f"http://{{host}}/v1?api_key={SECRET}",
    f"http://{{host}}/v1?x=1&token={SECRET}",
    f"http://{{host}}/v1?key={SECRET}",
    f"http://{{host}}/v1?access_token={SECRET}&api-version=2024-10-21",
]


@pytest.mark.parametrize("template", URLS)
async def test_repr_and_errors_mask_the_urls_credentials(
    template: str, openai_server: Any, request_of: MakeRequest
) -> None:
    host = openai_server.base_url.split("//")[1].split("/")[0]
    provider = OpenAIProvider("m", api_key="k", base_url=template.format(host=host), max_retries=0)
    openai_server.script(openai_server.error(500, "boom"))

    with pytest.raises(ProviderServerError) as caught:
        await provider.complete(request_of("hi"))

    shown = repr(provider)
    assert SECRET not in shown and "[REDACTED]" in shown and host in shown
    assert SECRET not in str(caught.value) and "[REDACTED]" in str(caught.value)
    assert SECRET in provider.base_url  # the client still connects with them
    await provider.aclose()


def test_masked_url_keeps_what_is_not_a_credential() -> None:
    assert masked_url("https://api.openai.com/v1") == "https://api.openai.com/v1"
    assert masked_url("http://u:p4ss@h:8080/v1?api-version=2024&api_key=x") == \
        "http://u:[REDACTED]@h:8080/v1?api-version=2024&api_key=[REDACTED]"
    assert masked_url("http://h/sk-abcdefghijklmnopqrstu/v1") == "http://h/[REDACTED]/v1"
