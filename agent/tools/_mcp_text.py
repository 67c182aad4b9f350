"""What crosses from an MCP server to the model: its tools' names made valid, and its results'
content blocks as the text the model reads (see :mod:`agent.tools._mcp`)."""

from __future__ import annotations

import hashlib
import json
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mcp_types import CallToolResult

_VALID_NAME = re.compile(r"[A-Za-z0-9_\-]{1,64}")


def tool_name(name: str, prefix: str = "") -> str:
    """The footprint (OpenAI-valid) name of the MCP tool ``name``: ``prefix + name`` with each
    character outside ``[A-Za-z0-9_-]`` made ``_``; a name longer than 64 characters is cut and ends
    with a hash of the whole, so two long names stay apart."""
    wanted = prefix + name
    if _VALID_NAME.fullmatch(wanted):
        return wanted
    clean = re.sub(r"[^A-Za-z0-9_\-]", "_", wanted) or "_"
    if len(clean) > 64:
        digest = hashlib.sha256(wanted.encode("utf-8", "surrogatepass")).hexdigest()[:8]
        clean = f"{clean[:55]}_{digest}"
    return clean


def result_text(result: CallToolResult) -> str:
    """What the model is shown of an MCP tool result: text blocks as they are, other blocks
    described in one line each, the structured content as JSON when there are no blocks."""
    from mcp_types import AudioContent, EmbeddedResource, ImageContent, ResourceLink, TextContent

    parts: list[str] = []
    for block in result.content:
        if isinstance(block, TextContent):
            parts.append(block.text)
        elif isinstance(block, ImageContent | AudioContent):
            parts.append(f"[{block.type}: {block.mime_type}, {_decoded_size(block.data):,} bytes]")
        elif isinstance(block, ResourceLink):
            parts.append(f"[resource link: {block.name} {block.uri}"
                         f"{f' ({block.mime_type})' if block.mime_type else ''}]")
        elif isinstance(block, EmbeddedResource):
            res = block.resource
            text = getattr(res, "text", None)
            mime = f" ({res.mime_type})" if res.mime_type else ""
            if isinstance(text, str):
                parts.append(f"[resource {res.uri}{mime}]\n{text}")
            else:
                parts.append(f"[resource {res.uri}{mime}: {_decoded_size(getattr(res, 'blob', '')):,} bytes]")
        else:  # a block type newer than this code
            parts.append(f"[{getattr(block, 'type', type(block).__name__)} content]")
    if not parts and result.structured_content is not None:
        return json.dumps(result.structured_content, ensure_ascii=False, default=str)
    return "\n".join(parts)


def _decoded_size(data: str) -> int:
    """The bytes a base64 text holds (without decoding it)."""
    data = data.strip()
    return max(0, len(data) * 3 // 4 - data[-2:].count("="))
