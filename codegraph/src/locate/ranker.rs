//! The ranker of `locate` (its "model" in the config, the CLI and requests; the word `model`
//! otherwise means an embedding model): one weight per [`Feature`] of a candidate file, fitted on the
//! training issues (`localization/train.jsonl`: the recipe chosen and written by
//! `benches/locate_diagnose.py`, the fit itself `benches/fit_locate.py`'s) and committed as
//! `model.json` beside this file; a file's score is the weighted sum of its features, times a
//! factor per flag it carries (`factors`: e.g. ×0.3 for a test file the text does not ask for —
//! a demotion that scales with the score instead of subtracting a constant).
//!
//! Why a linear model: the training set is 238 issues on 30 repositories (the committed fit reads
//! 95 of them on 26: `fit_locate.py`'s default subset), a few thousand positive/negative file pairs
//! in all. A weight per feature (≈ 20 numbers) fitted with a listwise
//! objective (the softmax over each issue's candidates, L2-regularised) cannot memorise it the way a
//! tree ensemble with hundreds of leaves can; its weights read as the importance of each signal; and
//! scoring a candidate is a dot product, so the daemon's answer time does not move.
//!
//! Two models are compiled in, named by [`RankerName`] (`[locate] model`, `ctxd locate
//! --locate-model`, a request's `"model"`): `fitted` (`model.json`, the default) and `hand`
//! (`hand.json`: the hand-set weights and demotions the fits start from, kept so that the comparison
//! stays one command). `CTXD_LOCATE_MODEL=FILE` loads another parameter file in the fitted one's
//! place (experiments; `hand` stays the hand-set weights); a file that does not parse, or names a
//! feature this build does not know, is refused with the reason at the first `locate`.

use std::sync::OnceLock;

use serde::Deserialize;

use super::signals::Signal;
use ctxd_choice::RankerName;

/// What is known about a candidate file (each in 0..=1 or a flag), in the parameter file's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Feature {
    /// The signals' scores ([`Signal`]).
    Paths,
    Frames,
    Symbols,
    Messages,
    Bm25,
    Vector,
    Graph,
    Recency,
    Cochange,
    /// 1/(1 + the file's rank) among the files BM25's chunks reach.
    Bm25Rank,
    /// 1/(1 + the file's rank) among the files the vector's chunks reach.
    VectorRank,
    /// The share of the BM25 chunk hits that fall in the file (up to 10 of them count).
    Bm25Hits,
    /// Recency when the text is a debugging text (a traceback or an error message).
    RecencyDebug,
    /// A test file, and the text does not ask about tests.
    Test,
    /// A doc, example, benchmark or vendored file, and the text does not ask about docs.
    Doc,
    /// A package's `__init__.py`.
    Init,
    /// Path depth / 10.
    Depth,
    /// ln(1 + definitions in the file) / 5.
    Size,
    /// The definitions signal's score ([`Signal::Definitions`]).
    Definitions,
    /// 1/(1 + the file's rank) by the definitions signal.
    DefinitionsRank,
    /// The commits signal's score ([`Signal::Commits`]).
    Commits,
}

/// How many features a row holds.
pub const FEATURES: usize = 21;

/// One candidate's features, indexed by `Feature as usize`.
pub type Row = [f64; FEATURES];

