"""Drives `ctxd mcp` (stdio) or a daemon's POST /mcp with the official MCP Python SDK.

    python mcp_client.py stdio <ctxd> <db> <root>
    python mcp_client.py stdio-minimal <ctxd> <db> <root>    # `ctxd mcp --tools minimal`
    python mcp_client.py http <url> <token>

Calls every tool, asserts on the answers and prints one JSON summary line for the Rust test.
"""
import asyncio, json, sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

TOOLS = ["search", "get_context", "search_symbols", "get_symbol_source", "get_repo_overview", "check_index",
         "list_symbols", "get_symbols", "locate", "find_references", "callers", "callees", "imports", "imported_by", "impact", "repo_map",
         "history"]


def text(result):
    return "".join(c.text for c in result.content if getattr(c, "type", "") == "text")


async def exercise(session, changed_file=None):
    init = await session.initialize()
    assert init.server_info.name == "ctxd", init
    tools = (await session.list_tools()).tools
    names = [t.name for t in tools]
    assert names == TOOLS, names
    assert all("Cost:" in t.description for t in tools)
    out = {"tools": names}

    r = await session.call_tool("search", {"query": "verify a password against the stored hash", "k": 5})
    assert not r.is_error, text(r)
    out["search_top"] = r.structured_content["results"][0]["path"]

    r = await session.call_tool("get_context", {"query": "how are passwords hashed?", "budget": 400})
    assert not r.is_error, text(r)
    assert r.structured_content["tokens_used"] <= 400, r.structured_content
    out["context_citations"] = r.structured_content["citations"]
    # The same question again: over stdio the process is one session, so what was sent is cited.
    r = await session.call_tool("get_context", {"query": "how are passwords hashed?", "budget": 400})
    assert not r.is_error, text(r)
    out["context_again_already_sent"] = r.structured_content["already_sent"]

    r = await session.call_tool("list_symbols", {"target": "src/auth.rs"})
    assert not r.is_error, text(r)
    out["outline"] = [s["symbol"] for f in r.structured_content["files"] for s in f["symbols"]]
    r = await session.call_tool("get_symbols", {"names": ["verify_password", "no_such_function_anywhere"], "budget": 2000})
    assert not r.is_error, text(r)
    out["get_symbols"] = {"found": [s["qualified_name"] for s in r.structured_content["symbols"]],
                          "missing": r.structured_content["missing"]}
    r = await session.call_tool("list_symbols", {"target": "../../etc"})
    assert r.is_error and "no indexed file" in text(r), text(r)

    r = await session.call_tool("search_symbols", {"name": "verify_pass", "prefix": True})
    assert not r.is_error and "verify_password" in text(r), text(r)
    out["symbols"] = [s["qualified_name"] for s in r.structured_content["symbols"]]

    r = await session.call_tool("get_symbol_source", {"name": "verify_password"})
    assert not r.is_error, text(r)
    out["symbol_source"] = r.structured_content["source"]

    r = await session.call_tool("get_symbol_source", {"name": "no_such_function_anywhere"})
    assert r.is_error, text(r)
    out["missing_symbol_error"] = text(r)

    r = await session.call_tool("get_repo_overview", {"max_tokens": 300})
    assert not r.is_error, text(r)
    out["overview"] = text(r)
    out["overview_tokens"] = r.structured_content["approx_tokens"]

    r = await session.call_tool("locate", {"text": "verify a password against the stored hash", "k": 3})
    assert not r.is_error, text(r)
    out["locate_top"] = r.structured_content["files"][0]["path"]

    r = await session.call_tool("repo_map", {"budget": 200})
    assert not r.is_error and r.structured_content["tokens"] <= 200, text(r)

    # The demo folder (a copy in a temporary folder) is no git clone: no history, said so.
    r = await session.call_tool("history", {"path": "src/auth.rs"})
    assert r.is_error and "no git history" in text(r), text(r)

    r = await session.call_tool("check_index", {})
    out["check"] = r.structured_content if not r.is_error else {"error": text(r)}
    if changed_file:
        with open(changed_file, "a") as f:
            f.write("\n# appended by the MCP test: stale until refreshed\n")
        r = await session.call_tool("check_index", {})
        out["check_after_edit"] = r.structured_content
        r = await session.call_tool("check_index", {"refresh": True})
        out["check_refresh"] = r.structured_content
        r = await session.call_tool("check_index", {})
        out["check_after_refresh"] = r.structured_content

    r = await session.call_tool("search", {"query": "   "})
    assert r.is_error, text(r)
    out["empty_query_error"] = text(r)
    return out


async def minimal(session):
    """`--tools minimal`: three tools listed, the instructions name only them, others refused."""
    init = await session.initialize()
    names = [t.name for t in (await session.list_tools()).tools]
    assert names == ["search", "get_context", "locate"], names
    r = await session.call_tool("locate", {"text": "verify a password against the stored hash", "k": 3})
    assert not r.is_error, text(r)
    out = {"tools": names, "instructions": init.instructions, "locate_top": r.structured_content["files"][0]["path"]}
    try:
        r = await session.call_tool("callers", {"symbol": "verify_password"})
        out["refused"] = text(r) if r.is_error else None
    except Exception as e:  # a JSON-RPC error: the SDK's MCPError, its ErrorData in `error`
        err = getattr(e, "error", None)
        out["refused"] = err.message if err is not None else str(e)
    return out


async def main():
    mode = sys.argv[1]
    if mode == "stdio-minimal":
        ctxd, db, root = sys.argv[2:5]
        params = StdioServerParameters(command=ctxd, args=["mcp", "--db", db, "--root", root, "--tools", "minimal"],
                                       env={"CTXD_LOG": "warn"})
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                out = await minimal(session)
    elif mode == "stdio":
        ctxd, db, root = sys.argv[2:5]
        params = StdioServerParameters(command=ctxd, args=["mcp", "--db", db, "--root", root],
                                       env={"CTXD_LOG": "warn"})
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                out = await exercise(session, changed_file=f"{root}/lib/cache.py")
    else:
        import httpx2 as httpx
        from mcp.client.streamable_http import streamable_http_client
        url, token = sys.argv[2:4]
        client = httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
        async with streamable_http_client(url, http_client=client) as streams:
            read, write = streams[0], streams[1]
            async with ClientSession(read, write) as session:
                out = await exercise(session)
    print(json.dumps(out))


asyncio.run(main())
