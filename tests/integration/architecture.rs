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
        [engine, mode, ..] if engine == "engine" && (mode == "record" || mode == "replay") => {
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

/// The modules a file's code names: `crate::a::…`, `crate::{a, b::c}`,
/// `crate::cassette::{store, tape}`; outside the engine also `engine::…`
/// after a `use crate::engine`, and a name the engine re-exports from a
/// mode names that mode; in the engine `super::record` / `super::replay`.
fn named(code: &str, in_engine: bool) -> Vec<String> {
    let mut names: Vec<String> = after(code, "crate::").flat_map(paths).map(|p| node_named(&p)).collect();
    if !in_engine {
        names.extend(after(code, "engine::").flat_map(paths).map(|p| node_named(&format!("engine::{p}"))));
    }
    names.retain(|n| !n.is_empty());
    if in_engine {
        for mode in ["record", "replay"] {
            if code.contains(&format!("super::{mode}")) {
                names.push(format!("engine::{mode}"));
            }
        }
    }
    names
}

/// The text after each `prefix` in `code` that starts a path (`prefix` not
/// the tail of a longer one, as `engine::` is of `base64::engine::`).
fn after<'a>(code: &'a str, prefix: &'a str) -> impl Iterator<Item = &'a str> + 'a {
    code.match_indices(prefix).filter_map(move |(at, _)| {
        let before = code[..at].chars().next_back();
        let starts = before.is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == ':'));
        starts.then(|| &code[at + prefix.len()..])
    })
}

/// What `src/engine/mod.rs` re-exports from a mode: name → `record` or
/// `replay` (a front door naming one names that mode).
fn engine_reexports() -> &'static BTreeMap<String, String> {
    static FOUND: std::sync::OnceLock<BTreeMap<String, String>> = std::sync::OnceLock::new();
    FOUND.get_or_init(|| {
        let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/engine/mod.rs");
        let code = code_of(&std::fs::read_to_string(file).unwrap());
        let mut found = BTreeMap::new();
        for used in code.split("pub use ").skip(1) {
            for path in paths(used) {
                let mut segments = path.split("::");
                if let (Some(mode @ ("record" | "replay")), Some(name)) = (segments.next(), segments.last()) {
                    found.insert(name.to_owned(), mode.to_owned());
                }
            }
        }
        found
    })
}

