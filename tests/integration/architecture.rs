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

/// The node a source file belongs to: its top-level module under `src/`,
/// or `engine::record` / `engine::replay` for the engine's modes.
fn node_of(relative: &Path) -> Option<String> {
    let parts: Vec<String> =
        relative.iter().map(|p| p.to_string_lossy().trim_end_matches(".rs").to_owned()).collect();
    match parts.as_slice() {
        [root] if root == "lib" || root == "main" => None,
        [engine, mode] if engine == "engine" && (mode == "record" || mode == "replay") => {
            Some(format!("engine::{mode}"))
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
/// and in the engine `super::record` / `super::replay`.
fn named(line: &str, in_engine: bool) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let inner = group.split('}').next().unwrap_or_default();
            names.extend(
                inner.split(',').filter_map(|item| item.trim().split("::").next().map(str::to_owned)),
            );
        } else {
            names.push(rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect());
        }
    }
    let mut names: Vec<String> = names
        .into_iter()
        .filter(|n| !n.is_empty())
        .map(|name| match rest_of_engine(line, &name) {
            Some(mode) => format!("engine::{mode}"),
            None => name,
        })
        .collect();
    if in_engine {
        for mode in ["record", "replay"] {
            if line.contains(&format!("super::{mode}")) {
                names.push(format!("engine::{mode}"));
            }
        }
    }
    names
}

/// `crate::engine::record` names the mode, not the engine.
fn rest_of_engine(line: &str, name: &str) -> Option<&'static str> {
    if name != "engine" {
        return None;
    }
    ["record", "replay"].into_iter().find(|mode| line.contains(&format!("crate::engine::{mode}")))
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
    assert!(edges["engine::record"].contains("store"), "the reader misses references");
    assert_eq!(cycle(&edges), None, "an import cycle");
    assert!(!edges["engine::record"].contains("engine::replay"), "record reaches into replay");
    assert!(!edges["engine::replay"].contains("engine::record"), "replay reaches into record");
    for inner in ["engine", "engine::record", "engine::replay", "store", "model", "normalize", "tape", "mcp"]
    {
        assert!(!edges[inner].contains("transport"), "{inner} reaches into a front door");
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
    assert_eq!(named("use crate::{model::Era, util};", false), ["model", "util"]);
    assert_eq!(named("let x = crate::engine::record::MAX;", false), ["engine::record"]);
    assert_eq!(named("use super::replay::Replay;", true), ["engine::replay"]);
    assert_eq!(node_of(Path::new("engine/reenact.rs")).as_deref(), Some("engine"));
    assert_eq!(node_of(Path::new("transport/http/proxy.rs")).as_deref(), Some("transport"));
}
