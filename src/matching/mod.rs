//! Match rules chosen at replay time: the `[[match]]` tables of
//! `mcp-tape.toml` (or `--rules FILE`), read and checked once at start, and
//! the pure transforms they apply to a request's params before it is
//! compared with the recordings. Which recording a rule then picks, with
//! the cursors and the index built at load, is the replay engine's
//! (`engine::by_rule`).
//!
//! A rule names which requests it decides (server, and a tool, prompt,
//! resource URI or method, all globs; or the agent's model by its name, a
//! glob, whose request bodies it then compares) and how they are compared
//! with the recordings of the same server, method and name: `ignore` pointers left
//! out, `normalize` folds (case, space, number) applied at pointers, and
//! `by`: `exact` (equal once ignored and folded), `sequence` (the n-th call
//! gets the n-th recording) or `nearest` (the recording that differs
//! least). The first rule whose patterns match a request decides it; an
//! exact match of the whole request always comes before any rule.
//!
//! Globs: `*` matches any run of characters (`**` is the same), `?` one
//! character, `[abc]`, `[a-z]` and `[!abc]` one of (or none of) a set, `\`
//! takes the next character as it is. Pointers are RFC 6901 JSON pointers
//! into params (`/arguments/subject`) in which a whole segment `*` matches
//! any one key or index and `**` any number of them, none included.

mod patterns;

use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{Number, Value};
use toml::Spanned;

use patterns::child_mut;
pub use patterns::{Glob, Pointer};

use crate::error::Error;

/// The rules file read when `--rules` names none, if it exists.
pub const DEFAULT_FILE: &str = "mcp-tape.toml";

/// How a rule compares a request with the recordings it decides among.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum By {
    /// Equal once ignored pointers are left out and folds applied.
    #[default]
    Exact,
    /// The n-th call gets the n-th recording, whatever its arguments; past
    /// the last recording, a miss.
    Sequence,
    /// The recording that differs least: fewest differing pointers, then
    /// the smallest edit distance between the differing values.
    Nearest,
}

impl Fold {
    pub fn as_str(self) -> &'static str {
        match self {
            Fold::Case => "case",
            Fold::Space => "space",
            Fold::Number => "number",
        }
    }
}

impl By {
    pub fn as_str(self) -> &'static str {
        match self {
            By::Exact => "exact",
            By::Sequence => "sequence",
            By::Nearest => "nearest",
        }
    }
}

/// One way of making two values the same for comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Fold {
    /// Strings compared without regard to case.
    Case,
    /// Strings trimmed, runs of white space made one space.
    Space,
    /// Numbers and strings that hold a number compared as numbers.
    Number,
}

/// The rules of one file, in order.
#[derive(Clone, Debug, Default)]
pub struct MatchRules {
    /// The file they came from (for reports: `FILE:LINE`).
    file: PathBuf,
    rules: Vec<MatchRule>,
}

/// One `[[match]]` table.
#[derive(Clone, Debug)]
pub struct MatchRule {
    /// The line its table starts on.
    pub line: usize,
    /// Which MCP requests it decides; `None` for a rule about a model.
    selector: Option<Selector>,
    /// Which of the agent's models it decides the requests to (`model`).
    model: Option<Glob>,
    ignore: Vec<Pointer>,
    normalize: Vec<(Pointer, Vec<Fold>)>,
    pub by: By,
}

/// A `[[match]]` table as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRule {
    server: Option<Spanned<String>>,
    method: Option<Spanned<String>>,
    tool: Option<Spanned<String>>,
    prompt: Option<Spanned<String>>,
    uri: Option<Spanned<String>>,
    model: Option<Spanned<String>>,
    #[serde(default)]
    ignore: Vec<Spanned<String>>,
    normalize: Option<Spanned<std::collections::BTreeMap<String, Vec<Fold>>>>,
    #[serde(default)]
    by: By,
}

/// The file as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(rename = "match", default)]
    rules: Vec<Spanned<RawRule>>,
    /// Fault rules, read by `faults`.
    #[serde(rename = "fault", default)]
    _faults: Vec<toml::Value>,
    /// Read by `faults`.
    #[serde(rename = "pseudonymize")]
    _pseudonymize: Option<toml::Value>,
}

impl MatchRules {
    /// The rules `text` (the contents of `file`) holds.
    ///
    /// # Errors
    ///
    /// [`Error::Rules`] naming the line and what is wrong there.
    pub fn parse(file: &Path, text: &str) -> Result<MatchRules, Error> {
        let lines = LineStarts::of(text);
        let raw: RawFile = toml::from_str(text).map_err(|e| lines.refuse(file, e.span(), e.message()))?;
        MatchRules::from_tables(file, &lines, raw.rules)
    }

