//! `locate`'s ranking models compiled in (`ctxd_codegraph::locate::ranker` loads their
//! parameters): the `[locate] model` key, `ctxd locate --locate-model` and a request's `"model"`.

/// The ranking models compiled in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize, serde::Serialize)]
#[serde(try_from = "String", into = "&'static str")]
pub enum RankerName {
    /// `model.json`: fitted on the training issues (`benches/locate_diagnose.py --write`).
    #[default]
    Fitted,
    /// `hand.json`: the hand-set weights and demotions (the fits' bootstrap).
    Hand,
}

impl RankerName {
    pub const ALL: [RankerName; 2] = [RankerName::Fitted, RankerName::Hand];
}

words!(RankerName, "fitted or hand", Fitted = "fitted", Hand = "hand");
from_string!(RankerName);

impl From<RankerName> for &'static str {
    fn from(name: RankerName) -> Self {
        name.as_str()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ranker_reads_and_writes_its_word_and_an_unknown_one_names_the_valid_ones() {
        for name in RankerName::ALL {
            assert_eq!(name.as_str().parse::<RankerName>().unwrap(), name);
            assert_eq!(serde_json::to_string(&name).unwrap(), format!("\"{name}\""));
        }
        assert_eq!(serde_json::from_str::<RankerName>("\"hand\"").unwrap(), RankerName::Hand);
        let err = serde_json::from_str::<RankerName>("\"best\"").unwrap_err().to_string();
        assert!(err.contains("'best' is not fitted or hand"), "{err}");
    }
}
