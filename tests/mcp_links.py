"""A small MCP server that sends the person to web pages, built with the SDK: ``python
tests/mcp_links.py`` speaks stdio.

- ``sign_in(url)`` asks the person to open ``url`` (elicitation, URL mode; it says so
  instead when the client does not declare both form and URL mode), and on "accept" says
  the page is done (``notifications/elicitation/complete``);
- ``pay()`` is refused until the person has been to a page (``URLElicitationRequired``,
  -32042).
"""

from __future__ import annotations

from mcp import UrlElicitationRequiredError
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ElicitRequestURLParams, ToolAnnotations

READ_ONLY = ToolAnnotations(read_only_hint=True)


def build() -> MCPServer:
    server = MCPServer("links")

    @server.tool(description="Sign in on a web page.", annotations=READ_ONLY)
    async def sign_in(url: str, ctx: Context) -> str:
        declared = ctx.session.client_capabilities
        modes = declared.elicitation if declared else None
        if modes is None or modes.url is None or modes.form is None:
            return f"the client does not declare form and url elicitation: {modes}"
        answer = await ctx.elicit_url("Sign in to Example\x1b[2J to go on.", url, "sign-1")
        if answer.action == "accept":
            await ctx.session.send_elicit_complete("sign-1")
        return f"sign-in: {answer.action}"

    @server.tool(description="Pay for something.", annotations=READ_ONLY)
    def pay() -> str:
        raise UrlElicitationRequiredError([ElicitRequestURLParams(
            message="Confirm the payment.", url="https://pay.example.com/confirm?id=7",
            elicitation_id="pay-7")])

    return server


if __name__ == "__main__":
    build().run()
