//! The router's module rule (book: docs/src/architecture.md), checked on its sources: the
//! layers depend in one direction, `front` -> `ops` -> `upstream`, the shared modules (naming,
//! sealing, sessions, telemetry, ...) depend on no layer, and only the top (`lib.rs`,
//! `router.rs`: the service and its builder) wires them all. A file over 600 lines says at its
//! top why it is long.
//!
//! Every path in code (comments and string literals skipped) that starts with `crate::` or
//! `super::` is resolved to the top-level module it reaches, inline modules (`mod tests { .. }`)
//! included, and checked against the rule.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The most lines a file has before it must say why.
const MAX_LINES: usize = 600;
/// What a long file's top says.
const LONG_FILE_MARK: &str = "why this file is long:";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layer {
    /// `lib.rs` and `router.rs`: may use everything.
    Top,
    Front,
    Ops,
    Upstream,
    /// Every other top-level module.
    Shared,
}

fn layer(top_module: Option<&str>) -> Layer {
    match top_module {
        None | Some("router") => Layer::Top,
        Some("front") => Layer::Front,
        Some("ops") => Layer::Ops,
        Some("upstream") => Layer::Upstream,
        Some(_) => Layer::Shared,
    }
}

fn allowed(from: Layer, to: Layer) -> bool {
    use Layer::*;
    from == to
        || matches!(
            (from, to),
            (Top, _)
                | (Front, Ops | Upstream | Shared)
                | (Ops, Upstream | Shared)
                | (Upstream, Shared)
        )
}

/// The module path of a source file under `src/` (`front/legacy/mod.rs` -> `front::legacy`).
fn module_path(relative: &Path) -> Vec<String> {
    let mut parts: Vec<String> = relative
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let file = parts.pop().unwrap_or_default();
    let stem = file.trim_end_matches(".rs");
    if stem != "mod" && stem != "lib" {
        parts.push(stem.to_owned());
    }
    parts
}

