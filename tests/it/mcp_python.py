"""The official MCP Python SDK against portcullis: a second, independent client.

Usage: mcp_python.py URL TOKEN CA_FILE MODE [CLUSTER NAMESPACE DENIED_NAMESPACE]
(MODE: "auto" discovers 2026-07-28, "legacy" runs the 2025-11-25 initialize
handshake; the cluster and namespaces default to the simulated cluster's sim,
shop and payments). Prints one JSON object with what the client saw;
tests/it/mcp_python.rs asserts on it.
"""

import asyncio
import json
import ssl
import sys

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


def text(result):
    return "".join(getattr(block, "text", "") for block in result.content)


async def main(url, token, ca_file, mode, cluster="sim", namespace="shop", denied_namespace="payments"):
    tls = ssl.create_default_context(cafile=ca_file)
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, verify=tls, timeout=30) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
            tools = await client.list_tools()
            secret = await client.call_tool(
                "get_resource", {"cluster": cluster, "kind": "secret", "name": "db-credentials", "namespace": namespace}
            )
            denied = await client.call_tool(
                "list_resources", {"cluster": cluster, "kind": "pods", "namespace": denied_namespace}
            )
            unknown = await client.call_tool("list_resources", {"cluster": cluster, "kind": "nope", "namespace": namespace})
            seen = {
                "protocol": client.protocol_version,
                "instructions": client.instructions or "",
                "tools": sorted(tool.name for tool in tools.tools),
                "secret": {"is_error": secret.is_error, "text": text(secret)},
                "denied": {"is_error": denied.is_error, "text": text(denied), "structured": denied.structured_content},
                "unknown": {"is_error": unknown.is_error, "structured": unknown.structured_content},
            }
    print(json.dumps(seen))


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:8]))
