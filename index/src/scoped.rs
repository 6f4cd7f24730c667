//! Scoped views of an [`Index`]: [`Index::scoped`] narrows every read to a [`SourceScope`] and
//! reads a git ref stored as an overlay through its base ([`crate::overlay`]); the helpers every
//! read uses to filter (`within`), keep (`sees`) and show (`show`, `shown`) rows of such a view,
//! and [`PathAnswers`] for reads by path.

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use lancedb::query::QueryBase;

use crate::overlay::Lens;
use crate::reader::Reads;
use crate::scope::SourceScope;
use crate::{error::IndexError, store::Index};

/// Which asked path a row read by path answers (see [`Index::stored_paths`]).
#[derive(Default)]
pub(crate) struct PathAnswers {
    asked: std::collections::HashSet<String>,
    /// Base path → the overlay view's path asked for (when the scope holds the base too, its
    /// rows come back under the base's path).
    by_base: HashMap<String, String>,
    lens: Option<Arc<Lens>>,
}

impl PathAnswers {
    /// The path asked for that a row shown as `shown` answers, and the path the row should
    /// show (`None`: it answers none). A base path asked for (a path found in the whole index's
    /// vocabulary) is answered by the base row the overlay shows under its view.
    pub(crate) fn answer(&self, shown: &str) -> Option<(String, String)> {
        if self.asked.contains(shown) {
            return Some((shown.to_string(), shown.to_string()));
        }
        if let Some(view_path) = self.by_base.get(shown) {
            return Some((view_path.clone(), view_path.clone()));
        }
        let base = self.lens.as_ref()?.stored(shown)?;
        self.asked.contains(&base).then(|| (base, shown.to_string()))
    }
}

/// What decides how a scoped view shows a row: its scope and its overlays.
pub(crate) struct ScopedPaths {
    scope: Arc<SourceScope>,
    lens: Option<Arc<Lens>>,
}

impl ScopedPaths {
    /// See [`Index::show`].
    pub(crate) fn show<'a>(&self, path: &'a str) -> Option<std::borrow::Cow<'a, str>> {
        show_in(&self.scope, self.lens.as_deref(), path)
    }
}

/// `path` as a view of `scope` through `lens` shows it (see [`Index::show`]).
fn show_in<'a>(scope: &SourceScope, lens: Option<&Lens>, path: &'a str) -> Option<std::borrow::Cow<'a, str>> {
    if scope.allows(path) {
        return Some(std::borrow::Cow::Borrowed(path));
    }
    lens?.show(path).map(std::borrow::Cow::Owned)
}

impl Index {
    /// A view of the same tables that reads only the sources of `scope` (`None`: all), and
    /// reads a git ref stored as an overlay through its base ([`crate::overlay`]). Cheap: the
    /// table handles are shared (the overlays are cached per process); the view never writes.
    pub async fn scoped(&self, scope: Option<SourceScope>) -> Result<Index, IndexError> {
        let lens = match &scope {
            Some(s) => {
                // A view of a past version (`as_of`) reads the overlays recorded then.
                let as_of = self.pinned.map(|v| (v, self.table_name.as_str()));
                let lens = Lens::of(s.names(), &*self.overlays().await?, as_of);
                (!lens.is_empty()).then(|| Arc::new(lens))
            }
            None => None,
        };
        Ok(Index {
            uri: self.uri.clone(),
            table_name: self.table_name.clone(),
            table: self.table.clone(),
            symbols: self.symbols.clone(),
            edges: self.edges.clone(),
            streams: self.streams.clone(),
            dim: self.dim,
            model_id: self.model_id.clone(),
            fts_ready: AtomicBool::new(self.fts_ready.load(std::sync::atomic::Ordering::Acquire)),
            keyed: self.keyed,
            vectorless: self.vectorless,
            has_source: self.has_source,
            has_late: self.has_late,
            named_sources: AtomicBool::new(false),
            scope: scope.map(Arc::new),
            lens,
            pinned: self.pinned,
            pinned_history: self.pinned_history,
            overlays: self.overlays.clone(),
        })
    }

    /// The git refs' overlays for a read of this handle's version (the pinned one, else the
    /// table's latest as this handle knows it): read again when the cached ones were read for
    /// an older version ([`crate::overlay::OverlayCache::current`]).
    async fn overlays(&self) -> Result<Arc<crate::overlay::Overlays>, IndexError> {
        let version = match self.pinned {
            Some(v) => v,
            None => self.version().await?,
        };
        self.overlays.current(&self.uri, (&self.table_name, version)).await
    }

