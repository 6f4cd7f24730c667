"""Property-based fuzz of a running daemon's MCP tools from their own input schemas.

Usage: python mcp_fuzz.py BASE_URL TOKEN EXAMPLES SEED

Asks `tools/list` over `POST /mcp` (MCP's HTTP transport), then for every tool draws arguments
from the tool's `inputSchema` (Hypothesis; the subset of JSON Schema the catalog uses: object,
string, integer, number, boolean, array, enum, anyOf, minimum/maximum, required) — valid
arguments, and the same with one property of the wrong type — and calls the tool with each.
Every answer must be HTTP 200 and a JSON-RPC result (a tool's failure is a result with
`isError: true`, never a JSON-RPC error nor a 5xx) whose content is text; valid arguments of
a tool that takes no name to look up (and no `source` or `ref`) must not fail. Prints one line per tool and exits 1 with
the first counter-example of each failing tool.
"""

import json
import sys
import urllib.request

from hypothesis import HealthCheck, given, seed as seeded, settings, strategies as st

# Tools whose valid arguments can still name something absent (a symbol, a file, a session) or
# ask what this daemon does not run: a failure there is an answer, not a fault.
MAY_FAIL = {
    "get_symbol_source", "find_references", "callers", "callees", "imports", "imported_by",
    "impact", "history", "get_symbols", "list_symbols", "locate", "search",
    "get_context", "search_symbols", "repo_map",
}

TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)


def strategy(schema):
    """A Hypothesis strategy for the values `schema` accepts."""
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if "anyOf" in schema:
        return st.one_of([strategy(s) for s in schema["anyOf"]])
    kind = schema.get("type")
    if kind == "string":
        return TEXT
    if kind == "integer":
        return st.integers(schema.get("minimum", -(2**31)), schema.get("maximum", 2**31))
    if kind == "number":
        return st.floats(schema.get("minimum"), schema.get("maximum"), allow_nan=False, allow_infinity=False)
    if kind == "boolean":
        return st.booleans()
    if kind == "array":
        return st.lists(strategy(schema.get("items", {"type": "string"})), max_size=4)
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        required = set(schema.get("required", []))
        fixed = {k: strategy(v) for k, v in props.items() if k in required}
        optional = {k: strategy(v) for k, v in props.items() if k not in required}
        return st.fixed_dictionaries(fixed, optional=optional)
    return st.one_of(st.none(), st.booleans(), st.integers(), TEXT)


def wrong_type(schema):
    """Arguments with one property of a type its schema does not allow."""
    props = list(schema.get("properties", {}))
    if not props:
        return st.just({"unexpected": 1})
    valid = strategy(schema)
    odd = st.one_of(st.just(None), st.just([1, 2]), st.just({"x": {}}), st.just(-1), st.just(True))
    return st.tuples(valid, st.sampled_from(props), odd).map(lambda t: {**t[0], t[1]: t[2]})


class Client:
    def __init__(self, base, token):
        self.url, self.token, self.next_id = base.rstrip("/") + "/mcp", token, 0

    def call(self, method, params):
        self.next_id += 1
        body = json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}).encode()
        req = urllib.request.Request(self.url, body, {"Content-Type": "application/json",
                                                      "Authorization": f"Bearer {self.token}"})
        with urllib.request.urlopen(req, timeout=120) as resp:
            return resp.status, json.loads(resp.read())


def check(client, name, args, valid):
    status, reply = client.call("tools/call", {"name": name, "arguments": args})
    assert status == 200, f"HTTP {status}"
    assert "error" not in reply, f"a JSON-RPC error: {reply['error']}"
    result = reply["result"]
    assert isinstance(result.get("isError"), bool), result
    content = result.get("content")
    assert isinstance(content, list) and content and all(isinstance(c.get("text"), str) for c in content), result
    # A `source` or `ref` drawn at random names nothing this daemon has: refused, rightly.
    if valid and name not in MAY_FAIL and not {"source", "ref"} & set(args):
        assert not result["isError"], f"valid arguments failed: {content[0]['text'][:300]}"
    if "structuredContent" in result:
        assert isinstance(result["structuredContent"], dict), result


def main():
    base, token, examples, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    client = Client(base, token)
    status, init = client.call("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                              "clientInfo": {"name": "mcp-fuzz", "version": "1"}})
    assert status == 200 and "result" in init, init
    _, listed = client.call("tools/list", {})
    tools = listed["result"]["tools"]
    failed, calls = [], 0
    for tool in tools:
        name, schema = tool["name"], tool["inputSchema"]
        counted = [0]
        runs = settings(max_examples=examples, database=None, deadline=None,
                        suppress_health_check=list(HealthCheck))

        @seeded(seed)
        @runs
        @given(st.one_of(strategy(schema).map(lambda a: (a, True)), wrong_type(schema).map(lambda a: (a, False))))
        def property_holds(drawn):
            counted[0] += 1
            check(client, name, drawn[0], drawn[1])

        try:
            property_holds()
            print(f"mcp-fuzz: {name}: {counted[0]} calls, all answered")
        except Exception as e:  # the shrunk counter-example
            failed.append(name)
            print(f"mcp-fuzz: {name}: FAILED after {counted[0]} calls: {e}")
        calls += counted[0]
    print(f"mcp-fuzz: {len(tools)} tools, {calls} calls, {len(failed)} failing (seed {seed})")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
