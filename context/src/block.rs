//! A context block and how it is rendered: the cited lines of one or more neighbouring chunks
//! of a file, or the signature skeleton of a definition that did not fit whole, in XML,
//! Markdown or plain text; and the one-line notes a context carries (what a session was
//! already sent).

use ctxd_index::record::Hit;
use serde::{Deserialize, Serialize};

use ctxd_search::error::SearchError;

/// How blocks are rendered into the `context` text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    #[default]
    Xml,
    Markdown,
    Plain,
}

impl std::str::FromStr for Format {
    type Err = SearchError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "xml" => Ok(Format::Xml),
            "markdown" | "md" => Ok(Format::Markdown),
            "plain" | "text" => Ok(Format::Plain),
            other => Err(SearchError::BadRequest(format!("unknown format '{other}' (xml, markdown or plain)"))),
        }
    }
}

/// One cited block of context: the lines of one or more neighbouring chunks of a file (a
/// [`Hit`] whose content is what the block shows, without a chunk id when it joins several),
/// with the tokens it takes and its relevance rank. Serialised flat.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Block {
    #[serde(flatten)]
    pub hit: Hit,
    /// Tokens of the rendered block.
    pub tokens: usize,
    /// Rank by relevance (0 = most relevant); blocks are listed in attention order.
    pub relevance_rank: usize,
    /// A signature skeleton of the definitions the lines hold, sent in place of their body
    /// (it did not fit the budget whole).
    #[serde(default, skip_serializing_if = "is_false")]
    pub skeleton: bool,
    /// Line ranges `[start, end]` holding words of the query.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub highlights: Vec<[u32; 2]>,
    /// A file's outline (its definitions' signatures and lines), sent first by the hierarchical
    /// assembly.
    #[serde(default, skip_serializing_if = "is_false")]
    pub outline: bool,
    /// The theme the block was grouped under (thematic assembly; an index into `themes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub theme: Option<usize>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl std::ops::Deref for Block {
    type Target = Hit;
    fn deref(&self) -> &Hit {
        &self.hit
    }
}

impl Block {
    /// A block of `hit`'s lines (not a skeleton, no highlights yet).
    pub fn new(hit: Hit, relevance_rank: usize) -> Self {
        Self { hit, tokens: 0, relevance_rank, skeleton: false, highlights: Vec::new(), outline: false, theme: None }
    }

    /// What the block is instead of whole lines, if anything: `skeleton` or `outline`.
    fn summary(&self) -> Option<&'static str> {
        match (self.outline, self.skeleton) {
            (true, _) => Some("outline"),
            (_, true) => Some("skeleton"),
            _ => None,
        }
    }

    /// The block as it appears in the context text.
    pub fn render(&self, format: Format) -> String {
        let symbol = self.symbol.as_deref().unwrap_or("");
        let summary = self.summary();
        let skeleton = summary.map(|s| format!(" ({s})")).unwrap_or_default();
        match format {
            Format::Xml => format!(
                "<block source=\"{}\"{}{}>\n{}\n</block>\n",
                xml_escape(&self.citation()),
                if symbol.is_empty() { String::new() } else { format!(" symbol=\"{}\"", xml_escape(symbol)) },
                summary.map(|s| format!(" {s}=\"true\"")).unwrap_or_default(),
                self.content.trim_end()
            ),
            Format::Markdown => {
                let fence = if self.content.contains("```") { "````" } else { "```" };
                let title = if symbol.is_empty() { self.citation() } else { format!("{} ({symbol})", self.citation()) };
                format!(
                    "### {title}{skeleton}\n{fence}{}\n{}\n{fence}\n",
                    fence_lang(&self.language),
                    self.content.trim_end()
                )
            }
            Format::Plain => {
                let title = if symbol.is_empty() { self.citation() } else { format!("{} {symbol}", self.citation()) };
                format!("--- {title}{skeleton}\n{}\n", self.content.trim_end())
            }
        }
    }
}

fn fence_lang(language: &str) -> &str {
    match language {
        "text" | "pdf" | "notebook" => "",
        other => other,
    }
}

pub(crate) fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('"', "&quot;").replace('<', "&lt;").replace('>', "&gt;")
}

/// The blocks of a context in `format`, under their theme headings when `themes` are given
/// (the blocks of a theme are consecutive).
pub(crate) fn render_blocks(blocks: &[Block], themes: &[String], format: Format) -> String {
    let mut out = String::new();
    let mut open: Option<usize> = None;
    for b in blocks {
        if let Some(t) = b.theme.filter(|t| *t < themes.len() && open != Some(*t)) {
            if open.is_some() && format == Format::Xml {
                out.push_str("</theme>\n");
            }
            out.push_str(&render_heading(&themes[t], format));
            open = Some(t);
        }
        out.push_str(&b.render(format));
    }
    if open.is_some() && format == Format::Xml {
        out.push_str("</theme>\n");
    }
    out
}

/// A theme's heading (for XML, the opening tag; `</theme>` closes it).
pub(crate) fn render_heading(heading: &str, format: Format) -> String {
    match format {
        Format::Xml => format!("<theme title=\"{}\">\n", xml_escape(heading)),
        Format::Markdown => format!("## Theme: {heading}\n"),
        Format::Plain => format!("=== {heading}\n"),
    }
}

/// A one-line note in the context text (what a session was already sent).
pub(crate) fn render_note(line: &str, format: Format) -> String {
    match format {
        Format::Xml => format!("<note>{}</note>\n", xml_escape(line)),
        Format::Markdown => format!("_{line}_\n"),
        Format::Plain => format!("--- {line}\n"),
    }
}
