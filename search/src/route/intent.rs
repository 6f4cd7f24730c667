//! The asker's intent, read from cue words (explain, implement, debug, refactor,
//! find-definition, documentation, or general), and the signal weights each intent sets
//! ([`Intent::weights`]): meaning first for questions, exact words first for errors, the symbol
//! table first for definitions.

use serde::{Deserialize, Serialize};

/// What the asker wants to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Intent {
    Explain,
    Implement,
    Debug,
    Refactor,
    FindDefinition,
    Documentation,
    General,
}

/// Relative weights of the signals for one query.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IntentWeights {
    pub vector: f32,
    pub bm25: f32,
    pub symbol: f32,
    /// Multiplier for chunks that are whole definitions (functions, classes, …).
    pub definition_boost: f32,
    /// Multiplier for chunks of documents (Markdown, reST, text, HTML, PDF).
    pub doc_boost: f32,
}

impl Intent {
    /// Every intent.
    pub const ALL: [Intent; 7] = [
        Intent::Explain,
        Intent::Implement,
        Intent::Debug,
        Intent::Refactor,
        Intent::FindDefinition,
        Intent::Documentation,
        Intent::General,
    ];

    /// Kebab-case name (JSON and metric label).
    pub fn as_str(self) -> &'static str {
        match self {
            Intent::Explain => "explain",
            Intent::Implement => "implement",
            Intent::Debug => "debug",
            Intent::Refactor => "refactor",
            Intent::FindDefinition => "find-definition",
            Intent::Documentation => "documentation",
            Intent::General => "general",
        }
    }

    /// Signal weights for this intent: meaning first for questions, exact words first for
    /// errors, the symbol table first for definitions.
    pub fn weights(self) -> IntentWeights {
        let w = |vector, bm25, symbol, definition_boost, doc_boost| IntentWeights {
            vector,
            bm25,
            symbol,
            definition_boost,
            doc_boost,
        };
        match self {
            Intent::Explain => w(1.0, 0.6, 0.5, 1.1, 1.05),
            Intent::Implement => w(1.0, 0.6, 0.6, 1.15, 0.9),
            Intent::Debug => w(0.8, 1.0, 0.6, 1.1, 0.85),
            Intent::Refactor => w(0.8, 0.8, 0.9, 1.2, 0.8),
            Intent::FindDefinition => w(0.6, 0.8, 1.5, 1.3, 0.7),
            Intent::Documentation => w(1.0, 0.7, 0.2, 0.9, 1.3),
            Intent::General => w(1.0, 0.5, 0.5, 1.0, 1.0),
        }
    }
}

named!(Intent, "intent");

/// Cue phrases per intent, matched on the lowercased query (word-bounded at the start).
const CUES: &[(Intent, &[&str])] = &[
    (
        Intent::Debug,
        &[
            "error",
            "exception",
            "traceback",
            "stack trace",
            "panic",
            "panicked",
            "crash",
            "crashes",
            "fail",
            "fails",
            "failing",
            "failed",
            "failure",
            "bug",
            "broken",
            "doesn't work",
            "does not work",
            "not working",
            "segfault",
            "undefined",
            "null pointer",
            "nullpointer",
            "npe",
            "timeout",
            "times out",
            "time out",
            "timed out",
            "hang",
            "hangs",
            "deadlock",
            "leak",
            "wrong result",
            "regression",
            "fix",
            "debug",
            "cannot",
            "can't",
            "unable to",
            "unexpected",
            "returns nil",
            "returns null",
            "raises",
            "thrown",
            "throws",
        ],
    ),
    (
        Intent::Refactor,
        &[
            "refactor",
            "rename",
            "extract",
            "clean up",
            "cleanup",
            "simplify",
            "restructure",
            "deduplicate",
            "dedupe",
            "split",
            "inline",
            "move",
            "decouple",
            "reorganize",
            "reorganise",
            "rewrite",
            "migrate",
            "replace all",
            "duplicated",
            "duplicate code",
        ],
    ),
    (
        Intent::Documentation,
        &[
            "docs",
            "documentation",
            "readme",
            "guide",
            "tutorial",
            "how to install",
            "install",
            "installation",
            "setup",
            "set up",
            "configure",
            "configuration",
            "getting started",
            "changelog",
            "release notes",
            "api reference",
            "manual",
            "faq",
            "license",
            "contributing",
            "readme.md",
        ],
    ),
    (
        Intent::Implement,
        &[
            "implement",
            "add",
            "create",
            "write",
            "build",
            "support for",
            "make it",
            "generate",
            "new endpoint",
            "new feature",
            "extend",
            "integrate",
            "hook up",
            "wire up",
            "example of",
            "snippet",
            "how do i",
            "how can i",
            "how to",
        ],
    ),
    (
        Intent::FindDefinition,
        &[
            "where is",
            "where are",
            "where's",
            "defined",
            "definition",
            "declared",
            "declaration",
            "find the",
            "locate",
            "go to",
            "jump to",
            "which file",
            "source of",
            "implementation of",
            "signature of",
        ],
    ),
    (
        Intent::Explain,
        &[
            "how does",
            "how do",
            "what does",
            "what is",
            "what are",
            "why does",
            "why is",
            "explain",
            "understand",
            "how is",
            "how are",
            "handled",
            "overview",
            "walk me through",
            "describe",
            "purpose of",
            "meaning of",
            "what happens",
            "works",
            "responsible for",
            "difference between",
        ],
    ),
];

/// The intent of a lowercased query.
pub(super) fn intent_of(lower: &str) -> Intent {
    // The earliest cue wins ("fix the docs build" is debugging; "add docs for X" is implementing
    // docs — documentation wins over implement when both appear, as the object of the verb).
    let mut best: Option<(usize, usize, Intent)> = None;
    for (rank, (intent, cues)) in CUES.iter().enumerate() {
        for cue in *cues {
            if let Some(pos) = find_word(lower, cue) {
                let key = (pos, rank);
                if best.is_none_or(|(p, r, _)| key < (p, r)) {
                    best = Some((pos, rank, *intent));
                }
            }
        }
    }
    match best {
        // "how do I configure X" / "how to install": the documentation cue outranks the generic
        // implement opener.
        Some((_, _, Intent::Implement))
            if CUES[2].1.iter().any(|c| find_word(lower, c).is_some()) && !lower.contains("implement") =>
        {
            Intent::Documentation
        }
        Some((_, _, i)) => i,
        None => Intent::General,
    }
}

/// Position of `cue` in `text` at word boundaries.
fn find_word(text: &str, cue: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = text[from..].find(cue) {
        let at = from + i;
        let before = text[..at].chars().next_back();
        let after = text[at + cue.len()..].chars().next();
        let boundary = |c: Option<char>| c.is_none_or(|c| !c.is_alphanumeric() && c != '_');
        if boundary(before) && boundary(after) {
            return Some(at);
        }
        from = at + cue.len();
    }
    None
}
