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

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{Number, Value};
use toml::Spanned;

use crate::error::Error;
use crate::limits::MAX_GLOB_CHARS;

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
    pub fn find_model(&self, model: &str) -> Option<usize> {
        self.rules.iter().position(|rule| rule.decides_model(model))
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
    pub fn decides_model(&self, model: &str) -> bool {
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

/// A name pattern.
#[derive(Clone, Debug, PartialEq)]
pub struct Glob {
    text: String,
    parts: Vec<Part>,
}

#[derive(Clone, Debug, PartialEq)]
enum Part {
    Char(char),
    AnyOne,
    AnyRun,
    /// A set of ranges (a single character is a range of one); `bool`: negated.
    Set(Vec<(char, char)>, bool),
}

impl Default for Glob {
    fn default() -> Glob {
        Glob::any()
    }
}

impl Glob {
    /// `text` read as a glob.
    ///
    /// # Errors
    ///
    /// Why it is not one (an unclosed or empty set, a `\` at the end,
    /// longer than [`MAX_GLOB_CHARS`]).
    pub fn new(text: &str) -> Result<Glob, String> {
        if text.chars().count() > MAX_GLOB_CHARS {
            return Err(format!("a name pattern is at most {MAX_GLOB_CHARS} characters"));
        }
        let mut parts = Vec::new();
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '*' => {
                    while chars.peek() == Some(&'*') {
                        chars.next();
                    }
                    parts.push(Part::AnyRun);
                }
                '?' => parts.push(Part::AnyOne),
                '\\' => parts.push(Part::Char(chars.next().ok_or("a `\\` must be followed by a character")?)),
                '[' => {
                    let negated = chars.next_if(|c| *c == '!' || *c == '^').is_some();
                    let mut ranges = Vec::new();
                    loop {
                        let start = match chars.next() {
                            None => return Err("a `[` set is not closed with `]`".into()),
                            Some(']') if !ranges.is_empty() => break,
                            Some(']') => return Err("a `[]` set names no character".into()),
                            Some('\\') => chars.next().ok_or("a `\\` must be followed by a character")?,
                            Some(c) => c,
                        };
                        // `a-z` is a range; a `-` first or last in the set is itself.
                        let mut ahead = chars.clone();
                        let is_range = ahead.next() == Some('-') && ahead.next().is_some_and(|c| c != ']');
                        if !is_range {
                            ranges.push((start, start));
                            continue;
                        }
                        chars.next();
                        let end = match chars.next() {
                            Some('\\') => chars.next().ok_or("a `\\` must be followed by a character")?,
                            Some(c) => c,
                            None => return Err("a `[` set is not closed with `]`".into()),
                        };
                        if end < start {
                            return Err(format!("the range `{start}-{end}` runs backwards"));
                        }
                        ranges.push((start, end));
                    }
                    parts.push(Part::Set(ranges, negated));
                }
                c => parts.push(Part::Char(c)),
            }
        }
        Ok(Glob { text: text.to_owned(), parts })
    }

    /// A glob that matches `text` only: its special characters escaped.
    pub fn escape(text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        for c in text.chars() {
            if matches!(c, '*' | '?' | '[' | ']' | '\\') {
                out.push('\\');
            }
            out.push(c);
        }
        out
    }

    /// Matches anything.
    pub fn any() -> Glob {
        Glob { text: "*".into(), parts: vec![Part::AnyRun] }
    }

    /// Matches `text` only.
    pub fn literal(text: &str) -> Glob {
        Glob { text: text.to_owned(), parts: text.chars().map(Part::Char).collect() }
    }

    /// Whether `text` is a name this glob names. `*` alone names anything;
    /// any other glob no name longer than [`MAX_GLOB_CHARS`], so that a
    /// match takes at most that many steps per character of the pattern.
    pub fn matches(&self, text: &str) -> bool {
        if self.parts == [Part::AnyRun] {
            return true;
        }
        let text: Vec<char> = text.chars().take(MAX_GLOB_CHARS + 1).collect();
        if text.len() > MAX_GLOB_CHARS {
            return false;
        }
        // The classic two-pointer match with one backtrack point: linear
        // for patterns with one `*`, never exponential.
        let (mut p, mut t) = (0, 0);
        let mut retry: Option<(usize, usize)> = None;
        while t < text.len() {
            match self.parts.get(p) {
                Some(Part::AnyRun) => {
                    retry = Some((p, t));
                    p += 1;
                    continue;
                }
                Some(part) if part.takes(text[t]) => {
                    p += 1;
                    t += 1;
                    continue;
                }
                _ => {}
            }
            match retry {
                Some((star, from)) => {
                    p = star + 1;
                    t = from + 1;
                    retry = Some((star, from + 1));
                }
                None => return false,
            }
        }
        self.parts[p..].iter().all(|part| *part == Part::AnyRun)
    }
}

