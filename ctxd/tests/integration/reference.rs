//! The reference pages against the binary and the code, both ways, so that they cannot drift:
//! `docs/reference/cli.md` names every subcommand of `ctxd --help` (read recursively) with
//! every long flag its `--help` prints, and every flag it mentions exists; and
//! `docs/reference/metrics.md` lists every metric a working daemon exports at `GET /metrics`
//! (with the type it exports and the description it registers) and every metric name the code
//! defines in a `metrics.rs`, and nothing else. (The configuration keys are checked in
//! `config/src/reference.rs`, the links by `tidy`.) Each failure lists everything missing.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use serde_json::json;

use super::support::{ctxd, repo_root, run_ok, serve_project, wait_for};

/// What one `ctxd … --help` prints: its subcommands and its long flags.
#[derive(Default)]
struct Help {
    commands: Vec<String>,
    flags: BTreeSet<String>,
}

/// Parses clap's help: the names under `Commands:` (but `help`), and every option line's long
/// flag (`  -v, --verbose`, `      --db <DB>`; descriptions are indented further).
fn parse_help(text: &str) -> Help {
    let mut help = Help::default();
    let mut section = "";
    for line in text.lines() {
        if !line.starts_with(' ') {
            section = line.trim_end();
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        let first = line.split_whitespace().next().unwrap_or("");
        if section == "Commands:" && indent == 2 && first != "help" {
            help.commands.push(first.to_string());
        } else if indent <= 6 && first.starts_with('-') {
            help.flags.extend(long_flags(line.trim_start().split("  ").next().unwrap_or("")));
        }
    }
    help
}

/// Every `--flag` in a text.
fn long_flags(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(i) = rest.find("--") {
        let name: String =
            rest[i + 2..].chars().take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-').collect();
        rest = &rest[i + 2 + name.len()..];
        if name.starts_with(|c: char| c.is_ascii_lowercase()) {
            out.insert(format!("--{name}"));
        }
    }
    out
}

/// Every command of the binary by its path (`""`, `"search"`, `"graph callers"`), with its help.
fn command_tree() -> BTreeMap<String, Help> {
    let mut tree = BTreeMap::new();
    let mut todo = vec![String::new()];
    while let Some(path) = todo.pop() {
        let text = run_ok(ctxd().args(path.split_whitespace()).arg("--help"));
        let help = parse_help(&text);
        for sub in &help.commands {
            todo.push(format!("{path} {sub}").trim().to_string());
        }
        tree.insert(path, help);
    }
    tree
}

/// One table row of cli.md: the command paths its first cell names, and every flag of the row.
struct Row {
    commands: BTreeSet<String>,
    flags: BTreeSet<String>,
}

/// The command paths a backticked span `ctxd graph references\|callers <SYMBOL> …` names:
/// the words after `ctxd` up to the first argument or flag, each word's alternatives (`\|` or
/// `/`) multiplied out.
fn commands_of(span: &str) -> Vec<String> {
    let mut paths = vec![String::new()];
    for word in span.split_whitespace().skip(1).take_while(|w| !w.starts_with(['-', '<', '['])) {
        let alternatives: Vec<&str> = word.split(['|', '/']).map(|a| a.trim_matches('\\')).collect();
        paths = paths
            .iter()
            .flat_map(|p| alternatives.iter().map(move |a| format!("{p} {a}").trim().to_string()))
            .collect();
    }
    paths.into_iter().filter(|p| !p.is_empty()).collect()
}

/// cli.md's tables: the rows naming commands, the flags of its "every command" row, and the
/// model flags with the commands that take them (`## Model flags`).
struct CliDoc {
    rows: Vec<Row>,
    everywhere: BTreeSet<String>,
    model_commands: BTreeSet<String>,
    model_flags: BTreeSet<String>,
}

fn read_cli_doc(doc: &str) -> CliDoc {
    let mut cli = CliDoc {
        rows: Vec::new(),
        everywhere: BTreeSet::new(),
        model_commands: BTreeSet::new(),
        model_flags: BTreeSet::new(),
    };
    let mut in_model = false;
    for line in doc.lines() {
        if line.starts_with("## ") {
            in_model = line.trim() == "## Model flags";
            continue;
        }
        let flags = long_flags(line);
        if in_model {
            if line.starts_with('|') {
                cli.model_flags.extend(flags);
            } else {
                cli.model_commands.extend(line.split('`').skip(1).step_by(2).map(str::to_string));
            }
            continue;
        }
        if !line.starts_with('|') {
            continue;
        }
        let first = line[1..].replace("\\|", "\u{1}").split('|').next().unwrap_or("").replace('\u{1}', "\\|");
        if first.trim() == "every command" {
            cli.everywhere.extend(flags);
            continue;
        }
        let commands: BTreeSet<String> =
            first.split('`').skip(1).step_by(2).filter(|s| s.starts_with("ctxd ")).flat_map(commands_of).collect();
        if !commands.is_empty() {
            cli.rows.push(Row { commands, flags });
        }
    }
    cli
}

#[test]
fn cli_reference_names_every_command_and_flag() {
    let tree = command_tree();
    let doc_path = repo_root().join("docs/reference/cli.md");
    let doc = std::fs::read_to_string(&doc_path).unwrap();
    let cli = read_cli_doc(&doc);
    // Flags every command has (`--help`, `--verbose`) are documented once, not per command.
    let global: BTreeSet<String> =
        tree.values().fold(tree[""].flags.clone(), |all, h| all.intersection(&h.flags).cloned().collect());
    let every_flag: BTreeSet<&String> = tree.values().flat_map(|h| &h.flags).collect();
    let named: BTreeSet<&String> = cli.rows.iter().flat_map(|r| &r.commands).collect();
    let mut missing = Vec::new();
    for (path, help) in tree.iter().filter(|(p, _)| !p.is_empty()) {
        if !named.iter().any(|n| *n == path || n.starts_with(&format!("{path} "))) {
            missing.push(format!("`ctxd {path}` is a command but no row of cli.md names it"));
        }
        let mut documented: BTreeSet<&String> =
            cli.rows.iter().filter(|r| r.commands.contains(path)).flat_map(|r| &r.flags).collect();
        documented.extend(&cli.everywhere);
        if cli.model_commands.contains(path) {
            documented.extend(&cli.model_flags);
        }
        for flag in help.flags.iter().filter(|f| !global.contains(*f) && !documented.contains(f)) {
            missing.push(format!("`ctxd {path}` takes {flag}, which cli.md does not give it"));
        }
    }
    // The other way: nothing documented is gone.
    for row in &cli.rows {
        let mut takes: BTreeSet<&String> = global.iter().collect();
        for path in &row.commands {
            match tree.get(path) {
                Some(help) => takes.extend(&help.flags),
                None => missing.push(format!("cli.md names `ctxd {path}`, which is no command")),
            }
        }
        let commands: Vec<&str> = row.commands.iter().map(String::as_str).collect();
        for flag in row.flags.iter().filter(|f| !takes.contains(f)) {
            missing.push(format!(
                "cli.md gives {flag} to `ctxd {}`, whose --help has no {flag}",
                commands.join("`/`ctxd ")
            ));
        }
    }
    for path in &cli.model_commands {
        let Some(help) = tree.get(path) else {
            missing.push(format!("cli.md's model flags name `{path}`, which is no command"));
            continue;
        };
        for flag in cli.model_flags.iter().filter(|f| !help.flags.contains(*f)) {
            missing.push(format!("cli.md's model flags give {flag} to `ctxd {path}`, whose --help has no {flag}"));
        }
    }
    for flag in long_flags(&doc).iter().filter(|f| !every_flag.contains(f)) {
        missing.push(format!("cli.md mentions {flag}, which no command's --help has"));
    }
    assert!(tree.len() > 30, "the command tree was read: {:?}", tree.keys().collect::<Vec<_>>());
    assert!(
        missing.is_empty(),
        "{} drifted from the binary ({} problem(s)):\n{}\n(a command's flags go in its row of the first table or of \
         \"More flags\"; a command that takes the model flags is listed under \"Model flags\")",
        doc_path.display(),
        missing.len(),
        missing.join("\n")
    );
}

/// metrics.md's table rows: name → (type, description with `\|` unescaped).
fn metric_rows(doc: &str) -> BTreeMap<String, (String, String)> {
    let mut rows = BTreeMap::new();
    for line in doc.lines().filter(|l| l.starts_with("| `ctxd_")) {
        let cells: Vec<String> =
            line.replace("\\|", "\u{1}").split('|').map(|c| c.trim().replace('\u{1}', "|")).collect();
        if let [_, name, kind, what, ..] = cells.as_slice() {
            rows.insert(name.trim_matches('`').to_string(), (kind.clone(), what.clone()));
        }
    }
    rows
}

/// A scrape's metric families: name → (types, description); a histogram's or summary's
/// `_bucket`, `_sum` and `_count` samples count as their family.
fn families(scrape: &str) -> BTreeMap<String, (BTreeSet<String>, String)> {
    let mut out: BTreeMap<String, (BTreeSet<String>, String)> = BTreeMap::new();
    for line in scrape.lines() {
        let mut words = line.splitn(4, ' ');
        match (words.next(), words.next(), words.next(), words.next()) {
            (Some("#"), Some("TYPE"), Some(name), Some(kind)) => {
                out.entry(name.to_string()).or_default().0.insert(kind.trim().to_string());
            }
            (Some("#"), Some("HELP"), Some(name), Some(what)) => {
                out.entry(name.to_string()).or_default().1 = what.trim().to_string();
            }
            _ => {}
        }
    }
    for line in scrape.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()) {
        let name = line.split(['{', ' ']).next().unwrap_or("");
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .filter_map(|s| name.strip_suffix(s))
            .find(|base| out.get(*base).is_some_and(|(t, _)| t.contains("histogram") || t.contains("summary")))
            .unwrap_or(name);
        out.entry(family.to_string()).or_default();
    }
    out
}

