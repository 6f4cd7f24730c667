//! PDF: the text of every page (lopdf), each page a section citing its page number. A page
//! whose content stream cannot be read (or panics lopdf) is counted and skipped; a file with
//! no readable page, no page, or no text on any page is an error. [`simple_pdf`] writes fixtures for tests and benchmarks.

use super::section::{push_section, Extracted, FormatError};
use crate::metrics as m;

pub(super) fn pdf(bytes: &[u8]) -> Result<Extracted, FormatError> {
    let doc = lopdf::Document::load_mem(bytes).map_err(|e| FormatError::Pdf(e.to_string()))?;
    let mut out = Extracted { text: String::new(), sections: Vec::new() };
    let pages: Vec<u32> = doc.get_pages().keys().copied().collect();
    let mut failed = 0;
    for page in pages {
        // lopdf can panic on malformed content streams: a bad page is skipped, not the file.
        let text = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| doc.extract_text(&[page])));
        match text {
            Ok(Ok(t)) => push_section(&mut out, &t, format!("page {page}"), "page", page),
            _ => failed += 1,
        }
    }
    if failed > 0 {
        metrics::counter!(m::LOAD_INVALID_TOTAL, "format" => "pdf_page").increment(failed);
        tracing::warn!("{failed} pdf page(s) without extractable text");
    }
    if out.sections.is_empty() && failed > 0 {
        return Err(FormatError::Pdf("no page could be read".into()));
    }
    if out.sections.is_empty() {
        // No page at all, or no text on any page: what lopdf recovers of a file caught
        // half-written. An error, so an indexed version is kept rather than replaced by nothing
        // (a PDF of scanned images, with no text layer, has nothing to index either way).
        return Err(FormatError::Pdf("no text in any page (a truncated or damaged file, or images only)".into()));
    }
    Ok(out)
}

/// Writes a minimal PDF with one line of text per page (Courier, lopdf): fixtures for tests and
/// benchmarks of the PDF loader.
pub fn simple_pdf(pages: &[&str]) -> Vec<u8> {
    use lopdf::content::{Content, Operation};
    use lopdf::{dictionary, Document, Object, Stream};
    let mut doc = Document::with_version("1.5");
    let pages_id = doc.new_object_id();
    let font_id = doc.add_object(dictionary! {
        "Type" => "Font", "Subtype" => "Type1", "BaseFont" => "Courier",
    });
    let resources_id = doc.add_object(dictionary! { "Font" => dictionary! { "F1" => font_id } });
    let mut kids = Vec::new();
    for text in pages {
        let content = Content {
            operations: vec![
                Operation::new("BT", vec![]),
                Operation::new("Tf", vec!["F1".into(), 24.into()]),
                Operation::new("Td", vec![72.into(), 700.into()]),
                Operation::new("Tj", vec![Object::string_literal(*text)]),
                Operation::new("ET", vec![]),
            ],
        };
        let content_id =
            doc.add_object(Stream::new(dictionary! {}, content.encode().expect("encoding a content stream")));
        let page_id = doc.add_object(dictionary! {
            "Type" => "Page", "Parent" => pages_id, "Contents" => content_id,
        });
        kids.push(page_id.into());
    }
    let count = kids.len() as i64;
    doc.objects.insert(
        pages_id,
        Object::Dictionary(dictionary! {
            "Type" => "Pages", "Kids" => kids, "Count" => count,
            "Resources" => resources_id, "MediaBox" => vec![0.into(), 0.into(), 595.into(), 842.into()],
        }),
    );
    let catalog_id = doc.add_object(dictionary! { "Type" => "Catalog", "Pages" => pages_id });
    doc.trailer.set("Root", catalog_id);
    let mut out = Vec::new();
    doc.save_to(&mut out).expect("writing a pdf to memory");
    out
}
#[cfg(test)]
mod tests {
    use crate::load::{extract, labels, simple_pdf, FormatError};

    #[test]
    fn pdf_pages_and_corrupt_pdf() {
        let bytes = simple_pdf(&["The quick brown fox", "Second page: pelican migration"]);
        let e = extract("pdf", &bytes).unwrap();
        assert_eq!(labels(&e.sections), vec!["page 1", "page 2"]);
        assert!(e.text.contains("pelican migration"));
        assert_eq!(e.sections[1].fixed_line, Some(2));
        assert!(matches!(extract("pdf", &bytes[..bytes.len() / 3]), Err(FormatError::Pdf(_))));
        assert!(matches!(extract("pdf", b"%PDF-1.5 garbage"), Err(FormatError::Pdf(_))));
    }
}
