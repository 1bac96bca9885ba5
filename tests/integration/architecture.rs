//! The module graph stays a graph with no circles, and the engine's two
//! modes stay apart (docs/ARCHITECTURE.md). Once `route` and `record`
//! imported each other, as did `normalize` and `store`, and `record` reached
//! into `replay`. This reads `src/` as text: every `crate::…` reference
//! outside comments and `#[cfg(test)]` code is an edge from the top-level
//! module it is written in (the engine's modes count as modules of their
//! own) to the one it names. `cargo test architecture -- --nocapture`
//! prints the graph.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Directories that group modules of their own: each module in one is a
/// node of the graph (`cassette::model` sits below everything, the rest of
/// `cassette` above the protocol modules).
const GROUPS: [&str; 1] = ["cassette"];

/// The node a source file belongs to: its top-level module under `src/`,
/// `engine::record` / `engine::replay` for the engine's modes, or
/// `cassette::store` and the like for a module of a group.
fn node_of(relative: &Path) -> Option<String> {
    let parts: Vec<String> =
        relative.iter().map(|p| p.to_string_lossy().trim_end_matches(".rs").to_owned()).collect();
    match parts.as_slice() {
        [root] if root == "lib" || root == "main" => None,
        [engine, mode] if engine == "engine" && (mode == "record" || mode == "replay") => {
            Some(format!("engine::{mode}"))
        }
        [group, module, ..] if GROUPS.contains(&group.as_str()) && module != "mod" => {
            Some(format!("{group}::{module}"))
        }
        [first, ..] => Some(first.clone()),
        [] => None,
    }
}

fn rust_files(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
}

/// The modules a line of code names: `crate::a::…`, `crate::{a, b::c}`,
/// `crate::cassette::{store, tape}`, and in the engine `super::record` /
/// `super::replay`.
fn named(line: &str, in_engine: bool) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        names.extend(paths(rest).iter().map(|path| node_named(path)));
    }
    names.retain(|n| !n.is_empty());
    if in_engine {
        for mode in ["record", "replay"] {
            if line.contains(&format!("super::{mode}")) {
                names.push(format!("engine::{mode}"));
            }
        }
    }
    names
}

/// The paths `text` starts with: `a::b`, or each of `{a::b, c::{d, e}}`
/// with its braces opened.
fn paths(text: &str) -> Vec<String> {
    if let Some(group) = text.strip_prefix('{') {
        let mut items = Vec::new();
        let (mut depth, mut start, mut closed) = (0, 0, false);
        for (at, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => {
                    items.push(&group[start..at]);
                    closed = true;
                    break;
                }
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    items.push(&group[start..at]);
                    start = at + 1;
                }
                _ => {}
            }
        }
        if !closed {
            // The group goes on over the next lines: what this line holds.
            items.push(&group[start..]);
        }
        return items.into_iter().flat_map(|item| paths(item.trim())).collect();
    }
    let path: String = text.chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':').collect();
    let inner = match text[path.len()..].starts_with('{') {
        true => paths(&text[path.len()..]),
        false => Vec::new(),
    };
    match inner.iter().any(|p| !p.is_empty()) {
        true => inner.into_iter().map(|inner| format!("{path}{inner}")).collect(),
        false => vec![path],
    }
}

/// The node a path names: its first module, or the engine's mode, or the
/// group's module.
fn node_named(path: &str) -> String {
    let mut segments = path.split("::").filter(|s| !s.is_empty());
    let first = segments.next().unwrap_or_default();
    let second = segments.next();
    match second {
        Some(mode) if first == "engine" && (mode == "record" || mode == "replay") => {
            format!("engine::{mode}")
        }
        Some(module) if GROUPS.contains(&first) => format!("{first}::{module}"),
        _ => first.to_owned(),
    }
}

fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in files {
        let relative = file.strip_prefix(&src).unwrap();
        let Some(node) = node_of(relative) else { continue };
        let text = std::fs::read_to_string(&file).unwrap();
        // Test modules close each file; everything from their attribute on is test code.
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        let targets = edges.entry(node.clone()).or_default();
        for line in code.lines().map(str::trim).filter(|l| !l.starts_with("//")) {
            for target in named(line, node.starts_with("engine")) {
                if target != node {
                    targets.insert(target);
                }
            }
        }
    }
    edges
}