#[test]
fn metrics_reference_lists_every_exported_metric() {
    let write = |root: &Path, rel: &str, text: &str| {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    let (_tmp, root, _db, d) = serve_project(|root| {
        write(root, "shop/cart.py", "class Cart:\n    \"\"\"A shopping cart.\"\"\"\n\n    def total(self, items):\n        return sum(i.price for i in items)\n");
        write(
            root,
            "shop/tax.py",
            "from shop.cart import Cart\n\n\ndef with_tax(cart: Cart, rate):\n    return cart.total([]) * (1 + rate)\n",
        );
        write(root, "README.md", "# Shop\n\nA cart and its taxes.\n");
    });
    // A little of everything: a search, a context, a localization, and an edit indexed.
    assert_eq!(d.search(json!({"query": "cart total", "k": 3})).0, 200);
    assert_eq!(d.post("/v1/context", &json!({"query": "cart total", "budget": 500})).status().as_u16(), 200);
    assert_eq!(d.post("/v1/locate", &json!({"text": "the tax on a cart is wrong"})).status().as_u16(), 200);
    write(
        &root,
        "shop/discount.py",
        "def apply_discount_percentage(amount, percent):\n    return amount * (100 - percent) / 100\n",
    );
    wait_for("the edit to be searchable", Duration::from_secs(120), || {
        let (status, v) = d.search(json!({"query": "apply discount percentage", "k": 1, "mode": "bm25"}));
        status == 200 && v["results"][0]["path"] == "shop/discount.py"
    });
    let scrape = d.get("/metrics").text().unwrap();
    let exported = families(&scrape);

    let doc_path = repo_root().join("docs/reference/metrics.md");
    let doc = std::fs::read_to_string(&doc_path).unwrap();
    let rows = metric_rows(&doc);
    let mut missing = Vec::new();
    for (name, (kinds, help)) in &exported {
        let kind = kinds.iter().cloned().collect::<Vec<_>>().join("/");
        if kinds.len() > 1 {
            // Two `# TYPE` lines for one name: Prometheus's parser rejects the whole scrape.
            missing.push(format!("{name} is exported as {kind}: one metric, one type"));
        }
        if !name.starts_with("ctxd_") {
            // Lance's object-store series: named in the page's prose.
            if !doc.contains(&format!("`{name}`")) {
                missing.push(format!("{name} ({kind}) is exported but metrics.md does not name it"));
            }
            continue;
        }
        let Some((doc_kind, what)) = rows.get(name) else {
            missing.push(format!("{name} is exported but has no row in metrics.md: | `{name}` | {kind} | {help} |"));
            continue;
        };
        if !kinds.contains(doc_kind) {
            missing.push(format!("{name}: metrics.md says {doc_kind}, the binary exports a {kind}"));
        }
        if !what.starts_with(help.as_str()) {
            missing.push(format!("{name}: metrics.md describes it as \"{what}\", the binary as \"{help}\""));
        }
    }
    assert!(exported.keys().filter(|n| n.starts_with("ctxd_")).count() > 40, "a real scrape:\n{scrape}");
    assert!(
        missing.is_empty(),
        "{} drifted from GET /metrics ({} problem(s)):\n{}",
        doc_path.display(),
        missing.len(),
        missing.join("\n")
    );
}

/// Every `"ctxd_…"` string literal of the `metrics.rs` files under `dir` (not in `target/`).
fn metric_constants(dir: &Path, out: &mut BTreeMap<String, String>) {
    for entry in std::fs::read_dir(dir).unwrap().map(Result::unwrap) {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.file_type().unwrap().is_dir() {
            if !["target", ".git", "node_modules", "shared"].contains(&name.as_str()) {
                metric_constants(&path, out);
            }
        } else if name == "metrics.rs" {
            let text = std::fs::read_to_string(&path).unwrap();
            let rel = path.strip_prefix(repo_root()).unwrap_or(&path).display().to_string();
            for (i, _) in text.match_indices("\"ctxd_") {
                let literal: String = text[i + 1..]
                    .chars()
                    .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
                    .collect();
                // A whole literal, not a prefix (`"ctxd_"`, `"ctxd_query_"`) or a format string.
                if text[i + 1 + literal.len()..].starts_with('"') && !literal.ends_with('_') {
                    out.entry(literal).or_insert_with(|| rel.clone());
                }
            }
        }
    }
}

#[test]
fn metrics_reference_lists_every_metric_the_code_defines() {
    let mut defined = BTreeMap::new();
    metric_constants(&repo_root(), &mut defined);
    let doc_path = repo_root().join("docs/reference/metrics.md");
    let rows = metric_rows(&std::fs::read_to_string(&doc_path).unwrap());
    let mut missing = Vec::new();
    for (name, file) in &defined {
        if !rows.contains_key(name) {
            missing.push(format!("{name} (defined in {file}) has no row in metrics.md"));
        }
    }
    for name in rows.keys().filter(|n| !defined.contains_key(*n)) {
        missing.push(format!("metrics.md lists {name}, which no metrics.rs defines"));
    }
    assert!(defined.len() > 40, "the metric names were read: {defined:?}");
    assert!(
        missing.is_empty(),
        "{} drifted from the code ({} problem(s)):\n{}",
        doc_path.display(),
        missing.len(),
        missing.join("\n")
    );
}
