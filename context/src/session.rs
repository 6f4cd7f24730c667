//! Sessions: what one agent has already been sent, so later answers of the same task do not
//! repeat it.
//!
//! A session is named by its caller (`session` in a request; an MCP stdio process is one
//! session of its own). Per session the store keeps the **chunks sent** — keyed by chunk id,
//! which is the path, the line range and the content hash, so an edit (or lines moving) makes a
//! chunk new again — with their citation, and the **tokens and calls per tool**. A context
//! assembled in a session leaves out the candidates it has already sent and cites them in one
//! line each (`already sent: path:start-end`), spending the budget on what is new.
//!
//! Bounds: a session unused for [`SessionLimits::ttl`] is dropped; at most
//! [`SessionLimits::max_sessions`] are kept and at most [`SessionLimits::max_bytes`] of
//! estimated memory (the least recently used go first); one session remembers at most
//! [`MAX_SENT_PER_SESSION`] chunks (the oldest forgotten first: such a chunk is simply sent
//! again). Metrics count sessions, their tokens per tool and the chunks not repeated — never a
//! label per session.
//!
//! Each session also keeps its last [`MAX_ANSWERS_PER_SESSION`] answers as [`AnswerNote`]s —
//! the question, what went whole, as a skeleton or was cited again, and the tokens that citing
//! saved — for the web page's sessions view (`GET /v1/sessions`).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use ctxd_search::error::SearchError;

/// Chunks one session remembers at most.
pub const MAX_SENT_PER_SESSION: usize = 20_000;
/// Longest session id accepted.
pub const MAX_SESSION_ID: usize = 128;
/// Estimated bytes of one remembered chunk beyond its citation (key, map and queue slots).
const ENTRY_OVERHEAD: usize = 64;
/// Answers one session keeps notes of (the oldest dropped first).
pub const MAX_ANSWERS_PER_SESSION: usize = 20;
/// Characters of the question an [`AnswerNote`] keeps.
const NOTE_QUERY_CHARS: usize = 200;

/// One answer given in a session: what the sessions page shows of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AnswerNote {
    pub tool: Tool,
    /// The question (its first 200 characters).
    pub query: String,
    /// Blocks sent whole, as `path:start-end`.
    pub whole: Vec<String>,
    /// Blocks sent as signature skeletons.
    pub skeletons: Vec<String>,
    /// Candidates not repeated: cited in one line because this session was sent them before.
    pub cited: Vec<String>,
    /// Tokens the answer used.
    pub tokens: usize,
    /// Tokens the cited candidates would have cost sent again, less their citation line.
    pub tokens_saved: usize,
    /// Seconds since the Unix epoch.
    pub unix: u64,
}

impl AnswerNote {
    /// A note of an answer to `query` given now (the lists and counts filled in by the caller).
    pub fn new(tool: Tool, query: &str) -> Self {
        Self {
            tool,
            query: query.chars().take(NOTE_QUERY_CHARS).collect(),
            whole: Vec::new(),
            skeletons: Vec::new(),
            cited: Vec::new(),
            tokens: 0,
            tokens_saved: 0,
            unix: unix_now(),
        }
    }

    fn bytes(&self) -> usize {
        let list = |v: &Vec<String>| v.iter().map(|c| c.len() + 24).sum::<usize>();
        self.query.len() + list(&self.whole) + list(&self.skeletons) + list(&self.cited) + ENTRY_OVERHEAD
    }
}

/// The surfaces a session's tokens are counted by (closed set: a label value).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tool {
    Context,
    Search,
    Locate,
    Symbols,
    Graph,
}

impl Tool {
    pub fn as_str(self) -> &'static str {
        match self {
            Tool::Context => "context",
            Tool::Search => "search",
            Tool::Locate => "locate",
            Tool::Symbols => "symbols",
            Tool::Graph => "graph",
        }
    }
}

/// How long and how many sessions are kept.
#[derive(Debug, Clone, Copy)]
pub struct SessionLimits {
    pub ttl: Duration,
    pub max_sessions: usize,
    pub max_bytes: usize,
}

impl Default for SessionLimits {
    fn default() -> Self {
        Self { ttl: Duration::from_secs(2 * 3600), max_sessions: 1_000, max_bytes: 64 << 20 }
    }
}

