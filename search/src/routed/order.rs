//! What fusion's order becomes the answer: the boosts of routed search (definitions, documents,
//! named modules, the current file and folder; dependencies lowered), the request's filters
//! (`path_prefix`, `language`, `scope`), the files a path route names answered first, and the
//! per-file cap.

use std::collections::{HashMap, HashSet};

use ctxd_index::record::Hit;

use crate::route::{Analysis, IntentWeights};
use crate::search::{Scope, SearchRequest, SearchResult};

/// Folders whose contents count as dependencies, not the project.
const DEPENDENCY_DIRS: &[&str] =
    &["node_modules", "vendor", "third_party", "third-party", "external", "site-packages", ".venv", "venv", "deps"];

/// A chunk of a definition kind ([`ctxd_index::symbols::is_definition`], the symbols table's rule too).
fn is_definition(kind: Option<&str>) -> bool {
    kind.is_some_and(ctxd_index::symbols::is_definition)
}

/// A language label of prose (Markdown, reST, text, HTML, PDF, notebooks).
pub fn is_document(language: &str) -> bool {
    matches!(language, "markdown" | "rst" | "text" | "html" | "pdf" | "notebook")
}

fn parent_dir(path: &str) -> &str {
    path.rsplit_once('/').map(|(d, _)| d).unwrap_or("")
}

fn in_dependency(path: &str) -> bool {
    path.split('/').any(|seg| DEPENDENCY_DIRS.contains(&seg))
}

/// Multiplies each fused hit's score by the boosts the query and request call for, then sorts
/// best first.
pub(super) fn boost(fused: &mut [Hit], req: &SearchRequest, a: &Analysis, w: &IntentWeights) {
    let current = req.current_file.as_deref().map(|f| f.trim_start_matches("./"));
    let current_dir = current.map(parent_dir);
    for h in fused.iter_mut() {
        let mut m = 1.0;
        if is_definition(h.kind.as_deref()) {
            m *= w.definition_boost;
        }
        if is_document(&h.language) {
            m *= w.doc_boost;
        }
        if a.modules.iter().any(|md| {
            let md = md.to_lowercase();
            h.path.to_lowercase().split('/').any(|seg| seg == md)
        }) {
            m *= 1.25;
        }
        // Vendored and installed copies rank below the project's own code.
        if req.scope != Some(Scope::Dependencies) && in_dependency(&h.path) {
            m *= 0.9;
        }
        if current == Some(h.path.as_str()) {
            m *= 1.2;
        } else if current_dir.is_some_and(|d| !d.is_empty() && parent_dir(&h.path) == d) {
            m *= 1.1;
        }
        h.score *= m;
    }
    fused.sort_by(|x, y| y.score.total_cmp(&x.score));
}

/// The request's filters: which hits may be answered.
pub(super) struct Filter<'a> {
    req: &'a SearchRequest,
    current: Option<&'a str>,
    current_dir: Option<&'a str>,
}

impl<'a> Filter<'a> {
    pub(super) fn new(req: &'a SearchRequest) -> Self {
        let current = req.current_file.as_deref().map(|f| f.trim_start_matches("./"));
        Filter { req, current, current_dir: current.map(parent_dir) }
    }

    /// Whether `h` passes `path_prefix`, `language` and `scope`.
    pub(super) fn passes(&self, h: &Hit) -> bool {
        let req = self.req;
        if req.path_prefix.as_ref().is_some_and(|p| !h.path.starts_with(p.trim_start_matches("./"))) {
            return false;
        }
        if req.language.is_some_and(|l| !h.language.eq_ignore_ascii_case(l.as_str())) {
            return false;
        }
        match req.scope {
            None => true,
            Some(Scope::File) => self.current == Some(h.path.as_str()),
            Some(Scope::Module) => self.current_dir.is_some_and(|d| h.path.starts_with(d)),
            Some(Scope::Project) => !in_dependency(&h.path),
            Some(Scope::Dependencies) => in_dependency(&h.path),
        }
    }
}

/// The chunks of the files a path route names first (scored above the best of the rest, in
/// their order), then the rest; and those files, which the per-file cap leaves alone.
pub(super) fn pin(mut fused: Vec<Hit>, mut pinned: Vec<Hit>) -> (Vec<Hit>, HashSet<String>) {
    let named: HashSet<String> = pinned.iter().map(|h| h.path.clone()).collect();
    if pinned.is_empty() {
        return (fused, named);
    }
    let top = fused.first().map_or(1.0, |h| h.score.max(1e-6));
    let pinned_ids: HashSet<String> = pinned.iter().map(|h| h.chunk_id.clone()).collect();
    fused.retain(|h| !pinned_ids.contains(&h.chunk_id));
    let n = pinned.len();
    for (i, h) in pinned.iter_mut().enumerate() {
        h.score = top * (2.0 - i as f32 / n as f32);
    }
    pinned.append(&mut fused);
    (pinned, named)
}

/// The first `k` hits that pass `filter`, at most `max_per_file` (default 3) per file except the
/// `named` ones.
pub(super) fn capped(
    fused: Vec<Hit>,
    filter: &Filter<'_>,
    named: &HashSet<String>,
    k: usize,
    max_per_file: Option<usize>,
) -> Vec<SearchResult> {
    let cap = max_per_file.unwrap_or(3).max(1);
    let mut per_file: HashMap<String, usize> = HashMap::new();
    let mut results = Vec::with_capacity(k);
    for h in fused {
        if !filter.passes(&h) {
            continue;
        }
        let n = per_file.entry(h.path.clone()).or_default();
        if *n >= cap && !named.contains(&h.path) {
            continue;
        }
        *n += 1;
        results.push(SearchResult::from(h));
        if results.len() >= k {
            break;
        }
    }
    results
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dependency_folders_and_kinds() {
        assert!(in_dependency("web/node_modules/react/index.js"));
        assert!(!in_dependency("src/vendor_api.rs"));
        assert!(is_definition(Some("function_part")) && !is_definition(Some("section")) && !is_definition(None));
    }
}