impl Part {
    fn takes(&self, c: char) -> bool {
        match self {
            Part::Char(expected) => *expected == c,
            Part::AnyOne => true,
            Part::AnyRun => false,
            Part::Set(ranges, negated) => ranges.iter().any(|(lo, hi)| (*lo..=*hi).contains(&c)) != *negated,
        }
    }
}

impl fmt::Display for Glob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// A JSON pointer whose segments may be `*` (any one) or `**` (any number).
#[derive(Clone, Debug, PartialEq)]
pub struct Pointer(Vec<Segment>);

#[derive(Clone, Debug, PartialEq)]
enum Segment {
    Key(String),
    AnyOne,
    AnyDepth,
}

impl Pointer {
    /// `text` read as a pointer pattern.
    ///
    /// # Errors
    ///
    /// Why it is not one: it does not start with `/`, names nothing (`""`,
    /// `/**`), or has a `~` not followed by `0`, `1` or `2`.
    pub fn new(text: &str) -> Result<Pointer, String> {
        let Some(rest) = text.strip_prefix('/') else {
            return Err("a JSON pointer starts with `/`, e.g. /arguments/requestId".into());
        };
        let mut segments = Vec::new();
        for raw in rest.split('/') {
            let segment = match raw {
                "*" => Segment::AnyOne,
                "**" => Segment::AnyDepth,
                raw => Segment::Key(unescape(raw)?),
            };
            // `**/**` names what `**` names.
            if !(segment == Segment::AnyDepth && segments.last() == Some(&Segment::AnyDepth)) {
                segments.push(segment);
            }
        }
        if segments.last() == Some(&Segment::AnyDepth) {
            return Err(
                "a pointer cannot end in `**`: name what to find at any depth, e.g. /arguments/**/timestamp"
                    .into(),
            );
        }
        Ok(Pointer(segments))
    }

    /// The pattern naming exactly the place of `pointer` (RFC 6901, as
    /// differences give them): a segment that is `*` or `**` there is a key
    /// of that name, written with `~2` so as not to be a wildcard.
    pub fn literal(pointer: &str) -> String {
        pointer
            .split('/')
            .map(|segment| match segment {
                "*" | "**" => segment.replace('*', "~2"),
                other => other.to_owned(),
            })
            .collect::<Vec<_>>()
            .join("/")
    }

    /// Calls `at(parent, key)` for every place this pattern names in
    /// `value`: the parent object or array, and the key (or index, as text)
    /// in it. Places are visited deepest first, so that what `at` removes
    /// does not hide a place still to be visited. Finding them takes time
    /// linear in `value`'s size times the pattern's length, however many
    /// `**` it has: each (node, segment) is looked at once.
    fn visit(&self, value: &mut Value, at: &mut dyn FnMut(&mut Value, &str)) {
        let mut found = Found::default();
        found.search(&self.0, 0, value, &mut Vec::new());
        let mut places = found.places;
        places.sort_by_key(|place| std::cmp::Reverse(place.len()));
        for place in places {
            let Some((key, path)) = place.split_last() else { continue };
            let parent = path.iter().try_fold(&mut *value, |node, key| child_mut(node, key));
            if let Some(parent) = parent.filter(|parent| child_of(parent, key).is_some()) {
                at(parent, key);
            }
        }
    }
}

/// The places a pattern names in a value, found once each.
#[derive(Default)]
struct Found {
    /// (node, segment index) pairs looked at already: a node reached again
    /// through another `**` is not searched again.
    seen: std::collections::HashSet<(*const Value, usize)>,
    /// Each place's path: the keys from the top to the parent, then its key.
    places: Vec<Vec<String>>,
}

