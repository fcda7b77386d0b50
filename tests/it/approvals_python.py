"""The official MCP Python SDK on 2026-07-28 with URL elicitation, against a
held write: the SDK declares URL elicitation (it has an elicitation
callback), gets an input-required result, hands the approval URL to the
callback (as a client would show it to its user), and retries with the
request state, which waits for the person's decision.

Usage: approvals_python.py URL TOKEN CA_FILE ARGUMENTS_JSON. Prints one JSON
object with what the client saw; tests/it/approvals_python.rs asserts on it.
"""

import asyncio
import json
import ssl
import sys

import httpx2
import mcp.types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


async def main(url, token, ca_file, arguments):
    elicited = []

    async def on_elicit(context, params):
        elicited.append({"mode": getattr(params, "mode", None), "url": getattr(params, "url", None),
                         "message": getattr(params, "message", None)})
        return types.ElicitResult(action="accept")

    tls = ssl.create_default_context(cafile=ca_file)
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, verify=tls, timeout=120) as http:
        async with Client(streamable_http_client(url, http_client=http), mode="auto",
                          elicitation_callback=on_elicit) as client:
            result = await client.call_tool("apply", json.loads(arguments))
            seen = {
                "protocol": client.protocol_version,
                "elicited": elicited,
                "is_error": result.is_error,
                "text": "".join(getattr(block, "text", "") for block in result.content),
            }
    print(json.dumps(seen))


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
