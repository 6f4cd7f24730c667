//! `docs/reference/http.md`, `docs/reference/mcp-tools.md` and `/openapi.json` against the code
//! (tests only).
//!
//! **HTTP.** Every route the router declares (`.route("PATH", get(…).post(…))` in `http.rs` and
//! `ui.rs`, read from their source) is documented by a row of the page's table whose first cell
//! names `` `METHOD PATH` `` (several, comma-separated; `<name>` for a path parameter, or the
//! parameter's values spelled out: `/v1/symbols/list` documents `/v1/symbols/{which}`), and every
//! route a row names is one the router declares. The same holds between the router and the
//! operations of [`crate::openapi::document`].
//!
//! **MCP.** Every tool the catalog holds ([`crate::mcp_catalog::tools`]) has a row of the page's
//! table and every row names a catalog tool; every argument a row lists is a property of the tool's
//! input schema, and every property is listed — except `source` and `ref`, which every tool takes
//! and the page describes once below its table.

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::path::PathBuf;

    /// The repository root: above this crate's run-time `CARGO_MANIFEST_DIR` (right even when a
    /// test binary built from another checkout is reused), else the build-time one.
    fn repo_root() -> PathBuf {
        let manifest = std::env::var_os("CARGO_MANIFEST_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into());
        manifest.parent().expect("serve/ sits in the workspace root").to_path_buf()
    }

    fn read(rel: &str) -> String {
        std::fs::read_to_string(repo_root().join(rel)).unwrap_or_else(|e| panic!("reading {rel}: {e}"))
    }

    /// The backticked spans of `cell`.
    fn spans(cell: &str) -> Vec<String> {
        cell.split('`').skip(1).step_by(2).map(str::to_string).collect()
    }

    /// The first two cells of each row of the first table of `doc` under its header row.
    fn rows(doc: &str) -> Vec<(String, String)> {
        doc.lines()
            .skip_while(|l| !l.starts_with("|---"))
            .skip(1)
            .take_while(|l| l.starts_with('|'))
            .map(|l| {
                let cells: Vec<&str> = l.split('|').map(str::trim).collect();
                (cells.get(1).unwrap_or(&"").to_string(), cells.get(2).unwrap_or(&"").to_string())
            })
            .collect()
    }

    /// `(METHOD, /path)` of every `.route(…)` in `src` (the handlers on the same line), `{param}`
    /// kept, a trailing `/` dropped.
    fn declared_routes(src: &str) -> BTreeSet<(String, String)> {
        let mut out = BTreeSet::new();
        for (at, _) in src.match_indices(".route(\"") {
            let rest = &src[at + ".route(\"".len()..];
            let rest = rest.lines().next().unwrap_or_default();
            let Some((path, handlers)) = rest.split_once('"') else { continue };
            let path = if path.len() > 1 { path.trim_end_matches('/') } else { path };
            for method in ["get", "post", "put", "delete"] {
                let called = handlers.match_indices(&format!("{method}(")).any(|(i, _)| {
                    i == 0 || !handlers[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == ':')
                });
                if called {
                    out.insert((method.to_uppercase(), path.to_string()));
                }
            }
        }
        out
    }

    /// Whether the documented `doc` path is the declared `route` (equal, or a value where the
    /// route has a `{param}`; `<name>` in the doc is a parameter).
    fn documents(doc: &str, route: &str) -> bool {
        let (d, r): (Vec<&str>, Vec<&str>) = (doc.split('/').collect(), route.split('/').collect());
        d.len() == r.len()
            && d.iter().zip(&r).all(|(d, r)| d == r || r.starts_with('{') || (d.starts_with('<') && r.starts_with('{')))
    }

    /// Every route `http.rs` and `ui.rs` declare.
    fn router_routes() -> BTreeSet<(String, String)> {
        let declared: BTreeSet<(String, String)> =
            [read("serve/src/http.rs"), read("serve/src/ui.rs")].iter().flat_map(|s| declared_routes(s)).collect();
        assert!(declared.len() >= 20, "the router's routes were not read: {declared:?}");
        declared
    }

    /// Fails with every route the router serves that `listed` (by `what`) lacks, and every
    /// listed one it does not serve.
    fn assert_same_routes(listed: &[(String, String)], what: &str) {
        let declared = router_routes();
        let mut drift = Vec::new();
        for (method, route) in &declared {
            if !listed.iter().any(|(m, d)| m == method && documents(d, route)) {
                drift.push(format!("{method} {route} is served but {what} lacks it"));
            }
        }
        for (method, doc) in listed {
            if !declared.iter().any(|(m, r)| m == method && documents(doc, r)) {
                drift.push(format!("{what} has {method} {doc}, which the router does not serve"));
            }
        }
        assert!(drift.is_empty(), "{}", drift.join("\n"));
    }

    #[test]
    fn every_route_is_documented_and_every_documented_route_exists() {
        let page = read("docs/reference/http.md");
        let documented: Vec<(String, String)> = rows(&page)
            .iter()
            .flat_map(|(first, _)| spans(first))
            .filter_map(|s| {
                let (method, path) = s.split_once(' ')?;
                let path = path.split('?').next().unwrap_or(path);
                let path = if path.len() > 1 { path.trim_end_matches('/') } else { path };
                Some((method.to_string(), path.to_string()))
            })
            .collect();
        assert_same_routes(&documented, "the table of docs/reference/http.md");
    }

    #[test]
    fn the_openapi_document_has_every_route_and_no_other() {
        assert_same_routes(&crate::openapi::routes(), "/openapi.json");
    }

    #[test]
    fn every_mcp_tool_and_argument_is_documented_and_nothing_else() {
        let page = read("docs/reference/mcp-tools.md");
        let rows = rows(&page);
        assert!(rows.len() >= 10, "the page's table was not read");
        let mut drift = Vec::new();
        let tools = crate::mcp_catalog::tools();
        let mut named = BTreeSet::new();
        for (first, args) in &rows {
            let documented: BTreeSet<String> = spans(args).into_iter().collect();
            for name in spans(first) {
                named.insert(name.clone());
                let Some(tool) = tools.iter().find(|t| t["name"] == name.as_str()) else {
                    drift.push(format!("docs/reference/mcp-tools.md lists `{name}`, which the catalog does not offer"));
                    continue;
                };
                let properties: BTreeSet<String> = tool["inputSchema"]["properties"]
                    .as_object()
                    .map(|p| p.keys().filter(|k| *k != "source" && *k != "ref").cloned().collect())
                    .unwrap_or_default();
                for arg in documented.difference(&properties) {
                    drift.push(format!("mcp-tools.md gives `{name}` the argument `{arg}`, which its schema lacks"));
                }
                for arg in properties.difference(&documented) {
                    drift.push(format!("`{name}` takes `{arg}`, which mcp-tools.md does not list"));
                }
            }
        }
        for tool in &tools {
            let name = tool["name"].as_str().unwrap_or_default();
            if !named.contains(name) {
                drift.push(format!("the catalog offers `{name}`, which docs/reference/mcp-tools.md does not list"));
            }
        }
        assert!(drift.is_empty(), "{}", drift.join("\n"));
    }

    #[test]
    fn routes_are_read_with_every_method_and_parameters_match() {
        let src = ".route(\"/mcp\", post(crate::mcp_http::mcp).get(crate::mcp_http::mcp_get))\n\
                   .route(\"/ui/\", get(|| async { asset(\"\") }))\n.route(\"/x\", post(tools::get))\n";
        let r = declared_routes(src);
        assert!(r.contains(&("POST".into(), "/mcp".into())) && r.contains(&("GET".into(), "/mcp".into())), "{r:?}");
        assert!(r.contains(&("GET".into(), "/ui".into())));
        assert!(!r.contains(&("GET".into(), "/x".into())), "a handler named get is no GET route: {r:?}");
        assert!(documents("/v1/symbols/list", "/v1/symbols/{which}"));
        assert!(documents("/v1/sessions/<id>", "/v1/sessions/{id}"));
        assert!(!documents("/v1/sessions", "/v1/sessions/{id}"));
    }
}