/// Checks a session id: 1–128 characters of `A-Z a-z 0-9 . _ : -`.
pub fn validate_id(id: &str) -> Result<(), SearchError> {
    let ok = !id.is_empty()
        && id.len() <= MAX_SESSION_ID
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(SearchError::BadRequest(format!(
            "session id '{}' is not valid: use 1 to {MAX_SESSION_ID} characters of letters, digits, '.', '_', ':' and '-'",
            id.chars().take(40).collect::<String>()
        )))
    }
}

/// Most citations the `already sent` line lists (the rest are counted: `+N more`).
pub const MAX_CITED: usize = 30;

/// The one line that cites what a session was already sent, in `path:start-end` ranges (the
/// ranges of one file merged where they overlap or touch); `None` when nothing was.
pub fn already_sent_line(mut ranges: Vec<(String, u32, u32)>) -> Option<(String, Vec<String>)> {
    if ranges.is_empty() {
        return None;
    }
    ranges.sort();
    let mut merged: Vec<(String, u32, u32)> = Vec::new();
    for (path, start, end) in ranges {
        match merged.last_mut() {
            Some((p, _, e)) if *p == path && start <= *e + 1 => *e = (*e).max(end),
            _ => merged.push((path, start, end)),
        }
    }
    let citations: Vec<String> = merged.iter().map(|(p, s, e)| format!("{p}:{s}-{e}")).collect();
    let shown = citations.len().min(MAX_CITED);
    let mut line = format!("already sent: {}", citations[..shown].join(", "));
    if citations.len() > shown {
        line.push_str(&format!(" (+{} more)", citations.len() - shown));
    }
    Some((line, citations))
}

/// Per-tool usage of a session.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ToolUsage {
    pub calls: u64,
    pub tokens: u64,
}

/// What `GET /v1/sessions/<id>` shows.
#[derive(Debug, Clone, Serialize)]
pub struct SessionUsage {
    pub session: String,
    /// Chunks remembered as sent.
    pub chunks_sent: usize,
    /// Candidates left out because they were sent before (cited instead), over the session.
    pub repeats_avoided: u64,
    pub tokens: u64,
    /// Tokens its kept answers saved by citing instead of repeating ([`AnswerNote::tokens_saved`]).
    pub tokens_saved: u64,
    pub tools: BTreeMap<Tool, ToolUsage>,
    pub age_seconds: u64,
    pub idle_seconds: u64,
    /// Seconds until it expires if unused.
    pub expires_in_seconds: u64,
    /// Its last answers, oldest first.
    pub answers: Vec<AnswerNote>,
}

/// A session written to disk between processes (the CLI's `--session`: each `ctxd context`
/// is a process of its own).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SavedSession {
    /// `(chunk id, citation)`, oldest first.
    pub sent: Vec<(String, String)>,
    pub tools: BTreeMap<Tool, ToolUsage>,
    pub repeats_avoided: u64,
    pub created_unix: u64,
    pub last_used_unix: u64,
}

fn unix_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

struct Session {
    created: Instant,
    last_used: Instant,
    /// chunk id → citation.
    sent: HashMap<String, String>,
    order: VecDeque<String>,
    bytes: usize,
    tools: BTreeMap<Tool, ToolUsage>,
    repeats_avoided: u64,
    /// The last answers, oldest first.
    answers: VecDeque<AnswerNote>,
}

impl Session {
    fn new(now: Instant) -> Self {
        Self {
            created: now,
            last_used: now,
            sent: HashMap::new(),
            order: VecDeque::new(),
            bytes: 256,
            tools: BTreeMap::new(),
            repeats_avoided: 0,
            answers: VecDeque::new(),
        }
    }

    fn usage(&self, id: &str, now: Instant, ttl: Duration) -> SessionUsage {
        let idle = now.duration_since(self.last_used);
        SessionUsage {
            session: id.to_string(),
            chunks_sent: self.sent.len(),
            repeats_avoided: self.repeats_avoided,
            tokens: self.tools.values().map(|u| u.tokens).sum(),
            tokens_saved: self.answers.iter().map(|a| a.tokens_saved as u64).sum(),
            tools: self.tools.clone(),
            age_seconds: now.duration_since(self.created).as_secs(),
            idle_seconds: idle.as_secs(),
            expires_in_seconds: ttl.saturating_sub(idle).as_secs(),
            answers: self.answers.iter().cloned().collect(),
        }
    }
}

/// The sessions of one server; cheap to clone (clones share them).
#[derive(Clone, Default)]
pub struct Sessions {
    inner: Arc<Mutex<HashMap<String, Session>>>,
    limits: SessionLimits,
}

impl Sessions {
    pub fn new(limits: SessionLimits) -> Self {
        Self { inner: Arc::default(), limits }
    }

