//! What each ref of a git source stores beside its base ref ([`crate::git`], the index side in
//! `ctxd_index::overlay`): the base ref is stored whole; another ref stores the files whose blob
//! differs from the base's and reads the rest through an overlay — the base's paths it does not
//! share are its *shadowed* paths. [`split`] decides that per ref at each poll (a ref sharing
//! too little is stored whole), and [`OverlayChange`] says what to record while a poll's files
//! are on their way and after they are committed.

use std::collections::BTreeMap;

use ctxd_index::overlay::Overlay;

/// A ref whose overlay changed in a poll ([`crate::git::GitSource::take_overlays`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverlayChange {
    /// The ref's view (`proj@release~1.0`).
    pub view: String,
    pub before: Option<Overlay>,
    pub after: Option<Overlay>,
    /// The base's paths, when the ref goes from an overlay to stored whole (else empty): while
    /// its own copies are on their way, none of the base's files shows under it.
    pub base_paths: std::collections::BTreeSet<String>,
}

impl OverlayChange {
    /// What to record while the poll's files are on their way: the paths shadowed before or
    /// after — a base file the ref no longer shares is hidden at once (the base's new version
    /// never shows under the ref), one it shares again shows once the final record is written
    /// (until the ref's own copy is removed, that one answers) — or `None` to keep the record
    /// as it is until they are committed.
    pub fn interim(&self) -> Option<Overlay> {
        let hidden = match (&self.before, &self.after) {
            (Some(b), Some(a)) if b.base == a.base => &a.shadowed,
            // Stored whole from now on: its own copy of a file the base changed must not show
            // beside the base's new one until the final record is written.
            (Some(_), None) => &self.base_paths,
            _ => return None,
        };
        let b = self.before.as_ref().expect("matched above");
        let o = Overlay { base: b.base.clone(), shadowed: b.shadowed.union(hidden).cloned().collect() };
        (o != *b).then_some(o)
    }
}

/// A ref that does not share this many of the base's files is stored whole (its overlay's
/// filter would list them all).
pub const MAX_SHADOWED: usize = 2_000;

/// A ref's stored files and overlay, given the base ref's files (`None`: it is the base).
pub(crate) fn split(
    files: &BTreeMap<String, String>,
    base: Option<(&str, &BTreeMap<String, String>)>,
) -> (BTreeMap<String, String>, Option<Overlay>) {
    let Some((base_view, base_files)) = base else { return (files.clone(), None) };
    let shadowed: std::collections::BTreeSet<String> =
        base_files.iter().filter(|(p, b)| files.get(*p) != Some(*b)).map(|(p, _)| p.clone()).collect();
    if shadowed.len() > MAX_SHADOWED || shadowed.len() * 2 > base_files.len().max(1) {
        return (files.clone(), None);
    }
    let stored =
        files.iter().filter(|(p, b)| base_files.get(*p) != Some(*b)).map(|(p, b)| (p.clone(), b.clone())).collect();
    (stored, Some(Overlay { base: base_view.to_string(), shadowed }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(files: &[(&str, &str)]) -> BTreeMap<String, String> {
        files.iter().map(|(p, b)| (p.to_string(), b.to_string())).collect()
    }

    #[test]
    fn a_ref_stores_what_differs_from_the_base_and_shadows_what_it_does_not_share() {
        let base = tree(&[("a.py", "1"), ("b.py", "2"), ("c.py", "3"), ("d.py", "4"), ("e.py", "5")]);
        let (stored, overlay) = split(&base, None);
        assert_eq!((stored, overlay), (base.clone(), None), "the base is stored whole");
        // b changed, e gone, f new.
        let r = tree(&[("a.py", "1"), ("b.py", "9"), ("c.py", "3"), ("d.py", "4"), ("f.py", "6")]);
        let (stored, overlay) = split(&r, Some(("p@main", &base)));
        assert_eq!(stored, tree(&[("b.py", "9"), ("f.py", "6")]));
        let o = overlay.unwrap();
        assert_eq!(o.base, "p@main");
        assert_eq!(o.shadowed.iter().map(String::as_str).collect::<Vec<_>>(), ["b.py", "e.py"]);
        // Sharing less than half of the base's files: stored whole.
        let far = tree(&[("a.py", "1"), ("b.py", "8"), ("c.py", "7")]);
        assert_eq!(split(&far, Some(("p@main", &base))), (far.clone(), None));
    }

    #[test]
    fn while_files_are_on_their_way_a_ref_hides_paths_shadowed_before_or_after() {
        let o =
            |s: &[&str]| Some(Overlay { base: "p@main".into(), shadowed: s.iter().map(|x| x.to_string()).collect() });
        let change = OverlayChange {
            view: "p@v2".into(),
            before: o(&["a.py", "b.py"]),
            after: o(&["b.py", "c.py"]),
            base_paths: Default::default(),
        };
        assert_eq!(change.interim(), o(&["a.py", "b.py", "c.py"]));
        let fewer = OverlayChange {
            view: "p@v2".into(),
            before: o(&["b.py", "c.py"]),
            after: o(&["b.py"]),
            base_paths: Default::default(),
        };
        assert_eq!(fewer.interim(), None, "nothing newly hidden: the record stays until the files are in");
        let new =
            OverlayChange { view: "p@v2".into(), before: None, after: o(&["b.py"]), base_paths: Default::default() };
        assert_eq!(new.interim(), None);
        // Stored whole from now on: every base path is hidden until the ref's own copies are in.
        let base_paths = ["a.py", "b.py", "d.py"].iter().map(|x| x.to_string()).collect();
        let whole = OverlayChange { view: "p@v2".into(), before: o(&["b.py"]), after: None, base_paths };
        assert_eq!(whole.interim(), o(&["a.py", "b.py", "d.py"]));
        let gone =
            OverlayChange { view: "p@v2".into(), before: o(&["b.py"]), after: None, base_paths: Default::default() };
        assert_eq!(gone.interim(), None, "a ref gone: its record ends with its rows");
    }
}
