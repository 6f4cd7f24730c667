//! Which tree-sitter nodes are definitions, language by language: the grammar of each language
//! label, and for a node its name, chunk kind and member container (class body, impl block, …).
//! Rust, Python, JavaScript/TypeScript/TSX, Go and C/C++ have rules of their own (one file each
//! under `lang/`); Java, C#, Ruby, PHP, Bash, Kotlin, Scala, Lua and Swift (and C/C++ under
//! their own rules) are read from the shared table in `lang/generic.rs`.

use tree_sitter::{Language, Node};

mod c;
mod generic;
mod go;
mod javascript;
mod node;
mod python;
mod rust;

pub(crate) use node::DefInfo;

/// `source` parsed with `language`'s grammar: `None` where ctxd has no grammar for it, or the
/// parser gives up. The one place a file is parsed (the chunker's tree is then shared with the
/// symbol and edge extraction).
pub(crate) fn parse(language: &str, source: &str) -> Option<tree_sitter::Tree> {
    let mut parser = tree_sitter::Parser::new();
    parser.set_language(&grammar(language)?).ok()?;
    parser.parse(source, None)
}

/// The tree-sitter grammar for a language label, when ctxd has one.
pub fn grammar(language: &str) -> Option<Language> {
    Some(match language {
        "rust" => tree_sitter_rust::LANGUAGE.into(),
        "python" => tree_sitter_python::LANGUAGE.into(),
        "javascript" => tree_sitter_javascript::LANGUAGE.into(),
        "typescript" => tree_sitter_typescript::LANGUAGE_TYPESCRIPT.into(),
        "tsx" => tree_sitter_typescript::LANGUAGE_TSX.into(),
        "go" => tree_sitter_go::LANGUAGE.into(),
        "java" => tree_sitter_java::LANGUAGE.into(),
        "c" => tree_sitter_c::LANGUAGE.into(),
        "cpp" => tree_sitter_cpp::LANGUAGE.into(),
        "csharp" => tree_sitter_c_sharp::LANGUAGE.into(),
        "ruby" => tree_sitter_ruby::LANGUAGE.into(),
        "php" => tree_sitter_php::LANGUAGE_PHP.into(),
        "bash" => tree_sitter_bash::LANGUAGE.into(),
        "kotlin" => tree_sitter_kotlin_ng::LANGUAGE.into(),
        "scala" => tree_sitter_scala::LANGUAGE.into(),
        "lua" => tree_sitter_lua::LANGUAGE.into(),
        "swift" => tree_sitter_swift::LANGUAGE.into(),
        _ => return None,
    })
}

/// Classifies a node as a definition (with name, kind and member container) or not. A function
/// nested in a container is a `method`.
pub(crate) fn def_info<'t>(node: Node<'t>, lang: &str, src: &[u8], nested: bool) -> Option<DefInfo<'t>> {
    let func = if nested { "method" } else { "function" };
    match lang {
        "rust" => rust::def_info(node, src, func),
        "python" => python::def_info(node, src, func),
        "javascript" | "typescript" | "tsx" => javascript::def_info(node, src, func),
        "go" => go::def_info(node, src),
        "c" | "cpp" => c::def_info(node, lang, src, nested),
        _ => generic::def_info(node, lang, src, nested),
    }
}

/// Comments, doc comments, attributes and decorators: a run of them directly above a
/// definition belongs to it.
pub(super) fn is_comment_like(kind: &str) -> bool {
    matches!(
        kind,
        "comment"
            | "line_comment"
            | "block_comment"
            | "multiline_comment"
            | "attribute_item"
            | "attribute_list"
            | "decorator"
            | "annotation"
    )
}

#[cfg(test)]
mod tests {
    use crate::chunk::testing::chunker;