    pub fn limits(&self) -> SessionLimits {
        self.limits
    }

    /// Of `chunk_ids`, those this session has been sent, with their citations (none for an
    /// unknown or expired session).
    pub fn already_sent(&self, id: &str, chunk_ids: &[&str]) -> HashMap<String, String> {
        let mut map = self.lock();
        self.expire(&mut map, Instant::now());
        let Some(s) = map.get(id) else { return HashMap::new() };
        chunk_ids.iter().filter_map(|c| Some((c.to_string(), s.sent.get(*c)?.clone()))).collect()
    }

    /// Records an answer: the chunks it sent (`(chunk id, citation)`), the tokens it used, and
    /// how many candidates it cited instead of repeating. Creates the session on first use.
    pub fn record(&self, id: &str, tool: Tool, sent: &[(String, String)], tokens: usize, repeats_avoided: usize) {
        let now = Instant::now();
        let mut map = self.lock();
        self.expire(&mut map, now);
        let s = map.entry(id.to_string()).or_insert_with(|| Session::new(now));
        s.last_used = now;
        for (chunk, citation) in sent {
            if s.sent.insert(chunk.clone(), citation.clone()).is_none() {
                s.bytes += chunk.len() + citation.len() + ENTRY_OVERHEAD;
                s.order.push_back(chunk.clone());
            }
        }
        while s.order.len() > MAX_SENT_PER_SESSION {
            if let Some(old) = s.order.pop_front() {
                if let Some(c) = s.sent.remove(&old) {
                    s.bytes = s.bytes.saturating_sub(old.len() + c.len() + ENTRY_OVERHEAD);
                }
            }
        }
        let usage = s.tools.entry(tool).or_default();
        usage.calls += 1;
        usage.tokens += tokens as u64;
        s.repeats_avoided += repeats_avoided as u64;
        metrics::counter!(crate::metrics::SESSION_TOKENS_TOTAL, "tool" => tool.as_str()).increment(tokens as u64);
        metrics::counter!(crate::metrics::SESSION_REPEATS_AVOIDED_TOTAL).increment(repeats_avoided as u64);
        self.bound(&mut map);
    }

    /// Keeps a note of an answer the session was given (after [`Sessions::record`]; ignored
    /// for an unknown or expired session).
    pub fn note(&self, id: &str, note: AnswerNote) {
        let mut map = self.lock();
        let Some(s) = map.get_mut(id) else { return };
        s.bytes += note.bytes();
        s.answers.push_back(note);
        while s.answers.len() > MAX_ANSWERS_PER_SESSION {
            if let Some(old) = s.answers.pop_front() {
                s.bytes = s.bytes.saturating_sub(old.bytes());
            }
        }
        self.bound(&mut map);
    }

    /// Usage of a session (`None`: unknown or expired).
    pub fn usage(&self, id: &str) -> Option<SessionUsage> {
        let now = Instant::now();
        let mut map = self.lock();
        self.expire(&mut map, now);
        Some(map.get(id)?.usage(id, now, self.limits.ttl))
    }