/// A file's code as one line: comments and `#[cfg(test)]` code left out
/// (test modules close each file), so a `use` over several lines reads
/// as one.
fn code_of(text: &str) -> String {
    let code = text.split("#[cfg(test)]").next().unwrap_or_default();
    code.lines().map(str::trim).filter(|l| !l.starts_with("//")).collect::<Vec<_>>().join(" ")
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

/// The node a path names: its first module, or the engine's mode.
fn node_named(path: &str) -> String {
    let mut segments = path.split("::").filter(|s| !s.is_empty());
    let first = segments.next().unwrap_or_default();
    let second = segments.next();
    match second {
        Some(mode) if first == "engine" && (mode == "record" || mode == "replay") => {
            format!("engine::{mode}")
        }
        Some(name) if first == "engine" && engine_reexports().contains_key(name) => {
            format!("engine::{}", engine_reexports()[name])
        }
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
        let code = code_of(&std::fs::read_to_string(&file).unwrap());
        let targets = edges.entry(node.clone()).or_default();
        for target in named(&code, node.starts_with("engine")) {
            if target != node {
                targets.insert(target);
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
    assert!(edges["engine::record"].contains("cassette"), "the reader misses references");
    // The unit is the top-level module (`src/<module>`): the engine's modes are the engine's.
    let mut modules: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let module = |node: &str| node.split("::").next().unwrap_or_default().to_owned();
    for (node, targets) in &edges {
        let from = module(node);
        let into = modules.entry(from.clone()).or_default();
        into.extend(targets.iter().map(|t| module(t)).filter(|t| *t != from));
    }
    assert_eq!(cycle(&modules), None, "an import cycle between top-level modules");
    assert!(!edges["engine::record"].contains("engine::replay"), "record reaches into replay");
    assert!(!edges["engine::replay"].contains("engine::record"), "replay reaches into record");
    assert!(
        !edges["transport"].contains("engine::record") && !edges["transport"].contains("engine::replay"),
        "a front door reaches into the engine's modes: it should speak only to crate::engine"
    );
    for inner in ["engine", "engine::record", "engine::replay", "cassette", "model", "normalize", "mcp"] {
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
    assert_eq!(named("use crate::{util, model::Era};", false), ["util", "model"]);
    assert_eq!(
        named("use crate::interchange::{jsonl, foreign::Reader};", false),
        ["interchange", "interchange"]
    );
    assert_eq!(named("use crate::{cassette::{store, tape}, mcp};", false), ["cassette", "cassette", "mcp"]);
    assert_eq!(named("use crate::model::{", false), ["model"]);
    assert_eq!(node_of(Path::new("cassette/store/writer.rs")).as_deref(), Some("cassette"));
    assert_eq!(node_of(Path::new("cassette/mod.rs")).as_deref(), Some("cassette"));
    assert_eq!(named("let x = crate::engine::record::MAX;", false), ["engine::record"]);
    assert_eq!(named("use super::replay::Replay;", true), ["engine::replay"]);
    assert_eq!(
        named("use crate::engine; fn f(r: engine::record::Recorder) {}", false),
        ["engine", "engine::record"]
    );
    let over_lines = code_of("use crate::engine::{\n    // the recorder\n    Answer,\n    Recorder,\n};");
    assert!(
        named(&over_lines, false).contains(&"engine::record".to_owned()),
        "a name re-exported from a mode"
    );
    assert_eq!(named("let b = base64::engine::general_purpose::STANDARD;", false), Vec::<String>::new());
    assert_eq!(node_of(Path::new("engine/reenact.rs")).as_deref(), Some("engine"));
    assert_eq!(node_of(Path::new("engine/replay/misses.rs")).as_deref(), Some("engine::replay"));
    assert_eq!(node_of(Path::new("transport/http/proxy.rs")).as_deref(), Some("transport"));
    let turns = module_path(Path::new("transport/http/turns.rs"));
    assert_eq!(turns, ["transport", "http", "turns"]);
    assert_eq!(module_path(Path::new("transport/http/mod.rs")), ["transport", "http"]);
    let seen = named_paths("use super::{server::Wire, App}; use super::super::stdio;", &turns);
    let seen: Vec<String> = seen.iter().map(|path| path.join("::")).collect();
    assert_eq!(seen, ["transport::http::server::Wire", "transport::http::App", "transport::stdio"]);
}

/// What the engine asks of a front door is fixed when the door is built
/// (`engine::Policy`) or comes with each step: a door never asks which
/// mode it serves, so a new door has no mode's branches to repeat.
#[test]
fn the_front_doors_ask_the_engine_no_mode() {
    let mut files = Vec::new();
    rust_files(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src/transport"), &mut files);
    assert!(files.len() >= 10, "the source tree was not read: {files:?}");
    for file in files {
        let code = code_of(&std::fs::read_to_string(&file).unwrap());
        for call in after(&code, "engine.") {
            let method = call.split(['(', ' ', ';']).next().unwrap_or_default();
            assert!(
                !MODE_QUESTIONS.contains(&method),
                "{} asks the engine `{method}()`: a door takes its policy instead",
                file.display()
            );
        }
    }
    for asked in ["engine.upstream()", "app.engine.upstream()", "self.engine.upstream()"] {
        assert!(after(asked, "engine.").any(|c| c.starts_with("upstream(")), "{asked} is not seen");
    }
    assert_eq!(after("my_engine.upstream()", "engine.").count(), 0);
}

/// Questions whose answer is the engine's mode, and which a front door
/// must not ask.
const MODE_QUESTIONS: [&str; 6] = ["upstream", "pace", "live", "replay", "recordings", "mode"];

/// `src/lib.rs` lists the modules bottom to top, each using only modules
/// listed before it: the list is the graph's order, and names every module.
#[test]
fn the_module_map_lists_the_modules_bottom_to_top() {
    let lib = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs")).unwrap();
    let listed: Vec<&str> = lib
        .lines()
        .filter_map(|line| line.strip_prefix("//! - [`")?.split('`').next())
        .filter(|name| !name.contains("::"))
        .collect();
    let edges = graph();
    let modules: BTreeSet<&str> =
        edges.keys().map(|node| node.split("::").next().unwrap_or_default()).collect();
    let named: BTreeSet<&str> = listed.iter().copied().collect();
    assert_eq!(named, modules, "the map and src/ name different modules");
    for (at, module) in listed.iter().enumerate() {
        for (node, targets) in edges.iter().filter(|(node, _)| node.split("::").next() == Some(module)) {
            for target in targets.iter().map(|t| t.split("::").next().unwrap_or_default()) {
                assert!(
                    target == *module || listed[..at].contains(&target),
                    "{node} uses {target}, which src/lib.rs lists after it"
                );
            }
        }
    }
}

/// The module path of a file under `src/`: `transport/http/turns.rs` is
/// `transport::http::turns`, `cassette/mod.rs` is `cassette`.
fn module_path(relative: &Path) -> Vec<String> {
    let mut parts: Vec<String> =
        relative.iter().map(|p| p.to_string_lossy().trim_end_matches(".rs").to_owned()).collect();
    if parts.last().is_some_and(|last| last == "mod" || last == "lib") {
        parts.pop();
    }
    parts
}

/// The absolute module paths a file's code names, read from `crate::…`,
/// `super::…` (as deep as it goes) and `self::…`, in `module`.
fn named_paths(code: &str, module: &[String]) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    for path in after(code, "crate::").flat_map(paths) {
        found.push(path.split("::").filter(|s| !s.is_empty()).map(str::to_owned).collect());
    }
    for (prefix, up) in [("super::", 1), ("self::", 0)] {
        for path in after(code, prefix).flat_map(paths) {
            let mut segments: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
            let mut up = up;
            while segments.first() == Some(&"super") {
                segments.remove(0);
                up += 1;
            }
            let Some(base) = module.len().checked_sub(up) else { continue };
            let mut absolute = module[..base].to_vec();
            absolute.extend(segments.into_iter().map(str::to_owned));
            found.push(absolute);
        }
    }
    found
}

/// Inside each folder of `src/`, its files and folders name each other
/// with no circle either (a circle there came back once: `frame` →
/// `server` → `turns` → `server`).
#[test]
fn inside_each_folder_the_modules_have_no_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let modules: Vec<(Vec<String>, String)> = files
        .iter()
        .map(|file| {
            let relative = file.strip_prefix(&src).unwrap();
            (module_path(relative), code_of(&std::fs::read_to_string(file).unwrap()))
        })
        .collect();
    let known: BTreeSet<&Vec<String>> = modules.iter().map(|(path, _)| path).collect();
    // Folder → its children's edges among themselves.
    let mut folders: BTreeMap<Vec<String>, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for (module, code) in &modules {
        for target in named_paths(code, module) {
            let shared = module.iter().zip(&target).take_while(|(a, b)| a == b).count();
            let (Some(from), Some(into)) = (module.get(shared), target.get(shared)) else { continue };
            let folder = module[..shared].to_vec();
            let mut child = folder.clone();
            child.push(into.clone());
            if from != into && known.contains(&child) {
                folders.entry(folder).or_default().entry(from.clone()).or_default().insert(into.clone());
            }
        }
    }
    assert!(folders.contains_key(&vec!["transport".to_owned(), "http".to_owned()]), "{folders:?}");
    for (folder, edges) in &folders {
        assert_eq!(cycle(edges), None, "a circle inside src/{}", folder.join("/"));
    }
}