    /// Text that tells views of different scopes apart in a cache key (`""` without a scope).
    pub fn scope_key(&self) -> String {
        let lens = self.lens.as_ref().map_or_else(String::new, |l| format!("|overlays@{}", l.version));
        self.scope.as_ref().map_or_else(String::new, |s| format!("scope:{}{lens}", s.key()))
    }

    /// Every row of `table` (a chunks or side table) that the scope reads.
    pub(crate) async fn scoped_rows(
        &self,
        table: &lancedb::Table,
    ) -> Result<Vec<arrow_array::RecordBatch>, IndexError> {
        let mut query = table.query();
        if let Some(scope) = self.within(None) {
            query = query.only_if(scope);
        }
        self.collect(query).await
    }

    /// `filter` narrowed to the scope (the scope's filter alone when `filter` is `None`),
    /// with the base rows its overlays read.
    pub(crate) fn within(&self, filter: Option<String>) -> Option<String> {
        let scope = self.scope.as_ref().map(|s| {
            let own = s.filter();
            match &self.lens {
                None => own,
                Some(lens) => format!("({own} OR {})", lens.filter_terms().join(" OR ")),
            }
        });
        match (scope, filter) {
            (None, f) => f,
            (Some(s), None) => Some(s),
            (Some(s), Some(f)) => Some(format!("{s} AND ({f})")),
        }
    }

    /// Whether a row of `path` is this view's own (in its scope; not through an overlay).
    pub(crate) fn sees(&self, path: &str) -> bool {
        self.scope.as_ref().is_none_or(|s| s.allows(path))
    }

    /// The path a row stored under `path` shows as in this view: itself when the view's
    /// scope holds it, the overlay view's path for a base row an overlay reads, `None` when
    /// the row is not in this view.
    pub(crate) fn show<'a>(&self, path: &'a str) -> Option<std::borrow::Cow<'a, str>> {
        match &self.scope {
            None => Some(std::borrow::Cow::Borrowed(path)),
            Some(scope) => show_in(scope, self.lens.as_deref(), path),
        }
    }

    /// `row` as this view shows it (its path, reached by `path`, rewritten for a base row an
    /// overlay reads), or `None` when it is not in this view.
    pub(crate) fn shown<T>(&self, mut row: T, path: impl Fn(&mut T) -> &mut String) -> Option<T> {
        let p = path(&mut row);
        let shown = self.show(p)?.into_owned();
        *p = shown;
        Some(row)
    }

    /// A copy of this view's scope and overlays, for a stream that outlives `&self` (`None`
    /// without a scope).
    pub(crate) fn scoped_copy(&self) -> Option<ScopedPaths> {
        self.scope.as_ref().map(|s| ScopedPaths { scope: s.clone(), lens: self.lens.clone() })
    }

    /// The stored paths to read for `paths` (with the base's path of a view path an overlay
    /// shares), and [`PathAnswers`] to file what comes back under the path asked for.
    pub(crate) fn stored_paths(&self, paths: &[String]) -> (Vec<String>, PathAnswers) {
        let mut stored = paths.to_vec();
        let mut answers = PathAnswers { asked: paths.iter().cloned().collect(), ..Default::default() };
        if let Some(lens) = &self.lens {
            for p in paths {
                if let Some(base) = lens.stored(p) {
                    answers.by_base.insert(base.clone(), p.clone());
                    stored.push(base);
                }
            }
            answers.lens = Some(lens.clone());
        }
        (stored, answers)
    }

    /// Marks this (writer's) handle as written by a pipeline of named sources: rows get their
    /// path's first segment as `source` ([`crate::schema::SOURCE`]).
    pub fn name_sources(&self, on: bool) {
        self.named_sources.store(on, std::sync::atomic::Ordering::Relaxed);
    }
}

impl Reads<'_> {
    /// The version of the git refs' overlays table as this process last read it (0: none;
    /// see [`crate::overlay::OverlayCache::current`]): part of the key of anything cached per version.
    pub async fn overlays_version(self) -> Result<u64, IndexError> {
        Ok(self.index.overlays().await?.version)
    }
}