    #[test]
    fn js_ts_go_symbols() {
        let js = "import x from 'y';\nexport function hello(name) {\n  return 'hi ' + name;\n}\nconst arrow = (a) => a * 2;\nclass Greeter { greet() { return 1; } }\n";
        let syms: Vec<_> = chunker(200).chunk("javascript", js).into_iter().filter_map(|c| c.symbol).collect();
        assert_eq!(syms, vec!["hello", "arrow", "Greeter"]);
        let ts = "interface Shape { area(): number }\ntype Id = string;\nexport class Circle implements Shape {\n  area(): number { return 3; }\n}\n";
        let syms: Vec<_> = chunker(200).chunk("typescript", ts).into_iter().filter_map(|c| c.symbol).collect();
        assert_eq!(syms, vec!["Shape", "Id", "Circle"]);
        let go = "package main\n\nimport \"fmt\"\n\ntype Server struct {\n\tport int\n}\n\nfunc (s *Server) Start() error {\n\treturn nil\n}\n\nfunc main() {\n\tfmt.Println(1)\n}\n";
        let chunks = chunker(200).chunk("go", go);
        let syms: Vec<_> = chunks.iter().filter_map(|c| c.symbol.clone()).collect();
        assert_eq!(syms, vec!["Server", "Server.Start", "main"]);
    }

    /// One definition per language of the table, with its expected symbol and kind.
    #[test]
    fn every_grammar_finds_definitions() {
        let cases: &[(&str, &str, &str, &str)] = &[
            ("java", "class Shop {\n  /** Total. */\n  int total(int a) { return a; }\n}\n", "Shop", "class"),
            ("c", "#include <stdio.h>\n\nstatic int *find_slot(int key) {\n  return 0;\n}\n", "find_slot", "function"),
            ("cpp", "namespace net {\nclass Socket {\n public:\n  void close() {}\n};\n}\nint Socket::open() { return 1; }\n", "Socket::open", "function"),
            ("csharp", "namespace App {\n  public class Cart {\n    public int Count() { return 0; }\n  }\n}\n", "App", "module"),
            ("ruby", "# Greets.\ndef greet(name)\n  puts name\nend\n", "greet", "function"),
            ("php", "<?php\nfunction render_page($p) {\n  return $p;\n}\n", "render_page", "function"),
            ("bash", "#!/bin/sh\ndeploy_app() {\n  echo hi\n}\n", "deploy_app", "function"),
            ("kotlin", "fun parseConfig(s: String): Int {\n  return 1\n}\n", "parseConfig", "function"),
            ("scala", "object Main {\n  def run(x: Int): Int = x\n}\n", "Main", "object"),
            ("lua", "local M = {}\nfunction M.load(path)\n  return path\nend\n", "M.load", "function"),
            ("swift", "func fetchUser(id: Int) -> String {\n  return \"\"\n}\n", "fetchUser", "function"),
        ];
        // Containers over budget are opened into qualified members.
        let java = format!(
            "class Shop {{\n{}}}\n",
            (0..30).map(|i| format!("  int f{i}(int a) {{ return a + {i}; }}\n")).collect::<String>()
        );
        let chunks = chunker(60).chunk("java", &java);
        assert!(
            chunks.iter().any(|c| c.symbol.as_deref() == Some("Shop.f7") && c.kind.as_deref() == Some("method")),
            "{chunks:#?}"
        );
        for (lang, src, symbol, kind) in cases {
            let chunks = chunker(200).chunk(lang, src);
            let found = chunks.iter().find(|c| c.symbol.as_deref() == Some(symbol));
            let c = found.unwrap_or_else(|| panic!("{lang}: no chunk {symbol} in {chunks:#?}"));
            assert_eq!(c.kind.as_deref(), Some(*kind), "{lang}: {c:?}");
            let lines: Vec<&str> = src.lines().collect();
            assert_eq!(
                c.content,
                lines[c.start_line as usize - 1..c.end_line as usize].join("\n"),
                "{lang}: exact lines"
            );
        }
    }
}
