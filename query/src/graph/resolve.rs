//! INTERIM (written by the lead so the workspace compiles; helper: replace this whole file
//! freely, keeping these two signatures: `FileSet::new`, `resolve_import`).

use std::collections::HashSet;

/// Every indexed path.
pub struct FileSet {
    paths: HashSet<String>,
    list: Vec<String>,
}

impl FileSet {
    pub fn new(paths: impl IntoIterator<Item = String>) -> Self {
        let list: Vec<String> = paths.into_iter().collect();
        Self { paths: list.iter().cloned().collect(), list }
    }
    pub fn contains(&self, p: &str) -> bool {
        self.paths.contains(p)
    }
    fn by_suffix(&self, suffix: &str) -> Vec<String> {
        let mut v: Vec<String> =
            self.list.iter().filter(|p| *p == suffix || p.ends_with(&format!("/{suffix}"))).cloned().collect();
        v.sort_by_key(|p| p.len());
        v
    }
}

/// The indexed files an import points at (Python only in this interim version).
pub fn resolve_import(
    files: &FileSet,
    language: &str,
    from_path: &str,
    target: &str,
    name: Option<&str>,
) -> Vec<String> {
    if language != "python" {
        return Vec::new();
    }
    let dots = target.chars().take_while(|c| *c == '.').count();
    let rest = &target[dots..];
    let module_paths = |base: &str| -> Vec<String> {
        let b = base.trim_matches('/');
        let mut out = Vec::new();
        for cand in [format!("{b}.py"), format!("{b}/__init__.py")] {
            if dots > 0 {
                if files.contains(&cand) {
                    out.push(cand);
                }
            } else {
                out.extend(files.by_suffix(&cand).into_iter().take(1));
            }
        }
        out
    };
    let base = if dots > 0 {
        let mut dir: Vec<&str> = from_path.split('/').collect();
        dir.pop();
        for _ in 1..dots {
            dir.pop();
        }
        let mut b = dir.join("/");
        if !rest.is_empty() {
            if !b.is_empty() {
                b.push('/');
            }
            b.push_str(&rest.replace('.', "/"));
        }
        b
    } else {
        rest.replace('.', "/")
    };
    if let Some(n) = name {
        let sub = module_paths(&format!("{base}/{n}"));
        if !sub.is_empty() {
            return sub;
        }
    }
    module_paths(&base)
}
