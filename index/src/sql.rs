//! SQL text of LanceDB filters: quoted strings and `IN` lists.

/// Quotes a string for a LanceDB SQL filter.
pub fn sql_str(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// `column IN (…)` of the quoted `values`.
pub(crate) fn in_list(column: &str, values: &[String]) -> String {
    let list: Vec<String> = values.iter().map(|v| sql_str(v)).collect();
    format!("{column} IN ({})", list.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sql_strings_are_quoted() {
        assert_eq!(sql_str("it's"), "'it''s'");
        assert_eq!(in_list("path", &["a".into(), "b'c".into()]), "path IN ('a', 'b''c')");
    }
}
