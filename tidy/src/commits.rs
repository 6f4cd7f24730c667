//! Commit subjects: every commit after [`SINCE`] (the last one written before the rule) has a
//! subject of at most [`MAX_SUBJECT`] characters — what changed, in one line a log or a web view
//! shows whole; the why and the figures go in the body.
//!
//! Read with the `git` on `PATH` from the checkout under test. Where there is no history to read
//! (not a git checkout, no `git`, or a shallow clone without [`SINCE`]) the check says it could
//! not run, and why, rather than pass in silence.

use std::path::Path;
use std::process::Command;

/// The last commit before the rule: its subject and those before it are history.
pub const SINCE: &str = "9b5b019bbf3d1b534e388308b66e821f363ca7fc";
/// The longest subject a commit after [`SINCE`] may have, in characters.
pub const MAX_SUBJECT: usize = 72;

/// A commit whose subject is too long.
#[derive(Debug, PartialEq, Eq)]
pub struct LongSubject {
    pub commit: String,
    pub chars: usize,
    pub subject: String,
}

impl std::fmt::Display for LongSubject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "commit {} has a subject of {} characters (at most {MAX_SUBJECT}): \"{}\" — say what changed in the \
             subject and move the rest to the body (`git commit --amend`, or `git rebase -i` for an older one)",
            &self.commit[..self.commit.len().min(10)],
            self.chars,
            self.subject
        )
    }
}

/// The commits after [`SINCE`] up to `HEAD` of the checkout at `root` whose subjects are too long;
/// `Err` says why the history could not be read.
pub fn long_subjects(root: &Path) -> Result<Vec<LongSubject>, String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["log", "--format=%H%x00%s", &format!("{SINCE}..HEAD")])
        .output()
        .map_err(|e| format!("running git: {e}"))?;
    if !out.status.success() {
        let said = String::from_utf8_lossy(&out.stderr);
        return Err(format!("git log {SINCE}..HEAD failed (a shallow clone lacks it?): {}", said.trim()));
    }
    Ok(too_long(&String::from_utf8_lossy(&out.stdout)))
}

/// The lines of `git log --format=%H%x00%s` whose subjects are too long.
fn too_long(log: &str) -> Vec<LongSubject> {
    log.lines()
        .filter_map(|l| l.split_once('\0'))
        .filter(|(_, s)| s.chars().count() > MAX_SUBJECT)
        .map(|(c, s)| LongSubject { commit: c.to_string(), chars: s.chars().count(), subject: s.to_string() })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_subjects_over_the_limit_are_reported_with_their_length() {
        let short = "a".repeat(MAX_SUBJECT);
        let long = format!("{short}é");
        let log = format!("c1\0{short}\nc2\0{long}\n");
        let found = too_long(&log);
        assert_eq!(found, vec![LongSubject { commit: "c2".into(), chars: MAX_SUBJECT + 1, subject: long }]);
        assert!(found[0].to_string().contains("73 characters (at most 72)"), "{}", found[0]);
    }
}