    /// The rules of the `[[match]]` tables of `file`, whose text's lines
    /// are `lines`.
    ///
    /// # Errors
    ///
    /// [`Error::Rules`] naming the line and what is wrong there.
    pub(crate) fn from_tables(
        file: &Path,
        lines: &LineStarts,
        tables: Vec<Spanned<RawRule>>,
    ) -> Result<MatchRules, Error> {
        let mut rules = Vec::with_capacity(tables.len());
        for table in tables {
            let line = lines.line_of(table.span().start);
            let rule = MatchRule::from_raw(table.into_inner())
                .map_err(|(span, reason)| lines.refuse(file, span, &reason))?;
            rules.push(MatchRule { line, ..rule });
        }
        Ok(MatchRules { file: file.to_owned(), rules })
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    pub fn file(&self) -> &Path {
        &self.file
    }

    pub fn rules(&self) -> &[MatchRule] {
        &self.rules
    }

    /// The index of the first rule that decides a request of `method` to
    /// `server` naming `name` (tool, prompt or URI; `""` for none).
    pub fn find(&self, server: &str, method: &str, name: &str) -> Option<usize> {
        self.rules.iter().position(|rule| rule.decides(server, method, name))
    }

    /// The index of the first rule that decides the requests to the
    /// agent's model `model`.
    pub fn find_llm(&self, model: &str) -> Option<usize> {
        self.rules.iter().position(|rule| rule.decides_llm(model))
    }

    /// Where rule `index` stands, for reports: `FILE:LINE`.
    pub fn place(&self, index: usize) -> String {
        let line = self.rules.get(index).map_or(0, |rule| rule.line);
        format!("{}:{line}", self.file.display())
    }

    /// How rule `index` is told in reports: `FILE:LINE (by)`.
    pub fn label(&self, index: usize) -> String {
        let by = self.rules.get(index).map_or(By::Exact, |rule| rule.by);
        format!("{} ({})", self.place(index), by.as_str())
    }
}

impl MatchRule {
    fn from_raw(raw: RawRule) -> Result<MatchRule, (Option<Range<usize>>, String)> {
        let (selector, model) = match &raw.model {
            None => {
                (Some(Selector::new([&raw.server, &raw.method, &raw.tool, &raw.prompt, &raw.uri])?), None)
            }
            Some(model) => {
                let mcp = [
                    ("server", &raw.server),
                    ("method", &raw.method),
                    ("tool", &raw.tool),
                    ("prompt", &raw.prompt),
                    ("uri", &raw.uri),
                ];
                if let Some((key, value)) = mcp.iter().find_map(|(key, value)| Some((key, value.as_ref()?))) {
                    return Err((
                        Some(value.span()),
                        format!(
                            "{key}: a rule with model decides that model's requests, not MCP ones; give it a table of its own"
                        ),
                    ));
                }
                let glob = Glob::new(model.get_ref())
                    .map_err(|why| (Some(model.span()), format!("model {:?}: {why}", model.get_ref())))?;
                (None, Some(glob))
            }
        };
        let pointer = |text: &Spanned<String>, what: &str| {
            Pointer::new(text.get_ref())
                .map_err(|why| (Some(text.span()), format!("{what} {:?}: {why}", text.get_ref())))
        };
        let ignore = raw.ignore.iter().map(|p| pointer(p, "ignore")).collect::<Result<Vec<_>, _>>()?;
        let mut normalize = Vec::new();
        let (span, table) = raw.normalize.map_or((0..0, Default::default()), |n| (n.span(), n.into_inner()));
        for (text, folds) in table {
            let at = Pointer::new(&text)
                .map_err(|why| (Some(span.clone()), format!("normalize {text:?}: {why}")))?;
            if folds.is_empty() {
                return Err((
                    Some(span.clone()),
                    format!("normalize {text:?}: name at least one of case, space, number"),
                ));
            }
            normalize.push((at, folds));
        }
        Ok(MatchRule { line: 0, selector, model, ignore, normalize, by: raw.by })
    }

    /// Whether this rule decides a request of `method` to `server` naming `name`.
    pub fn decides(&self, server: &str, method: &str, name: &str) -> bool {
        self.selector.as_ref().is_some_and(|selector| selector.selects(server, method, name))
    }

    /// Whether this rule decides the requests to the agent's model `model`.
    pub fn decides_llm(&self, model: &str) -> bool {
        self.model.as_ref().is_some_and(|glob| glob.matches(model))
    }