/// The code of a Rust source with comments, strings and char literals blanked out (newlines
/// kept), so that only real paths are read.
fn code_only(source: &str) -> String {
    let chars: Vec<char> = source.chars().collect();
    let mut out = String::with_capacity(source.len());
    let mut i = 0;
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
        } else if c == 'r' && (next == Some('"') || next == Some('#')) && !ident_before(&chars, i) {
            // A raw string: r"…", r#"…"#, r##"…"##.
            let mut j = i + 1;
            let mut hashes = 0;
            while chars.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if chars.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                match chars.get(j) {
                    None => break,
                    Some('"') if (1..=hashes).all(|k| chars.get(j + k) == Some(&'#')) => {
                        j += 1 + hashes;
                        break;
                    }
                    Some(_) => j += 1,
                }
            }
            for &ch in &chars[i..j.min(chars.len())] {
                out.push(blank(ch));
            }
            i = j;
        } else if c == '"' {
            out.push(' ');
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < chars.len() {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
            out.push(' ');
            i += 1;
        } else if c == '\'' {
            // A char literal ('x', '\n', '\u{..}'), or a lifetime ('a), which stays.
            if next == Some('\\') {
                let mut j = i + 2;
                while j < chars.len() && chars[j] != '\'' {
                    j += 1;
                }
                out.extend(std::iter::repeat_n(' ', j + 1 - i));
                i = j + 1;
            } else if chars.get(i + 2) == Some(&'\'') {
                out.push_str("   ");
                i += 3;
            } else {
                out.push(c);
                i += 1;
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn ident_before(chars: &[char], i: usize) -> bool {
    i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_')
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Every module path `code` reaches through `crate::` or `super::`, resolved from `module`
/// (inline modules followed), as the first segment of the absolute path (`None`: the crate
/// root itself, e.g. `super::*` from a top-level module).
fn reached(module: &[String], code: &str) -> Vec<Option<String>> {
    let chars: Vec<char> = code.chars().collect();
    // The module path at each brace depth: inline `mod x {` pushes `x`.
    let mut scopes: Vec<(usize, Vec<String>)> = vec![(0, module.to_vec())];
    let mut depth = 0usize;
    let mut pending_mod: Option<String> = None;
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '{' {
            depth += 1;
            if let Some(name) = pending_mod.take() {
                let mut path = scopes.last().map(|s| s.1.clone()).unwrap_or_default();
                path.push(name);
                scopes.push((depth, path));
            }
            i += 1;
            continue;
        }
        if c == '}' {
            if scopes.last().is_some_and(|s| s.0 == depth) && scopes.len() > 1 {
                scopes.pop();
            }
            depth = depth.saturating_sub(1);
            i += 1;
            continue;
        }
        if c == ';' {
            pending_mod = None;
        }
        if !is_ident(c) || ident_before(&chars, i) {
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len() && is_ident(chars[i]) {
            i += 1;
        }
        let word: String = chars[start..i].iter().collect();
        if word == "mod" {
            let mut j = i;
            while chars.get(j).is_some_and(|c| c.is_whitespace()) {
                j += 1;
            }
            let name_start = j;
            while chars.get(j).is_some_and(|c| is_ident(*c)) {
                j += 1;
            }
            pending_mod = Some(chars[name_start..j].iter().collect());
            continue;
        }
        if word != "crate" && word != "super" {
            continue;
        }
        let current = scopes.last().map(|s| s.1.clone()).unwrap_or_default();
        let mut base: Vec<String> = if word == "crate" {
            Vec::new()
        } else {
            let mut p = current.clone();
            p.pop();
            p
        };
        // Further `super::`s.
        let mut j = i;
        loop {
            let rest: String = chars[j..chars.len().min(j + 7)].iter().collect();
            if rest == "::super" {
                base.pop();
                j += 7;
            } else {
                break;
            }
        }
        if chars.get(j) != Some(&':') || chars.get(j + 1) != Some(&':') {
            i = j;
            continue;
        }
        j += 2;
        let firsts: Vec<String> = if chars.get(j) == Some(&'{') {
            // A use tree: the first segment of each entry at depth one.
            let mut entries = Vec::new();
            let mut level = 0;
            let mut k = j;
            let mut expect = true;
            while k < chars.len() {
                match chars[k] {
                    '{' => {
                        level += 1;
                        k += 1;
                    }
                    '}' => {
                        level -= 1;
                        k += 1;
                        if level == 0 {
                            break;
                        }
                    }
                    ',' if level == 1 => {
                        expect = true;
                        k += 1;
                    }
                    ch if level == 1 && expect && (is_ident(ch) || ch == '*') => {
                        let s = k;
                        while k < chars.len() && (is_ident(chars[k]) || chars[k] == '*') {
                            k += 1;
                        }
                        entries.push(chars[s..k].iter().collect());
                        expect = false;
                    }
                    _ => k += 1,
                }
            }
            entries
        } else {
            let s = j;
            let mut k = j;
            while k < chars.len() && (is_ident(chars[k]) || chars[k] == '*') {
                k += 1;
            }
            vec![chars[s..k].iter().collect()]
        };
        for first in firsts {
            let mut target = base.clone();
            if first != "self" {
                target.push(first);
            }
            // A glob or an item of the crate root is the root itself.
            let top = target.first().cloned().filter(|t| {
                target.len() > 1 || (t != "*" && t.chars().next().is_some_and(char::is_lowercase))
            });
            out.push(top);
        }
        i = j;
    }
    out
}

/// The rule's violations in `files` (path under `src/` -> source).
fn violations(files: &BTreeMap<PathBuf, String>) -> Vec<String> {
    let mut found = Vec::new();
    for (path, source) in files {
        let module = module_path(path);
        let from = layer(module.first().map(String::as_str));
        for top in reached(&module, &code_only(source)) {
            let to = layer(top.as_deref());
            if !allowed(from, to) {
                found.push(format!(
                    "{}: a {from:?} module uses {} ({to:?})",
                    path.display(),
                    top.as_deref().unwrap_or("the crate root")
                ));
            }
        }
        let lines = source.lines().count();
        let head: String = source.lines().take(60).collect::<Vec<_>>().join("\n");
        if lines > MAX_LINES && !head.to_lowercase().contains(LONG_FILE_MARK) {
            found.push(format!(
                "{}: {lines} lines, and its top does not say why (\"{LONG_FILE_MARK} …\")",
                path.display()
            ));
        }
    }
    found.sort();
    found.dedup();
    found
}

fn sources(dir: &Path, root: &Path, out: &mut BTreeMap<PathBuf, String>) {
    let entries = std::fs::read_dir(dir).expect("read src");
    for entry in entries {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            sources(&path, root, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path).expect("read source");
            let relative = path.strip_prefix(root).expect("under src").to_path_buf();
            out.insert(relative, text);
        }
    }
}

#[test]
fn the_router_keeps_its_module_rule() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = BTreeMap::new();
    sources(&root, &root, &mut files);
    assert!(files.len() > 50, "the router's sources were found");
    for layer_root in ["front/mod.rs", "ops/mod.rs", "upstream/mod.rs", "router.rs"] {
        assert!(files.contains_key(Path::new(layer_root)), "{layer_root}");
    }
    let found = violations(&files);
    assert!(
        found.is_empty(),
        "module rule broken:\n{}",
        found.join("\n")
    );
}

fn one(path: &str, source: &str) -> Vec<String> {
    violations(&BTreeMap::from([(PathBuf::from(path), source.to_owned())]))
}

#[test]
fn the_check_sees_each_kind_of_violation() {
    // Upwards, in every spelling.
    assert_eq!(one("ops/x.rs", "use crate::front::Front;").len(), 1);
    assert_eq!(
        one("ops/x.rs", "use crate::{front::Front, naming::Namer};").len(),
        1
    );
    assert_eq!(
        one(
            "ops/call/x.rs",
            "fn f() { super::super::super::front::g() }"
        )
        .len(),
        1
    );
    assert_eq!(one("upstream/x.rs", "use crate::ops::Ops;").len(), 1);
    assert_eq!(one("naming.rs", "use crate::upstream::Target;").len(), 1);
    assert_eq!(
        one("session/x.rs", "use crate::router::RouterInner;").len(),
        1
    );
    assert_eq!(one("front/x.rs", "use crate::McpRouter;").len(), 1);
    assert_eq!(one("ops/mod.rs", "use super::front;").len(), 1);
    // Downwards, sideways within a layer, and the top: allowed.
    assert!(
        one(
            "front/x.rs",
            "use crate::ops::call::{self, Answer}; use crate::upstream::Call;"
        )
        .is_empty()
    );
    assert!(
        one(
            "ops/call/relay.rs",
            "use super::bridge::Bridge; use crate::ops::Ops;"
        )
        .is_empty()
    );
    assert!(one("upstream/era.rs", "use super::*; use crate::telemetry;").is_empty());
    assert!(one("router.rs", "use crate::front::Front; use crate::ops::Ops;").is_empty());
    assert!(one("cursor.rs", "use crate::seal::Sealer;").is_empty());
    // Inline modules resolve `super` from themselves.
    assert!(one("ops/mod.rs", "mod tests { use super::*; }").is_empty());
    assert_eq!(
        one("ops/mod.rs", "mod tests { use super::super::front::X; }").len(),
        1
    );
    // Comments and strings are not code.
    assert!(one("ops/x.rs", "// use crate::front::Front;\n/// see crate::front\nconst A: &str = \"crate::front\";\nconst B: &str = r#\"crate::front\"#;\nfn f<'a>(c: char) -> bool { c == '\"' }").is_empty());
    // Length.
    let long = "fn f() {}\n".repeat(MAX_LINES + 1);
    assert_eq!(one("ops/x.rs", &long).len(), 1);
    let explained = format!("//! Why this file is long: one state machine.\n{long}");
    assert!(one("ops/x.rs", &explained).is_empty());
}
