//! One budgeted context from the answers of several sources (what `POST /v1/aggregate` sends):
//! blocks deduplicated across sources — the same text, or one text inside another,
//! whitespace-insensitive; the higher-priority source keeps it — re-counted with this index's
//! tokenizer, then packed into the budget: each source up to its share first (by priority, then
//! configuration order; within a source by relevance), then what is left in the same order.
//! Asking the sources (timeouts, HTTP, MCP, caching) is the wire's (`ctxd_serve::aggregate`).

use ctxd_models::tokens::TokenCounter;
use serde::{Deserialize, Serialize};

use crate::block::{Block, Format};

/// One block of the merged context, with the source that sent it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct SourcedBlock {
    pub source: String,
    #[serde(flatten)]
    pub block: Block,
}

/// What one source answered, in configuration order.
pub struct SourceAnswer<'a> {
    pub name: &'a str,
    /// Relative share of the budget; a higher one keeps a text two sources sent.
    pub priority: u32,
    /// Tokens this source may fill before the others' leftovers are packed.
    pub share: usize,
    /// Its blocks (`None`: it failed or timed out; its share is simply missing).
    pub blocks: Option<&'a [Block]>,
}

/// The merged context.
pub struct Merged {
    pub blocks: Vec<SourcedBlock>,
    pub tokens_used: usize,
    pub duplicates_dropped: usize,
}

fn normalized(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Merges `answers` into at most `budget` tokens (blocks counted by `counter` as rendered in
/// `format`).
pub fn merge(answers: &[SourceAnswer<'_>], budget: usize, counter: &TokenCounter, format: Format) -> Merged {
    // Priority order (then configuration order): the first source to bring a text keeps it.
    let mut order: Vec<usize> = (0..answers.len()).collect();
    order.sort_by_key(|i| std::cmp::Reverse(answers[*i].priority));
    let mut kept: Vec<String> = Vec::new();
    let mut duplicates = 0;
    let mut candidates: Vec<(usize, SourcedBlock)> = Vec::new();
    for &i in &order {
        let Some(blocks) = answers[i].blocks else { continue };
        let mut ranked = blocks.to_vec();
        ranked.sort_by_key(|b| b.relevance_rank);
        for mut b in ranked {
            // The same text (or one inside the other: an MCP answer rendering a block another
            // source returned raw) is kept once.
            let text = normalized(&b.content);
            let dup = kept.iter().any(|k| {
                *k == text || (k.len().min(text.len()) >= 40 && (k.contains(&text) || text.contains(k.as_str())))
            });
            if dup {
                duplicates += 1;
                continue;
            }
            kept.push(text);
            b.tokens = counter.count(&b.render(format));
            candidates.push((i, SourcedBlock { source: answers[i].name.to_string(), block: b }));
        }
    }
    // Pack: each source up to its share first, then leftovers in the same order.
    let mut used = 0;
    let mut per_source_used = vec![0usize; answers.len()];
    let mut picked: Vec<bool> = vec![false; candidates.len()];
    for pass in 0..2 {
        for (j, (i, b)) in candidates.iter().enumerate() {
            if picked[j] || used + b.block.tokens > budget {
                continue;
            }
            if pass == 0 && per_source_used[*i] + b.block.tokens > answers[*i].share {
                continue;
            }
            picked[j] = true;
            used += b.block.tokens;
            per_source_used[*i] += b.block.tokens;
        }
    }
    let blocks = candidates.into_iter().zip(picked).filter(|(_, p)| *p).map(|((_, b), _)| b).collect();
    Merged { blocks, tokens_used: used, duplicates_dropped: duplicates }
}

/// The merged blocks rendered in `format`, one after another (XML blocks say their origin).
pub fn render(blocks: &[SourcedBlock], format: Format) -> String {
    blocks
        .iter()
        .map(|b| {
            let mut text = b.block.render(format);
            if format == Format::Xml {
                text = text.replacen("<block ", &format!("<block origin=\"{}\" ", b.source), 1);
            }
            text
        })
        .collect::<Vec<_>>()
        .join("\n")
}