impl Feature {
    pub const ALL: [Feature; FEATURES] = [
        Feature::Paths,
        Feature::Frames,
        Feature::Symbols,
        Feature::Messages,
        Feature::Bm25,
        Feature::Vector,
        Feature::Graph,
        Feature::Recency,
        Feature::Cochange,
        Feature::Bm25Rank,
        Feature::VectorRank,
        Feature::Bm25Hits,
        Feature::RecencyDebug,
        Feature::Test,
        Feature::Doc,
        Feature::Init,
        Feature::Depth,
        Feature::Size,
        Feature::Definitions,
        Feature::DefinitionsRank,
        Feature::Commits,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Feature::Paths => "paths",
            Feature::Frames => "frames",
            Feature::Symbols => "symbols",
            Feature::Messages => "messages",
            Feature::Bm25 => "bm25",
            Feature::Vector => "vector",
            Feature::Graph => "graph",
            Feature::Recency => "recency",
            Feature::Cochange => "cochange",
            Feature::Bm25Rank => "bm25_rank",
            Feature::VectorRank => "vector_rank",
            Feature::Bm25Hits => "bm25_hits",
            Feature::RecencyDebug => "recency_debug",
            Feature::Test => "test",
            Feature::Doc => "doc",
            Feature::Init => "init",
            Feature::Depth => "depth",
            Feature::Size => "size",
            Feature::Definitions => "definitions",
            Feature::DefinitionsRank => "definitions_rank",
            Feature::Commits => "commits",
        }
    }

    /// The signal whose `--without` zeroes this feature.
    pub fn signal(self) -> Option<Signal> {
        Some(match self {
            Feature::Paths => Signal::Paths,
            Feature::Frames => Signal::Frames,
            Feature::Symbols => Signal::Symbols,
            Feature::Messages => Signal::Messages,
            Feature::Bm25 | Feature::Bm25Rank | Feature::Bm25Hits => Signal::Bm25,
            Feature::Vector | Feature::VectorRank => Signal::Vector,
            Feature::Definitions | Feature::DefinitionsRank => Signal::Definitions,
            Feature::Graph => Signal::Graph,
            Feature::Recency | Feature::RecencyDebug => Signal::Recency,
            Feature::Cochange => Signal::Cochange,
            Feature::Commits => Signal::Commits,
            Feature::Test | Feature::Doc => Signal::Demote,
            Feature::Init | Feature::Depth | Feature::Size => return None,
        })
    }

    /// The feature holding a signal's score (`Demote` has none: it is the test/doc flags).
    pub fn of_signal(s: Signal) -> Option<Feature> {
        Feature::ALL.into_iter().find(|f| f.as_str() == s.as_str())
    }
}

/// A parameter file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum RankerFileError {
    #[error("locate model {origin}: {source}")]
    Parse {
        origin: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("locate model {origin}: unknown feature '{name}' (known: {known})")]
    UnknownFeature { origin: String, name: String, known: String },
    #[error("locate model {origin}: weight of '{name}' is not a finite number")]
    NotFinite { origin: String, name: String },
    #[error("locate model {origin}: factor of '{name}' is {value}: factors are positive numbers")]
    BadFactor { origin: String, name: String, value: f64 },
    #[error("locate model {path}: {source} (unset CTXD_LOCATE_MODEL to use the built-in model)")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// The parameter file's form.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelFile {
    /// What it was fitted on and how (free text, shown by `--explain`-style tools).
    fitted: String,
    /// Files seeding the graph walk (the best by the score without graph and history features).
    seeds: usize,
    /// Weight per feature name; a feature left out weighs 0.
    weights: std::collections::BTreeMap<String, f64>,
    /// Score multiplier per feature name, raised to the feature's value (flags: ×factor when
    /// set); a feature left out multiplies by 1.
    #[serde(default)]
    factors: std::collections::BTreeMap<String, f64>,
}

/// Fitted weights and factors, one per [`Feature`].
#[derive(Debug, Clone, PartialEq)]
pub struct Ranker {
    pub weights: Row,
    /// ln of each feature's factor (0 = ×1).
    pub log_factors: Row,
    pub seeds: usize,
    pub fitted: String,
}

/// The committed parameters: the fitted model and the hand-set one.
const COMMITTED: &str = include_str!("model.json");
const HAND: &str = include_str!("hand.json");

