//! Localization as a prior for other routes: when a `context` query reads like an issue (a
//! bug report, a traceback, a task of several sentences), the files `locate` ranks first
//! lift their chunks among the candidates, so the budget goes to the files a fix would touch
//! rather than to whichever chunks share the most words with the text.
//!
//! Short questions ("how is the config loaded?") are left to the routed search: the file-level
//! signals (frames, paths, the graph's walk from the best files) need the many clues a long
//! text carries, and a one-line question gains nothing from them (CoSQA- and SciFact-like
//! queries never take this path).
//!
//! The prior is a multiplier per file: `1 + BOOST × (1 − rank / PRIOR_FILES)` for the first
//! [`PRIOR_FILES`] located files (rank 0 gets `1 + BOOST`), 1 elsewhere. Chunks keep their
//! order within a file; a located file with no candidate chunk gains nothing (the prior
//! reorders, it does not fetch).

use std::collections::HashMap;

use super::request::LocateRequest;
use super::text::Issue;
use super::Locator;
use ctxd_search::error::SearchError;

/// Located files that lift their chunks.
pub const PRIOR_FILES: usize = 10;
/// The multiplier of the first located file is `1 + BOOST`.
const BOOST: f32 = 1.0;
/// Words of prose from which a text without frames counts as issue-like.
const ISSUE_WORDS: usize = 40;

/// Whether a text reads like an issue: it has stack frames, or a title line followed by at
/// least [`ISSUE_WORDS`] words of prose.
pub fn is_issue_like(text: &str, issue: &Issue) -> bool {
    !issue.frames.is_empty() || (text.trim().contains('\n') && issue.prose.split_whitespace().count() >= ISSUE_WORDS)
}

/// The prior of a text: located file path → multiplier (empty when the text is not issue-like).
#[derive(Debug, Clone, Default)]
pub struct FilePrior {
    /// The located files in rank order.
    pub files: Vec<String>,
    factor: HashMap<String, f32>,
}

impl FilePrior {
    /// The multiplier of a file's chunks.
    pub fn factor(&self, path: &str) -> f32 {
        self.factor.get(path).copied().unwrap_or(1.0)
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    fn from_ranking(files: Vec<String>) -> Self {
        let n = files.len().max(1) as f32;
        let factor = files.iter().enumerate().map(|(i, p)| (p.clone(), 1.0 + BOOST * (1.0 - i as f32 / n))).collect();
        Self { files, factor }
    }
}

impl Locator {
    /// The file prior of `text` in the snapshot `as_of` (see the module docs).
    pub async fn file_prior(&self, text: &str, as_of: Option<&str>) -> Result<FilePrior, SearchError> {
        if !is_issue_like(text, &super::text::read(text)) {
            return Ok(FilePrior::default());
        }
        let mut req = LocateRequest::new(text);
        req.k = PRIOR_FILES;
        req.definitions = 0;
        req.as_of = as_of.map(str::to_string);
        let answer = self.locate(&req.check()?).await?;
        Ok(FilePrior::from_ranking(answer.files.into_iter().map(|f| f.path).collect()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::locate::text::read;

    #[test]
    fn short_questions_are_not_issues_and_reports_are() {
        let q = "how is the config loaded?";
        assert!(!is_issue_like(q, &read(q)));
        let one_line = "word ".repeat(60);
        assert!(!is_issue_like(&one_line, &read(&one_line)), "one line is a query, however long");
        let report = format!(
            "Parser drops the alias of a lambda argument\n{}",
            "When I parse a query with a lambda inside an aggregate the alias is lost and the output differs. "
                .repeat(4)
        );
        assert!(is_issue_like(&report, &read(&report)));
        let trace =
            "boom\nTraceback (most recent call last):\n  File \"pkg/mod.py\", line 3, in f\n    g()\nValueError: x";
        assert!(is_issue_like(trace, &read(trace)));
    }

    #[test]
    fn the_first_file_gets_the_largest_lift() {
        let p = FilePrior::from_ranking(vec!["a.py".into(), "b.py".into()]);
        assert_eq!(p.factor("a.py"), 1.0 + BOOST);
        assert!(p.factor("b.py") > 1.0 && p.factor("b.py") < p.factor("a.py"));
        assert_eq!(p.factor("c.py"), 1.0);
        assert!(FilePrior::default().is_empty());
    }
}