/// A cycle through the graph, if it has one.
fn cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut found = path[at..].to_vec();
            found.push(node.to_owned());
            return Some(found);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_owned());
        for next in edges.get(node).into_iter().flatten() {
            if let Some(found) = visit(next, edges, path, done) {
                return Some(found);
            }
        }
        path.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    edges.keys().find_map(|node| visit(node, edges, &mut Vec::new(), &mut done))
}

#[test]
fn the_module_graph_has_no_cycle_and_the_modes_stay_apart() {
    let edges = graph();
    for (node, targets) in &edges {
        let listed: Vec<&str> = targets.iter().map(String::as_str).collect();
        println!("{node} → {}", if listed.is_empty() { "(nothing)".into() } else { listed.join(", ") });
    }
    assert!(edges.len() >= 15, "the source tree was not read: {edges:?}");
    assert!(edges["engine::record"].contains("cassette::store"), "the reader misses references");
    assert_eq!(cycle(&edges), None, "an import cycle");
    assert!(!edges["engine::record"].contains("engine::replay"), "record reaches into replay");
    assert!(!edges["engine::replay"].contains("engine::record"), "replay reaches into record");
    assert!(
        !edges["transport"].contains("engine::record") && !edges["transport"].contains("engine::replay"),
        "a front door reaches into the engine's modes: it should speak only to crate::engine"
    );
    for inner in [
        "engine",
        "engine::record",
        "engine::replay",
        "cassette::store",
        "cassette::model",
        "normalize",
        "cassette::tape",
        "mcp",
    ] {
        assert!(!edges[inner].contains("transport"), "{inner} reaches into a front door");
    }
}

/// The engine and the cassette speak no HTTP: statuses are the HTTP front
/// door's to decide (`transport/http/status.rs`).
#[test]
fn the_engine_and_the_cassette_name_no_http() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src.join("engine"), &mut files);
    rust_files(&src.join("cassette"), &mut files);
    assert!(files.len() >= 10, "the source tree was not read: {files:?}");
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        for line in code.lines().map(str::trim).filter(|l| !l.starts_with("//")) {
            for http in ["http::", "hyper", "StatusCode"] {
                assert!(!line.contains(http), "{} names {http}: {line}", file.display());
            }
        }
    }
}

/// The checker itself finds what it must: a cycle, grouped imports, and
/// the engine's modes through `super::`.
#[test]
fn the_graph_checker_sees_cycles_and_every_form_of_reference() {
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    edges.entry("a".into()).or_default().insert("b".into());
    edges.entry("b".into()).or_default().insert("c".into());
    assert_eq!(cycle(&edges), None);
    edges.entry("c".into()).or_default().insert("a".into());
    assert_eq!(cycle(&edges), Some(vec!["a".into(), "b".into(), "c".into(), "a".into()]));
    assert_eq!(named("use crate::{util, cassette::model::Era};", false), ["util", "cassette::model"]);
    assert_eq!(
        named("use crate::cassette::{jsonl, store::Writer};", false),
        ["cassette::jsonl", "cassette::store"]
    );
    assert_eq!(
        named("use crate::{cassette::{jsonl, tape}, mcp};", false),
        ["cassette::jsonl", "cassette::tape", "mcp"]
    );
    assert_eq!(named("use crate::cassette::model::{", false), ["cassette::model"]);
    assert_eq!(node_of(Path::new("cassette/store/writer.rs")).as_deref(), Some("cassette::store"));
    assert_eq!(node_of(Path::new("cassette/mod.rs")).as_deref(), Some("cassette"));
    assert_eq!(named("let x = crate::engine::record::MAX;", false), ["engine::record"]);
    assert_eq!(named("use super::replay::Replay;", true), ["engine::replay"]);
    assert_eq!(node_of(Path::new("engine/reenact.rs")).as_deref(), Some("engine"));
    assert_eq!(node_of(Path::new("transport/http/proxy.rs")).as_deref(), Some("transport"));
}
