"""The official MCP Python SDK's OAuth client (OAuthClientProvider) through
portcullis's whole authorization flow, then acting with what was consented.

Usage: mcp_python_oauth.py URL CA_FILE REVISION CLIENT CLUSTER NAMESPACE DENIED_NAMESPACE
(REVISION: "2026-07-28" discovers the stateless revision, "2025-11-25" runs
the initialize handshake; CLIENT: "dcr" registers dynamically, "cimd:<url>"
identifies the client by its Client ID Metadata Document at <url>).

The redirect handler prints "AUTHORIZE <url>" on one line for the test to
open in a browser; the callback handler waits for the browser on a loopback
port chosen before the flow. Then it lists the tools, reads in NAMESPACE
(the consented grant), reads in DENIED_NAMESPACE (not consented), reads a
Secret (outside the narrower role chosen) and applies a ConfigMap (a write,
to be held for approval), and prints one JSON line with what it saw;
tests/it/oauth/python_flow.rs asserts on it.
"""

import asyncio
import json
import ssl
import sys
from urllib.parse import parse_qs, urlsplit

import httpx2
from mcp import Client
from mcp.client.auth import OAuthClientProvider, TokenStorage
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

MODES = {"2026-07-28": "auto", "2025-11-25": "legacy"}


class MemoryStorage(TokenStorage):
    """Tokens and client information for this run only."""

    def __init__(self):
        self.tokens = None
        self.client_info = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


class Callback:
    """The loopback redirect target: one GET carrying code, state and iss."""

    def __init__(self):
        self.answer = asyncio.get_running_loop().create_future()
        self.server = None

    async def start(self) -> str:
        self.server = await asyncio.start_server(self.serve, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/callback"

    async def serve(self, reader, writer):
        request_line = (await reader.readline()).decode("latin-1")
        while (await reader.readline()) not in (b"\r\n", b"\n", b""):
            pass
        target = request_line.split(" ")[1] if request_line.count(" ") >= 2 else "/"
        query = {k: v[0] for k, v in parse_qs(urlsplit(target).query).items()}
        page = b"<!doctype html><title>Done</title><p>Authorized. You can close this tab.</p>"
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nConnection: close\r\n")
        writer.write(b"Content-Length: %d\r\n\r\n" % len(page) + page)
        await writer.drain()
        writer.close()
        # Browsers also ask for /favicon.ico: only the callback answers the flow.
        if urlsplit(target).path == "/callback" and not self.answer.done():
            self.answer.set_result(query)

    async def wait(self) -> AuthorizationCodeResult:
        query = await self.answer
        if "error" in query:
            raise RuntimeError(f"the authorization was refused: {query}")
        return AuthorizationCodeResult(code=query["code"], state=query.get("state"), iss=query.get("iss"))


async def show(url: str) -> None:
    print(f"AUTHORIZE {url}", flush=True)


def outcome(result):
    return {
        "is_error": bool(result.is_error),
        "text": "".join(getattr(block, "text", "") for block in result.content),
        "structured": result.structured_content,
    }


async def act(client, cluster, namespace, denied_namespace):
    """The tool calls, each recorded as the client saw it."""
    tools = await client.list_tools()
    allowed = await client.call_tool("list_resources", {"cluster": cluster, "kind": "pods", "namespace": namespace})
    denied = await client.call_tool(
        "list_resources", {"cluster": cluster, "kind": "pods", "namespace": denied_namespace}
    )
    secret = await client.call_tool(
        "get_resource", {"cluster": cluster, "kind": "secret", "name": "db-credentials", "namespace": namespace}
    )
    manifest = (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: flags\n"
        f"  namespace: {namespace}\ndata:\n  checkout: \"on\"\n"
    )
    write = await client.call_tool("apply", {"cluster": cluster, "manifest": manifest})
    return {
        "protocol": client.protocol_version,
        "tools": sorted(tool.name for tool in tools.tools),
        "allowed": outcome(allowed),
        "denied": outcome(denied),
        "secret": outcome(secret),
        "write": outcome(write),
    }


async def main(url, ca_file, revision, client_kind, cluster, namespace, denied_namespace):
    callback = Callback()
    redirect_uri = await callback.start()
    metadata = OAuthClientMetadata(
        client_name="Python SDK test agent",
        redirect_uris=[redirect_uri],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
    )
    metadata_url = client_kind.removeprefix("cimd:") if client_kind.startswith("cimd:") else None
    storage = MemoryStorage()
    auth = OAuthClientProvider(
        server_url=url,
        client_metadata=metadata,
        storage=storage,
        redirect_handler=show,
        callback_handler=callback.wait,
        client_metadata_url=metadata_url,
    )
    tls = ssl.create_default_context(cafile=ca_file)
    async with httpx2.AsyncClient(auth=auth, verify=tls, timeout=30) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=MODES[revision]) as client:
            seen = await act(client, cluster, namespace, denied_namespace)
    callback.server.close()
    seen["client_id"] = storage.client_info.client_id if storage.client_info else None
    seen["token_type"] = storage.tokens.token_type if storage.tokens else None
    seen["has_refresh_token"] = bool(storage.tokens and storage.tokens.refresh_token)
    print(json.dumps(seen), flush=True)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:8]))