impl Found {
    fn search(&mut self, segments: &[Segment], index: usize, value: &Value, path: &mut Vec<String>) {
        let Some(segment) = segments.get(index) else { return };
        if !self.seen.insert((std::ptr::from_ref(value), index)) {
            return;
        }
        match segment {
            Segment::AnyDepth => {
                for (key, child) in children(value) {
                    path.push(key);
                    self.search(segments, index, child, path);
                    path.pop();
                }
                // `**` may name no level at all.
                self.search(segments, index + 1, value, path);
            }
            Segment::AnyOne => {
                for (key, child) in children(value) {
                    self.take(segments, index, key, child, path);
                }
            }
            Segment::Key(key) => {
                if let Some(child) = child_of(value, key) {
                    self.take(segments, index, key.clone(), child, path);
                }
            }
        }
    }

    /// `child` (under `key`) matched segment `index`: a place, or where to go on.
    fn take(
        &mut self,
        segments: &[Segment],
        index: usize,
        key: String,
        child: &Value,
        path: &mut Vec<String>,
    ) {
        path.push(key);
        if index + 1 == segments.len() {
            self.places.push(path.clone());
        } else {
            self.search(segments, index + 1, child, path);
        }
        path.pop();
    }
}

/// The children of an object or array, with their keys (an index as text).
fn children(value: &Value) -> Vec<(String, &Value)> {
    match value {
        Value::Object(map) => map.iter().map(|(key, child)| (key.clone(), child)).collect(),
        Value::Array(items) => items.iter().enumerate().map(|(i, child)| (i.to_string(), child)).collect(),
        _ => Vec::new(),
    }
}

fn child_of<'a>(value: &'a Value, key: &str) -> Option<&'a Value> {
    match value {
        Value::Object(map) => map.get(key),
        Value::Array(items) => key.parse::<usize>().ok().and_then(|i| items.get(i)),
        _ => None,
    }
}

fn child_mut<'a>(value: &'a mut Value, key: &str) -> Option<&'a mut Value> {
    match value {
        Value::Object(map) => map.get_mut(key),
        Value::Array(items) => key.parse::<usize>().ok().and_then(|i| items.get_mut(i)),
        _ => None,
    }
}

/// A pointer segment with `~1` and `~0` read back.
fn unescape(raw: &str) -> Result<String, String> {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c != '~' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('0') => out.push('~'),
            Some('1') => out.push('/'),
            Some('2') => out.push('*'),
            _ => {
                return Err(
                    "`~` in a pointer must be `~0` (for ~), `~1` (for /) or `~2` (for a literal *)".into()
                );
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rules(text: &str) -> Result<MatchRules, String> {
        MatchRules::parse(Path::new("mcp-tape.toml"), text).map_err(|e| e.to_string())
    }

    #[test]
    fn globs_match_as_documented() {
        let cases = [
            ("*", "anything/at all", true),
            ("Get*", "GetMyDetails", true),
            ("Get*", "ListGet", false),
            ("*Details", "GetMyDetails", true),
            ("G?t", "Get", true),
            ("G?t", "Gt", false),
            ("mcp_[MC]*", "mcp_MailTools", true),
            ("mcp_[!MC]*", "mcp_MailTools", false),
            ("mcp_[a-z]*", "mcp_MailTools", false),
            ("file:///**", "file:///a/b/c.txt", true),
            ("a*b*c", "aXbYbZc", true),
            ("a*b*c", "aXbYbZ", false),
            ("\\*", "*", true),
            ("\\*", "x", false),
            ("[-a]", "-", true),
            ("", "", true),
        ];
        for (glob, text, expected) in cases {
            assert_eq!(Glob::new(glob).unwrap().matches(text), expected, "{glob} against {text}");
        }
        for bad in ["[abc", "[]", "a\\", "[z-a]"] {
            assert!(Glob::new(bad).is_err(), "{bad} should be refused");
        }
        for name in ["Get*Details?", "a[b]c\\d", "plain"] {
            let glob = Glob::new(&Glob::escape(name)).unwrap();
            assert!(glob.matches(name) && !glob.matches(&format!("{name}x")), "{name}");
        }
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
    fn globs_and_the_names_they_match_are_bounded() {
        let long = "a".repeat(MAX_GLOB_CHARS + 1);
        assert!(Glob::new(&long).unwrap_err().contains("at most 1024 characters"));
        let pattern = format!("*{}b", "a".repeat(MAX_GLOB_CHARS - 2));
        let glob = Glob::new(&pattern).unwrap();
        let name = format!("{}b", "a".repeat(MAX_GLOB_CHARS - 1));
        assert!(glob.matches(&name), "up to the bound, as before");
        assert!(!glob.matches(&format!("a{name}")), "a longer name is no pattern's but *'s");
        assert!(Glob::any().matches(&"a".repeat(1_000_000)));
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