impl Ranker {
    /// Parses a parameter file; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Self, RankerFileError> {
        let file: ModelFile =
            serde_json::from_str(text).map_err(|source| RankerFileError::Parse { origin: origin.into(), source })?;
        let feature = |name: &String| {
            Feature::ALL.into_iter().find(|f| f.as_str() == name).ok_or_else(|| {
                let known: Vec<&str> = Feature::ALL.iter().map(|f| f.as_str()).collect();
                RankerFileError::UnknownFeature { origin: origin.into(), name: name.clone(), known: known.join(", ") }
            })
        };
        let mut weights = [0.0; FEATURES];
        for (name, w) in &file.weights {
            if !w.is_finite() {
                return Err(RankerFileError::NotFinite { origin: origin.into(), name: name.clone() });
            }
            weights[feature(name)? as usize] = *w;
        }
        let mut log_factors = [0.0; FEATURES];
        for (name, x) in &file.factors {
            if !(x.is_finite() && *x > 0.0) {
                return Err(RankerFileError::BadFactor { origin: origin.into(), name: name.clone(), value: *x });
            }
            log_factors[feature(name)? as usize] = x.ln();
        }
        Ok(Self { weights, log_factors, seeds: file.seeds, fitted: file.fitted })
    }

    /// The model `name` names, parsed once per process: the fitted one from `CTXD_LOCATE_MODEL`'s
    /// file where that is set.
    pub fn named(name: RankerName) -> Result<&'static Ranker, &'static RankerFileError> {
        static FITTED: OnceLock<Result<Ranker, RankerFileError>> = OnceLock::new();
        static HANDSET: OnceLock<Result<Ranker, RankerFileError>> = OnceLock::new();
        match name {
            RankerName::Fitted => FITTED.get_or_init(|| match std::env::var_os("CTXD_LOCATE_MODEL") {
                Some(path) => {
                    let path = path.to_string_lossy().into_owned();
                    let text = std::fs::read_to_string(&path)
                        .map_err(|source| RankerFileError::Read { path: path.clone(), source })?;
                    Ranker::parse(&text, &path)
                }
                None => Ranker::parse(COMMITTED, "codegraph/src/locate/model.json"),
            }),
            RankerName::Hand => HANDSET.get_or_init(|| Ranker::parse(HAND, "codegraph/src/locate/hand.json")),
        }
        .as_ref()
    }

    /// The weight of one feature.
    pub fn weight(&self, f: Feature) -> f64 {
        self.weights[f as usize]
    }

    /// A candidate's score: the weighted sum of its features, times each factor raised to its
    /// feature's value.
    pub fn score(&self, row: &Row) -> f64 {
        let sum: f64 = self.weights.iter().zip(row).map(|(w, x)| w * x).sum();
        let log: f64 = self.log_factors.iter().zip(row).map(|(l, x)| l * x).sum();
        if log == 0.0 {
            sum
        } else {
            sum * log.exp()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Feature, Ranker, RankerFileError, COMMITTED, FEATURES, HAND};

    #[test]
    fn the_committed_models_parse_and_name_every_signal() {
        let m = Ranker::parse(COMMITTED, "committed").unwrap();
        assert!(m.seeds > 0);
        assert!(m.weight(Feature::Bm25) > 0.0, "{m:?}");
        let hand = Ranker::parse(HAND, "hand").unwrap();
        assert!(hand.weight(Feature::Paths) > 0.0 && hand.log_factors[Feature::Test as usize] < 0.0, "{hand:?}");
        assert_ne!(m.weights, hand.weights);
        assert_eq!(Feature::ALL.len(), FEATURES);
        for (i, f) in Feature::ALL.iter().enumerate() {
            assert_eq!(*f as usize, i, "Feature::ALL is in declaration order");
        }
        for s in super::Signal::ALL {
            if s != super::Signal::Demote {
                assert_eq!(Feature::of_signal(s).and_then(Feature::signal), Some(s));
            }
        }
    }

    #[test]
    fn a_bad_parameter_file_is_refused_with_the_reason() {
        let unknown = Ranker::parse(r#"{"fitted": "x", "seeds": 5, "weights": {"bm26": 1.0}}"#, "f.json");
        let err = unknown.unwrap_err();
        assert!(matches!(err, RankerFileError::UnknownFeature { .. }));
        assert!(err.to_string().contains("'bm26'") && err.to_string().contains("bm25_rank"), "{err}");
        let garbage = Ranker::parse("{", "g.json").unwrap_err();
        assert!(garbage.to_string().starts_with("locate model g.json: "), "{garbage}");
        let extra = Ranker::parse(r#"{"fitted": "x", "seeds": 5, "weights": {}, "bias": 1}"#, "e.json");
        assert!(extra.is_err());
    }

    #[test]
    fn the_score_is_the_weighted_sum() {
        let m = Ranker::parse(r#"{"fitted": "x", "seeds": 5, "weights": {"bm25": 2.0, "test": -1.0}}"#, "m").unwrap();
        let mut row = [0.0; FEATURES];
        row[Feature::Bm25 as usize] = 0.5;
        row[Feature::Test as usize] = 1.0;
        row[Feature::Vector as usize] = 0.9;
        assert_eq!(m.score(&row), 0.0);
        let scaled =
            Ranker::parse(r#"{"fitted": "x", "seeds": 5, "weights": {"bm25": 2.0}, "factors": {"test": 0.25}}"#, "m")
                .unwrap();
        assert!((scaled.score(&row) - 0.25).abs() < 1e-12, "{}", scaled.score(&row));
        let zero = Ranker::parse(r#"{"fitted": "x", "seeds": 5, "weights": {}, "factors": {"doc": 0}}"#, "z");
        assert!(matches!(zero, Err(RankerFileError::BadFactor { .. })));
    }
}
