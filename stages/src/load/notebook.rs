//! Jupyter notebooks: markdown and code cells, each a section citing its 1-based cell number;
//! outputs dropped except short text/plain results (cut to a few hundred characters).

use std::fmt::Write as _;

use super::section::{push_section, Extracted, FormatError};

/// Short plain-text outputs are kept (they often hold the answer); longer ones are cut.
const NOTEBOOK_OUTPUT_CHARS: usize = 300;

pub(super) fn notebook(bytes: &[u8]) -> Result<Extracted, FormatError> {
    let nb: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| FormatError::Notebook(e.to_string()))?;
    let cells = nb["cells"].as_array().ok_or_else(|| FormatError::Notebook("no \"cells\" array".into()))?;
    let lang = nb["metadata"]["kernelspec"]["language"].as_str().unwrap_or("python").to_string();
    let joined = |v: &serde_json::Value| match v {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Array(parts) => parts.iter().filter_map(|p| p.as_str()).collect(),
        _ => String::new(),
    };
    let mut out = Extracted { text: String::new(), sections: Vec::new() };
    for (i, cell) in cells.iter().enumerate() {
        let kind = cell["cell_type"].as_str().unwrap_or("raw");
        let mut text = joined(&cell["source"]);
        if kind == "code" {
            let mut outputs = String::new();
            for o in cell["outputs"].as_array().into_iter().flatten() {
                let t = joined(if o["text"].is_null() { &o["data"]["text/plain"] } else { &o["text"] });
                outputs.push_str(&t);
            }
            if !outputs.trim().is_empty() {
                let cut: String = outputs.chars().take(NOTEBOOK_OUTPUT_CHARS).collect();
                let _ = write!(text, "\n# output:\n{}", cut.trim_end());
            }
        }
        let label = format!("cell {} ({})", i + 1, if kind == "code" { lang.as_str() } else { kind });
        push_section(&mut out, &text, label, "cell", i as u32 + 1);
    }
    Ok(out)
}
#[cfg(test)]
mod tests {
    use crate::load::{extract, labels, FormatError};

    #[test]
    fn notebook_cells_with_outputs_cut() {
        let nb = serde_json::json!({
            "nbformat": 4,
            "metadata": {"kernelspec": {"language": "python"}},
            "cells": [
                {"cell_type": "markdown", "source": ["# Loading data\n", "We read the CSV."]},
                {"cell_type": "code", "source": "df = load()\ndf.head()", "outputs": [{"output_type": "stream", "text": "x".repeat(1000)}]},
                {"cell_type": "code", "source": "", "outputs": []}
            ]
        });
        let e = extract("notebook", nb.to_string().as_bytes()).unwrap();
        assert_eq!(labels(&e.sections), vec!["cell 1 (markdown)", "cell 2 (python)"]);
        assert_eq!(e.sections[1].fixed_line, Some(2));
        assert!(e.text.contains("df.head()") && e.text.contains("# output:"));
        assert!(e.text.len() < 500, "outputs are truncated");
        assert!(matches!(extract("notebook", b"{\"cells\": [tru"), Err(FormatError::Notebook(_))));
    }
}
