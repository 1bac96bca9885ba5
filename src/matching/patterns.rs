//! The two pattern languages of match rules: a [`Glob`] for names (`*`,
//! `?`, sets, `\` escapes) and a [`Pointer`] into params whose `*` segment
//! matches any one key or index and `**` any number of them.

use std::fmt;

use serde_json::Value;

use crate::limits::MAX_GLOB_CHARS;

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
    pub(super) fn visit(&self, value: &mut Value, at: &mut dyn FnMut(&mut Value, &str)) {
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

pub(super) fn child_mut<'a>(value: &'a mut Value, key: &str) -> Option<&'a mut Value> {
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
}