    /// `params` (canonical: redacted, `_meta` and `--ignore-param`s left
    /// out) as this rule compares them: ignored pointers out, folds applied.
    pub fn prepare(&self, params: &Value) -> Value {
        let mut prepared = params.clone();
        for pointer in &self.ignore {
            pointer.visit(&mut prepared, &mut |parent, key| match parent {
                Value::Object(map) => {
                    map.remove(key);
                }
                // In an array, positions stay where they are, so later elements still line up.
                array => {
                    if let Some(item) = child_mut(array, key) {
                        *item = Value::Null;
                    }
                }
            });
        }
        for (pointer, folds) in &self.normalize {
            pointer.visit(&mut prepared, &mut |parent, key| {
                if let Some(child) = child_mut(parent, key) {
                    fold(child, folds);
                }
            });
        }
        prepared
    }
}

/// Which requests a rule is about: a server, and a tool, prompt or resource
/// URI (each implying its method) or a method, all globs; what a rule
/// leaves out matches anything.
#[derive(Clone, Debug)]
pub struct Selector {
    server: Glob,
    method: Glob,
    /// The tool or prompt name, or the resource URI; `None`: any.
    name: Option<Glob>,
}

/// A problem with a rule table: where in the file (a byte span, when known)
/// and why.
pub type BadRule = (Option<Range<usize>>, String);

impl Selector {
    /// The selector of a table's `server`, `method`, `tool`, `prompt` and
    /// `uri` keys, in that order.
    ///
    /// # Errors
    ///
    /// A bad glob; more than one of tool, prompt and uri; a method other
    /// than the one a tool, prompt or uri implies.
    pub fn new(keys: [&Option<Spanned<String>>; 5]) -> Result<Selector, BadRule> {
        let [server, method, tool, prompt, uri] = keys;
        let glob = |field: &Option<Spanned<String>>, what: &str| -> Result<Option<Glob>, BadRule> {
            field
                .as_ref()
                .map(|text| {
                    Glob::new(text.get_ref())
                        .map_err(|why| (Some(text.span()), format!("{what} {:?}: {why}", text.get_ref())))
                })
                .transpose()
        };
        let named: Vec<(&str, &Spanned<String>)> = [("tool", tool), ("prompt", prompt), ("uri", uri)]
            .into_iter()
            .filter_map(|(key, value)| Some((key, value.as_ref()?)))
            .collect();
        let (name, implied) = match named.as_slice() {
            [] => (None, None),
            [(key, value)] => {
                let method = match *key {
                    "tool" => "tools/call",
                    "prompt" => "prompts/get",
                    _ => "resources/read",
                };
                (glob(&Some((*value).clone()), key)?, Some((*key, method)))
            }
            [_, (key, value), ..] => {
                let keys: Vec<&str> = named.iter().map(|(k, _)| *k).collect();
                return Err((
                    Some(value.span()),
                    format!("{key}: a rule names one of tool, prompt and uri, not {}", keys.join(" and ")),
                ));
            }
        };
        let method = match (method, implied) {
            (Some(method), Some((key, implied))) if method.get_ref() != implied => {
                return Err((
                    Some(method.span()),
                    format!("method {:?}: a rule with {key} decides {implied} only", method.get_ref()),
                ));
            }
            (Some(method), _) => glob(&Some(method.clone()), "method")?.unwrap_or_default(),
            (None, Some((_, implied))) => Glob::literal(implied),
            (None, None) => Glob::any(),
        };
        Ok(Selector { server: glob(server, "server")?.unwrap_or_default(), method, name })
    }

    /// The requests of `method` to `server` naming `tool` (a literal
    /// selector, for rules made from something other than a file).
    pub fn tool(server: &str, tool: &str) -> Selector {
        Selector {
            server: Glob::literal(server),
            method: Glob::literal("tools/call"),
            name: Some(Glob::literal(tool)),
        }
    }

    /// Whether a request of `method` to `server` naming `name` (tool, prompt
    /// or URI; `""` for none) is one of these.
    pub fn selects(&self, server: &str, method: &str, name: &str) -> bool {
        self.method.matches(method)
            && self.server.matches(server)
            && self.name.as_ref().is_none_or(|glob| glob.matches(name))
    }