    /// Every live session's usage, the most recently used first.
    pub fn list(&self) -> Vec<SessionUsage> {
        let now = Instant::now();
        let mut map = self.lock();
        self.expire(&mut map, now);
        let mut all: Vec<(Instant, SessionUsage)> =
            map.iter().map(|(id, s)| (s.last_used, s.usage(id, now, self.limits.ttl))).collect();
        all.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.session.cmp(&b.1.session)));
        all.into_iter().map(|(_, u)| u).collect()
    }

    /// The session as it can be written to disk (`None`: unknown or expired).
    pub fn save(&self, id: &str) -> Option<SavedSession> {
        let now = Instant::now();
        let mut map = self.lock();
        self.expire(&mut map, now);
        let s = map.get(id)?;
        let unix = unix_now();
        Some(SavedSession {
            sent: s.order.iter().filter_map(|c| Some((c.clone(), s.sent.get(c)?.clone()))).collect(),
            tools: s.tools.clone(),
            repeats_avoided: s.repeats_avoided,
            created_unix: unix.saturating_sub(now.duration_since(s.created).as_secs()),
            last_used_unix: unix.saturating_sub(now.duration_since(s.last_used).as_secs()),
        })
    }

    /// Takes back a saved session (ignored when it has expired since it was saved).
    pub fn restore(&self, id: &str, saved: SavedSession) {
        let unix = unix_now();
        let idle = Duration::from_secs(unix.saturating_sub(saved.last_used_unix));
        if idle >= self.limits.ttl {
            return;
        }
        let now = Instant::now();
        let back = |secs: u64| now.checked_sub(Duration::from_secs(unix.saturating_sub(secs))).unwrap_or(now);
        let mut s = Session::new(back(saved.created_unix));
        s.last_used = back(saved.last_used_unix);
        for (chunk, citation) in saved.sent.into_iter().rev().take(MAX_SENT_PER_SESSION).rev() {
            s.bytes += chunk.len() + citation.len() + ENTRY_OVERHEAD;
            s.order.push_back(chunk.clone());
            s.sent.insert(chunk, citation);
        }
        s.tools = saved.tools;
        s.repeats_avoided = saved.repeats_avoided;
        let mut map = self.lock();
        map.insert(id.to_string(), s);
        self.bound(&mut map);
    }

    /// Sessions held now.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Estimated bytes held by all sessions.
    pub fn bytes(&self) -> usize {
        self.lock().values().map(|s| s.bytes).sum()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Session>> {
        // A panic while holding the lock leaves plain data behind: keep using it.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn expire(&self, map: &mut HashMap<String, Session>, now: Instant) {
        let before = map.len();
        map.retain(|_, s| now.duration_since(s.last_used) < self.limits.ttl);
        let gone = before - map.len();
        if gone > 0 {
            metrics::counter!(crate::metrics::SESSIONS_EXPIRED_TOTAL).increment(gone as u64);
        }
        metrics::gauge!(crate::metrics::SESSIONS_ACTIVE).set(map.len() as f64);
    }

    /// Drops the least recently used sessions past the count or memory bound.
    fn bound(&self, map: &mut HashMap<String, Session>) {
        let mut bytes: usize = map.values().map(|s| s.bytes).sum();
        while map.len() > self.limits.max_sessions || (bytes > self.limits.max_bytes && map.len() > 1) {
            let Some(oldest) = map.iter().min_by_key(|(_, s)| s.last_used).map(|(k, _)| k.clone()) else { break };
            if let Some(s) = map.remove(&oldest) {
                bytes -= s.bytes;
                metrics::counter!(crate::metrics::SESSIONS_EXPIRED_TOTAL).increment(1);
            }
        }
        metrics::gauge!(crate::metrics::SESSIONS_ACTIVE).set(map.len() as f64);
        metrics::gauge!(crate::metrics::SESSIONS_BYTES).set(bytes as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sent(ids: &[&str]) -> Vec<(String, String)> {
        ids.iter().map(|i| (i.to_string(), format!("{i}:1-2"))).collect()
    }

    #[test]
    fn answer_notes_are_kept_per_session_bounded_and_listed_most_recent_first() {
        let s = Sessions::default();
        s.note("nobody", AnswerNote::new(Tool::Context, "ignored: no such session"));
        assert!(s.is_empty());
        s.record("a", Tool::Context, &sent(&["c1"]), 100, 0);
        s.record("b", Tool::Context, &sent(&["c2"]), 10, 0);
        for i in 0..MAX_ANSWERS_PER_SESSION + 3 {
            let mut note = AnswerNote::new(Tool::Context, &format!("question {i} {}", "x".repeat(300)));
            note.whole.push("lib/a.py:1-9".into());
            note.tokens_saved = 5;
            s.note("a", note);
        }
        let a = s.usage("a").unwrap();
        assert_eq!(a.answers.len(), MAX_ANSWERS_PER_SESSION, "the oldest answers are dropped");
        assert!(a.answers[0].query.starts_with("question 3 "), "{:?}", a.answers[0].query);
        assert_eq!(a.answers[0].query.chars().count(), NOTE_QUERY_CHARS);
        assert_eq!(a.tokens_saved, 5 * MAX_ANSWERS_PER_SESSION as u64);
        std::thread::sleep(Duration::from_millis(5));
        s.record("b", Tool::Search, &[], 1, 0);
        let order: Vec<String> = s.list().into_iter().map(|u| u.session).collect();
        assert_eq!(order, ["b", "a"], "most recently used first");
    }

    #[test]
    fn sessions_are_isolated_and_count_tokens_per_tool() {
        let s = Sessions::default();
        s.record("a", Tool::Context, &sent(&["c1", "c2"]), 100, 0);
        s.record("a", Tool::Context, &sent(&["c3"]), 40, 2);
        s.record("b", Tool::Symbols, &sent(&["c9"]), 7, 0);
        assert_eq!(s.already_sent("a", &["c1", "c3", "c9"]).len(), 2);
        assert!(s.already_sent("b", &["c1"]).is_empty(), "b never got c1");
        assert!(s.already_sent("nobody", &["c1"]).is_empty());
        let a = s.usage("a").unwrap();
        assert_eq!((a.chunks_sent, a.tokens, a.repeats_avoided), (3, 140, 2));
        assert_eq!(a.tools[&Tool::Context], ToolUsage { calls: 2, tokens: 140 });
        assert!(s.usage("nobody").is_none());
    }

    #[test]
    fn ttl_count_and_memory_bounds_hold() {
        let s = Sessions::new(SessionLimits { ttl: Duration::from_millis(30), max_sessions: 2, max_bytes: 1 << 20 });
        s.record("a", Tool::Context, &sent(&["x"]), 1, 0);
        std::thread::sleep(Duration::from_millis(40));
        assert!(s.usage("a").is_none(), "expired after its ttl");
        let s = Sessions::new(SessionLimits { ttl: Duration::from_secs(60), max_sessions: 2, max_bytes: 1 << 20 });
        for id in ["a", "b", "c"] {
            s.record(id, Tool::Context, &sent(&["x"]), 1, 0);
            std::thread::sleep(Duration::from_millis(2));
        }
        assert_eq!(s.len(), 2);
        assert!(s.usage("a").is_none(), "the least recently used went first");
        let s = Sessions::new(SessionLimits { ttl: Duration::from_secs(60), max_sessions: 100, max_bytes: 4_000 });
        for id in ["a", "b", "c", "d"] {
            let many: Vec<String> = (0..10).map(|i| format!("{id}-chunk-{i}")).collect();
            let refs: Vec<&str> = many.iter().map(String::as_str).collect();
            s.record(id, Tool::Context, &sent(&refs), 1, 0);
        }
        assert!(s.bytes() <= 4_000, "{} bytes held", s.bytes());
        assert!(s.usage("d").is_some());
    }

    #[test]
    fn one_session_forgets_its_oldest_chunks_past_the_cap() {
        let s = Sessions::default();
        let ids: Vec<String> = (0..MAX_SENT_PER_SESSION + 5).map(|i| format!("c{i}")).collect();
        let all: Vec<(String, String)> = ids.iter().map(|i| (i.clone(), i.clone())).collect();
        s.record("a", Tool::Context, &all, 1, 0);
        assert_eq!(s.usage("a").unwrap().chunks_sent, MAX_SENT_PER_SESSION);
        assert!(s.already_sent("a", &["c0"]).is_empty() && s.already_sent("a", &["c20004"]).len() == 1);
    }

    #[test]
    fn the_already_sent_line_merges_ranges_of_a_file() {
        let (line, cites) = already_sent_line(vec![
            ("b.py".into(), 10, 20),
            ("a.py".into(), 1, 5),
            ("b.py".into(), 21, 30),
            ("b.py".into(), 50, 60),
        ])
        .unwrap();
        assert_eq!(cites, ["a.py:1-5", "b.py:10-30", "b.py:50-60"]);
        assert_eq!(line, "already sent: a.py:1-5, b.py:10-30, b.py:50-60");
        assert!(already_sent_line(Vec::new()).is_none());
        let many = (0..40).map(|i| (format!("f{i:02}.py"), 1, 2)).collect();
        assert!(already_sent_line(many).unwrap().0.ends_with("(+10 more)"));
    }

    #[test]
    fn a_saved_session_comes_back_whole() {
        let s = Sessions::default();
        s.record("a", Tool::Context, &sent(&["c1", "c2"]), 30, 1);
        let saved: SavedSession = serde_json::from_str(&serde_json::to_string(&s.save("a").unwrap()).unwrap()).unwrap();
        let t = Sessions::default();
        t.restore("a", saved.clone());
        assert_eq!(t.already_sent("a", &["c1", "c2", "c3"]).len(), 2);
        assert_eq!(t.usage("a").unwrap().tokens, 30);
        let mut old = saved;
        old.last_used_unix -= 3 * 3600;
        let u = Sessions::default();
        u.restore("a", old);
        assert!(u.usage("a").is_none(), "a session idle past its ttl is not restored");
    }

    #[test]
    fn ids_are_checked() {
        assert!(validate_id("agent-7:task_3.a").is_ok());
        for bad in ["", "a b", "../x", "é", &"x".repeat(129)] {
            let e = validate_id(bad).unwrap_err().to_string();
            assert!(e.contains("session id"), "{e}");
        }
    }
}
