"""An MCP server behind OAuth, built with the SDK: its own authorization server in memory
(client registration, authorization with PKCE, codes, access and refresh tokens), the
``mcp_lookup`` tools behind it. ``build(url)`` is the Starlette app for ``url`` (its root);
the authorization page approves at once and sends the browser back with a code, as a person
who clicks "allow" would."""

from __future__ import annotations

import secrets
import time
from typing import Any

from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken


class MemoryAuth:
    """Everything the authorization server keeps, in memory."""

    def __init__(self) -> None:
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.tokens: dict[str, AccessToken] = {}
        self.refresh: dict[str, RefreshToken] = {}
        self.authorized = 0

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        self.clients[str(client_info.client_id)] = client_info

    async def authorize(self, client: OAuthClientInformationFull, params: Any) -> str:
        self.authorized += 1
        code = secrets.token_hex(16)
        self.codes[code] = AuthorizationCode(
            code=code, scopes=params.scopes or [], expires_at=time.time() + 300,
            client_id=str(client.client_id), code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource)
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(self, client: Any, code: str) -> AuthorizationCode | None:
        return self.codes.get(code)

    async def exchange_authorization_code(self, client: Any, code: AuthorizationCode
                                          ) -> OAuthToken:
        del self.codes[code.code]
        return self._issue(str(client.client_id), code.scopes, code.resource)

    async def load_refresh_token(self, client: Any, refresh_token: str) -> RefreshToken | None:
        return self.refresh.get(refresh_token)

    async def exchange_refresh_token(self, client: Any, refresh_token: RefreshToken,
                                     scopes: list[str]) -> OAuthToken:
        del self.refresh[refresh_token.token]
        return self._issue(str(client.client_id), scopes or refresh_token.scopes,
                           refresh_token.resource)

    async def load_access_token(self, token: str) -> AccessToken | None:
        return self.tokens.get(token)

    async def revoke_token(self, token: Any) -> None:
        self.tokens.pop(getattr(token, "token", ""), None)

    def _issue(self, client_id: str, scopes: list[str], resource: str | None) -> OAuthToken:
        access, refresh = secrets.token_hex(16), secrets.token_hex(16)
        self.tokens[access] = AccessToken(token=access, client_id=client_id, scopes=scopes,
                                          expires_at=int(time.time()) + 3600, resource=resource)
        self.refresh[refresh] = RefreshToken(token=refresh, client_id=client_id, scopes=scopes,
                                             resource=resource)
        return OAuthToken(access_token=access, token_type="Bearer", expires_in=3600,
                          scope=" ".join(scopes) or None, refresh_token=refresh)


def build(url: str, auth: MemoryAuth) -> Any:
    from mcp_lookup import build as lookup

    server = MCPServer("secured", auth_server_provider=auth, auth=AuthSettings(
        issuer_url=url, resource_server_url=f"{url}/mcp",
        client_registration_options=ClientRegistrationOptions(enabled=True),
        validate_token_resource=True))
    for tool in lookup()._tool_manager.list_tools():  # the same tools, behind OAuth
        server.add_tool(tool.fn, name=tool.name, description=tool.description,
                        annotations=tool.annotations)
    return server.streamable_http_app()