    /// Whether it selects requests of `method` only.
    pub fn is_only(&self, method: &str) -> bool {
        self.method == Glob::literal(method)
    }
}

/// Applies `folds` to every string and number at or below `value`.
fn fold(value: &mut Value, folds: &[Fold]) {
    match value {
        Value::Object(map) => map.values_mut().for_each(|v| fold(v, folds)),
        Value::Array(items) => items.iter_mut().for_each(|v| fold(v, folds)),
        Value::String(text) => {
            for how in folds {
                match how {
                    Fold::Case => *text = text.to_lowercase(),
                    Fold::Space => *text = text.split_whitespace().collect::<Vec<_>>().join(" "),
                    Fold::Number => {}
                }
            }
            if folds.contains(&Fold::Number)
                && let Some(number) = text.trim().parse::<f64>().ok().and_then(as_number)
            {
                *value = Value::Number(number);
            }
        }
        Value::Number(number) if folds.contains(&Fold::Number) => {
            if let Some(same) = number.as_f64().and_then(as_number) {
                *number = same;
            }
        }
        _ => {}
    }
}

/// The fewest folds that make `recorded` and `requested` the same, if
/// some do: what `normalize` at their pointer would need.
pub fn folds_that_join(recorded: &Value, requested: &Value) -> Option<Vec<Fold>> {
    let tries: [&[Fold]; 5] = [
        &[Fold::Number],
        &[Fold::Case],
        &[Fold::Space],
        &[Fold::Case, Fold::Space],
        &[Fold::Case, Fold::Space, Fold::Number],
    ];
    tries.into_iter().find_map(|folds| {
        let (mut a, mut b) = (recorded.clone(), requested.clone());
        fold(&mut a, folds);
        fold(&mut b, folds);
        (a == b).then(|| folds.to_vec())
    })
}

/// One spelling per number: a whole number as an integer, else the float.
fn as_number(value: f64) -> Option<Number> {
    if !value.is_finite() {
        return None;
    }
    if value.fract() == 0.0 && value.abs() < 9.0e15 {
        return Some(Number::from(value as i64));
    }
    Number::from_f64(value)
}

/// Where the lines of a text start, to tell the line of any byte in it
/// in logarithmic time (a rules file of many tables names each one's line).
pub struct LineStarts(Vec<usize>);

impl LineStarts {
    pub fn of(text: &str) -> LineStarts {
        LineStarts(text.bytes().enumerate().filter(|(_, b)| *b == b'\n').map(|(at, _)| at).collect())
    }

    /// The line (from 1) that byte `at` is on.
    pub fn line_of(&self, at: usize) -> usize {
        self.0.partition_point(|newline| *newline < at) + 1
    }

