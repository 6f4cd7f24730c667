//! The format of a file without a telling extension, from its first bytes: PDF, HTML, a
//! script by its shebang (Python, Node, shell), a Jupyter notebook, JSON.

/// Guesses the format of a file with no telling extension from its first bytes.
pub fn sniff(head: &[u8]) -> Option<&'static str> {
    let text = String::from_utf8_lossy(&head[..head.len().min(512)]);
    let t = text.trim_start_matches('\u{feff}').trim_start();
    let lower = t.to_ascii_lowercase();
    if head.starts_with(b"%PDF-") {
        Some("pdf")
    } else if lower.starts_with("<!doctype html") || lower.starts_with("<html") {
        Some("html")
    } else if let Some(shebang) = t.strip_prefix("#!") {
        let first = shebang.lines().next().unwrap_or("");
        if first.contains("python") {
            Some("python")
        } else if first.contains("node") {
            Some("javascript")
        } else if ["bash", "/sh", " sh", "zsh"].iter().any(|s| first.contains(s)) {
            Some("bash")
        } else {
            None
        }
    } else if (t.starts_with('{') || t.starts_with('[')) && (t.contains("\"cells\"") && t.contains("\"nbformat\"")) {
        Some("notebook")
    } else if t.starts_with('{') && t.contains('"') {
        Some("json")
    } else {
        None
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sniffing() {
        assert_eq!(sniff(b"%PDF-1.7\n..."), Some("pdf"));
        assert_eq!(sniff(b"#!/usr/bin/env python3\nprint(1)"), Some("python"));
        assert_eq!(sniff(b"#!/bin/sh\necho"), Some("bash"));
        assert_eq!(sniff(b"  <!DOCTYPE html><html>"), Some("html"));
        assert_eq!(sniff(b"{\"cells\": [], \"nbformat\": 4}"), Some("notebook"));
        assert_eq!(sniff(b"{\"a\": 1}"), Some("json"));
        assert_eq!(sniff(b"plain words"), None);
    }
}