    /// [`Error::Rules`]: `reason`, on the line `span` starts on (the first
    /// without one) of `file`.
    pub fn refuse(&self, file: &Path, span: Option<Range<usize>>, reason: &str) -> Error {
        Error::Rules {
            file: file.to_owned(),
            line: span.map_or(1, |span| self.line_of(span.start)),
            reason: reason.trim().to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rules(text: &str) -> Result<MatchRules, String> {
        MatchRules::parse(Path::new("mcp-tape.toml"), text).map_err(|e| e.to_string())
    }

    #[test]
    fn ignore_and_normalize_prepare_params() {
        let rules = rules(
            r#"
[[match]]
tool = "Send"
ignore = ["/arguments/requestId", "/arguments/**/timestamp", "/arguments/items/*/id"]
normalize = { "/arguments/subject" = ["case", "space"], "/arguments/top" = ["number"] }
"#,
        )
        .unwrap();
        let rule = &rules.rules()[0];
        let params = json!({"name": "Send", "arguments": {
            "requestId": "r-1", "subject": "  Team   SYNC ", "top": "5",
            "meta": {"deep": {"timestamp": 1, "keep": 2}, "timestamp": 3},
            "items": [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}],
        }});
        assert_eq!(
            rule.prepare(&params),
            json!({"name": "Send", "arguments": {
                "subject": "team sync", "top": 5, "meta": {"deep": {"keep": 2}},
                "items": [{"v": "a"}, {"v": "b"}],
            }})
        );
        assert_eq!(
            rule.prepare(&json!({"name": "Send", "arguments": {"top": 5.0}}))["arguments"]["top"],
            json!(5)
        );
    }

    #[test]
    fn the_fewest_folds_that_join_two_values_are_found() {
        let join = |a: Value, b: Value| folds_that_join(&a, &b);
        assert_eq!(join(json!("5"), json!(5)), Some(vec![Fold::Number]));
        assert_eq!(join(json!(5.0), json!(5)), Some(vec![Fold::Number]));
        assert_eq!(join(json!("Team Sync"), json!("team sync")), Some(vec![Fold::Case]));
        assert_eq!(join(json!("team  sync "), json!("team sync")), Some(vec![Fold::Space]));
        assert_eq!(join(json!(" Team  Sync"), json!("team sync")), Some(vec![Fold::Case, Fold::Space]));
        assert_eq!(join(json!("team sync"), json!("team sync tomorrow")), None);
        assert_eq!(join(json!(5), json!(6)), None);
    }

    #[test]
    fn the_first_rule_that_matches_decides() {
        let rules = rules(
            r#"
[[match]]
server = "mcp_Me*"
tool = "GetMyDetails"
by = "nearest"

[[match]]
method = "prompts/*"
by = "sequence"

[[match]]
uri = "file:///docs/**"
"#,
        )
        .unwrap();
        assert_eq!(rules.find("mcp_MeServer", "tools/call", "GetMyDetails"), Some(0));
        assert_eq!(rules.find("mcp_MeServer", "tools/call", "Other"), None);
        assert_eq!(rules.find("mcp_MailTools", "tools/call", "GetMyDetails"), None);
        assert_eq!(rules.find("x", "prompts/get", "p"), Some(1));
        assert_eq!(rules.find("x", "resources/read", "file:///docs/a/b"), Some(2));
        assert_eq!(rules.find("x", "resources/read", "file:///etc/passwd"), None);
        assert_eq!(rules.label(0), "mcp-tape.toml:2 (nearest)");
        assert_eq!(rules.label(2), "mcp-tape.toml:11 (exact)");
    }

    /// Eight `**` against a request nested 40 deep once took 26.8 s (each
    /// `**` searched again below every place the one before it matched).
    #[test]
    fn many_double_stars_search_each_node_once() {
        let mut nested = json!({"x": 1, "y": 2});
        for _ in 0..40 {
            nested = json!({"a": nested});
        }
        let rules =
            rules("[[match]]\ntool = \"t\"\nignore = [\"/**/a/**/a/**/a/**/a/**/a/**/a/**/a/**/x\"]\n")
                .unwrap();
        let prepared = rules.rules()[0].prepare(&nested);
        let mut bottom = &prepared;
        while let Some(inner) = bottom.get("a") {
            bottom = inner;
        }
        assert_eq!(bottom, &json!({"y": 2}), "the x at the bottom is ignored, nothing else");
        assert_eq!(Pointer::new("/**/**/a").unwrap(), Pointer::new("/**/a").unwrap());
    }

    #[test]
    fn lines_tell_the_line_of_every_byte() {
        let text = "a\n\nbc\nd";
        let lines = LineStarts::of(text);
        for at in 0..=text.len() {
            let counted = text.as_bytes()[..at].iter().filter(|b| **b == b'\n').count() + 1;
            assert_eq!(lines.line_of(at), counted, "byte {at}");
        }
    }

    #[test]
    fn a_bad_file_is_refused_with_its_line_and_reason() {
        let cases = [
            ("[[match]]\ntool = \"a\"\nbogus = 1\n", 3, "unknown field `bogus`"),
            ("[[match]]\ntool = \"a\"\n\n[[match]]\nignore = [\"arguments/x\"]\n", 5, "starts with `/`"),
            ("[[match]]\nserver = \"mcp_[\"\n", 2, "server \"mcp_[\": "),
            ("[[match]]\ntool = \"[z-a]\"\n", 2, "tool \"[z-a]\": "),
            ("[[match]]\nby = \"closest\"\n", 2, "unknown variant `closest`"),
            ("[[match]]\nnormalize = { \"/a\" = [\"upper\"] }\n", 2, "unknown variant `upper`"),
            ("[[match]]\ntool = \"a\"\nuri = \"b\"\n", 3, "one of tool, prompt and uri"),
            ("[[match]]\ntool = \"a\"\nmethod = \"prompts/get\"\n", 3, "decides tools/call only"),
            ("[[faults]]\nnth = 1\n", 1, "unknown field `faults`"),
            ("[[match]\n", 1, ""),
            ("[[match]]\nignore = [\"/a/~3\"]\n", 2, "`~0`"),
            ("[[match]]\nignore = [\"/**\"]\n", 2, "cannot end in `**`"),
        ];
        for (text, line, reason) in cases {
            let error = rules(text).expect_err(text);
            assert!(error.starts_with(&format!("mcp-tape.toml:{line}: ")), "{text:?} gave {error}");
            assert!(error.contains(reason), "{text:?} gave {error}");
            assert!(!error.contains("Spanned") && !error.contains("span:"), "words, not debug text: {error}");
        }
        assert!(rules("").unwrap().is_empty());
    }
}
