//! Personal data in what is stored, found and given pseudonyms
//! (`--pseudonymize`), or only found (`lint`).
//!
//! What is found in a message (MCP or the agent's model; JSON carried in a
//! string is read as JSON):
//!
//! - addresses (and user principal names) and GUIDs, anywhere in a string;
//! - the values of the members that hold people and organizations
//!   ([`member_kind`]: `displayName`, `givenName`, `surname`, `name` under
//!   `emailAddress`, `mail`, `userPrincipalName`, phones, `jobTitle`,
//!   `officeLocation`, `companyName`, and the `fields` a project adds), and
//!   the `terms` it lists;
//! - once found, each such value anywhere else, and each word of a
//!   person's name alone, in any letter case.
//!
//! The members that carry the protocol are left alone ([`Scope`]): the
//! JSON-RPC envelope, tool, prompt and server names, `_meta`, schemas, the
//! model API's own ids and names. A pseudonym keeps its value's form
//! ([`forms`]) and is the keyed hash of the value ([`Key`]), so the same
//! person is the same pseudonym in every message, cassette and run made
//! with one key; a pseudonym carries a check anyone can test, so it is
//! never taken for a value again.

mod find;
mod forms;
mod key;

use std::collections::HashSet;
use std::sync::{Arc, LazyLock, Mutex};

use regex::Regex;
use serde_json::Value;

pub use find::{Personal, find};
pub use forms::{is_guid_pseudonym, is_phone_pseudonym, is_reserved_domain, is_word_pseudonym};
pub use key::{KEY_VARIABLE, Key, KeySource};

use crate::jsonrpc::scan;
use crate::model::{Aside, LlmAnswer, RecordedMessage};
use crate::util::{FastMap, lock};

/// Nested JSON read from strings at most this deep.
const MAX_NESTING: usize = 8;

/// A word of a person's name is found alone when it has this many letters.
const MIN_ALONE_LETTERS: usize = 3;

/// What `[pseudonymize]` in `mcp-tape.toml` adds to what is found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Settings {
    /// Members whose string values are personal, besides the built-in
    /// ones (`fields`).
    pub fields: Vec<String>,
    /// Literal terms: a project's code name, the company's name (`terms`).
    pub terms: Vec<String>,
    /// The variable the key is read from (`key_env`).
    pub key_env: Option<String>,
}

/// What kind of personal value a finding is, as `lint` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    Email,
    Guid,
    /// A person's or an organization's name, title or place.
    Name,
    Phone,
    Term,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Email => "email",
            Kind::Guid => "guid",
            Kind::Name => "name",
            Kind::Phone => "phone",
            Kind::Term => "term",
        }
    }
}

/// What a message is, for the members that carry its protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// A JSON-RPC message of MCP.
    Mcp,
    /// A request to the agent's model or its answer (or a stream's event).
    Model,
    /// JSON carried in a string: all of it is data.
    Data,
}

/// How a member's value is made a pseudonym.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Likeness {
    /// Each word and each run of digits.
    Words,
    /// An address.
    Email,
    /// An address's domain.
    Domain,
    Phone,
    Guid,
}

impl Likeness {
    /// Its place among the forms, 0 to 4.
    fn index(self) -> usize {
        match self {
            Likeness::Words => 0,
            Likeness::Email => 1,
            Likeness::Domain => 2,
            Likeness::Phone => 3,
            Likeness::Guid => 4,
        }
    }
}

/// What a member holds: the form its value takes, whether the words of
/// its value are a person's name (found alone too), the kind `lint` says,
/// and whether `lint` says it: not for a `displayName` that is no
/// person's, nor for any member of an object whose address is at a
/// domain of nobody's ([`is_reserved_domain`], Microsoft's fictitious
/// companies).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Field {
    form: Likeness,
    name: bool,
    kind: Kind,
    linted: bool,
}

/// The members whose presence makes an object a person's: its
/// `displayName` is a person's name.
const PERSON_MEMBERS: [&str; 6] =
    ["givenName", "surname", "mail", "userPrincipalName", "jobTitle", "mobilePhone"];

/// The built-in members that hold people and organizations (`name` only
/// under `emailAddress`; `person`: the object is a person's).
fn member_kind(key: &str, parent: Option<&str>, person: bool, fields: &[String]) -> Option<Field> {
    let member = |form, name, kind| Some(Field { form, name, kind, linted: true });
    match key {
        "givenName" | "surname" => member(Likeness::Words, true, Kind::Name),
        "displayName" => {
            Some(Field { form: Likeness::Words, name: person, kind: Kind::Name, linted: person })
        }
        "name" if parent == Some("emailAddress") => member(Likeness::Words, true, Kind::Name),
        "mail" | "userPrincipalName" => member(Likeness::Email, false, Kind::Email),
        "mobilePhone" | "businessPhones" | "homePhones" => member(Likeness::Phone, false, Kind::Phone),
        "jobTitle" | "officeLocation" | "companyName" | "department" => {
            member(Likeness::Words, false, Kind::Name)
        }
        _ if fields.iter().any(|field| field == key) => member(Likeness::Words, false, Kind::Name),
        _ => None,
    }
}

/// Whether the member `key` (at `pointer`, its parent's pointer) carries
/// the protocol in a message of `scope`: its whole value is left alone.
fn is_protocol(scope: Scope, pointer: &[PathPart], key: &str) -> bool {
    if key == "_meta" {
        return scope != Scope::Data;
    }
    match scope {
        Scope::Data => false,
        Scope::Model => matches!(
            key,
            "id" | "object"
                | "model"
                | "system_fingerprint"
                | "role"
                | "type"
                | "finish_reason"
                | "stop_reason"
                | "name"
                | "tool_call_id"
                | "tool_use_id"
                | "call_id"
                | "parameters"
                | "input_schema"
                | "schema"
        ),
        Scope::Mcp => {
            let at: Vec<&str> = pointer.iter().map(PathPart::as_str).collect();
            match at.as_slice() {
                [] => matches!(key, "jsonrpc" | "id" | "method"),
                ["params"] => {
                    matches!(key, "name" | "protocolVersion" | "clientInfo" | "capabilities" | "cursor")
                }
                ["result"] => matches!(key, "protocolVersion" | "serverInfo" | "capabilities" | "nextCursor"),
                ["result", "tools" | "prompts" | "resourceTemplates", _] => {
                    matches!(key, "name" | "inputSchema" | "outputSchema" | "arguments")
                }
                _ => matches!(key, "inputSchema" | "outputSchema"),
            }
        }
    }
}

/// One step of a pointer: a member, an index, or into the JSON a string
/// carries.
#[derive(Clone, Debug)]
enum PathPart {
    Key(String),
    Index(usize),
    Inside,
}

impl PathPart {
    fn as_str(&self) -> &str {
        match self {
            PathPart::Key(key) => key,
            PathPart::Index(_) => "*",
            PathPart::Inside => " ",
        }
    }
}

/// A JSON pointer of `segments`; the JSON a string carries is written
/// after a space (`/text /value/0`).
fn pointer_of(segments: &[PathPart]) -> String {
    let mut pointer = String::new();
    for segment in segments {
        match segment {
            PathPart::Key(key) => {
                pointer.push('/');
                pointer.push_str(&key.replace('~', "~0").replace('/', "~1"));
            }
            PathPart::Index(index) => {
                pointer.push('/');
                pointer.push_str(&index.to_string());
            }
            PathPart::Inside => pointer.push(' '),
        }
    }
    pointer
}

/// Addresses and GUIDs, anywhere in a string.
static EMAIL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)[a-z0-9][a-z0-9._%+-]*@[a-z0-9-]+(?:\.[a-z0-9-]+)+")
        .expect("an address is a regular expression")
});

/// GUIDs, anywhere in a string.
static GUID: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")
        .expect("a GUID is a regular expression")
});

/// A value found in a string by its shape: an address at a domain of
/// somebody's, or a GUID that is no pseudonym. An expression runs only on
/// a string holding its `@` or `-`.
fn shapes(text: &str) -> impl Iterator<Item = (usize, usize, Likeness, Kind)> + '_ {
    let holds = |byte| memchr::memchr(byte, text.as_bytes()).is_some();
    let emails = if holds(b'@') { EMAIL.find_iter(text) } else { EMAIL.find_iter("") };
    let guids = if holds(b'-') { GUID.find_iter(text) } else { GUID.find_iter("") };
    let emails = emails.filter_map(|email| {
        (!is_reserved_domain(domain_of(email.as_str()))).then_some((
            email.start(),
            email.end(),
            Likeness::Email,
            Kind::Email,
        ))
    });
    let guids = guids.filter(|guid| !is_guid_pseudonym(guid.as_str()));
    emails.chain(guids.map(|guid| (guid.start(), guid.end(), Likeness::Guid, Kind::Guid)))
}

/// The values found so far in a run, to be found again anywhere. A value
/// is held by its tokens' text (from its first letter or digit to its
/// last), lowercased: a string is read token by token (runs of letters
/// and digits), and a match grows from a token while what it has read is
/// the start of a known value. What is held is a 64-bit hash of that
/// text, so that a token not known costs one probe of a small entry.
#[derive(Clone, Default)]
struct Lookup {
    held: FastMap<u64, Known>,
}

/// What a text's hash stands for: a value (and its form), the start of a
/// longer one, or both.
#[derive(Clone, Copy, Default)]
struct Known {
    form: Option<Likeness>,
    start: bool,
}

impl Lookup {
    /// What `value` is held by: its text from its first letter or digit
    /// to its last, lowercased as a token read is, written into `key`.
    fn key_into(value: &str, key: &mut String) {
        key.clear();
        push_lowercase(value.trim_matches(|c: char| !c.is_alphanumeric()), key);
    }

    /// [`Lookup::key_into`] a new string.
    fn key(value: &str) -> String {
        let mut key = String::new();
        Lookup::key_into(value, &mut key);
        key
    }

    /// The hash `key` is held by.
    fn hash(key: &str) -> u64 {
        use std::hash::BuildHasher;
        foldhash::quality::FixedState::with_seed(0x7073_6575_646f_6e79).hash_one(key)
    }

    /// Whether the value of `key` ([`Lookup::key`]) is known.
    fn knows(&self, key: &str) -> bool {
        self.held.get(&Lookup::hash(key)).is_some_and(|held| held.form.is_some())
    }

    /// Adds `value` to be found again, in `form`.
    fn add(&mut self, value: &str, form: Likeness) {
        let key = Lookup::key(value);
        if key.is_empty() || self.knows(&key) {
            return;
        }
        let tokens = tokens(&key);
        for &(_, end) in &tokens[..tokens.len().saturating_sub(1)] {
            self.held.entry(Lookup::hash(&key[..end])).or_default().start = true;
        }
        self.held.entry(Lookup::hash(&key)).or_default().form = Some(form);
    }

    /// Adds to `spans` the known values in `text`: each token's longest match.
    fn found(&self, text: &str, spans: &mut Vec<(usize, usize, Likeness)>) {
        if self.held.is_empty() {
            return;
        }
        let tokens = tokens(text);
        let mut read = String::new();
        for (i, &(start, end)) in tokens.iter().enumerate() {
            read.clear();
            push_lowercase(&text[start..end], &mut read);
            let mut held = self.held.get(&Lookup::hash(&read)).copied().unwrap_or_default();
            let mut longest = held.form.map(|form| (end, form));
            let mut at = i;
            while held.start && at + 1 < tokens.len() {
                at += 1;
                push_lowercase(&text[tokens[at - 1].1..tokens[at].1], &mut read);
                held = self.held.get(&Lookup::hash(&read)).copied().unwrap_or_default();
                if let Some(form) = held.form {
                    longest = Some((tokens[at].1, form));
                }
            }
            if let Some((end, form)) = longest {
                spans.push((start, end, form));
            }
        }
    }
}

/// The runs of letters and digits of `text`: where each starts and ends.
fn tokens(text: &str) -> Vec<(usize, usize)> {
    runs(text, char::is_alphanumeric)
}

/// The runs of the characters `of` takes in `text`: where each starts and
/// ends.
fn runs(text: &str, of: impl Fn(char) -> bool) -> Vec<(usize, usize)> {
    let mut runs = Vec::new();
    let mut start = None;
    for (at, c) in text.char_indices() {
        match (of(c), start) {
            (true, None) => start = Some(at),
            (false, Some(from)) => {
                runs.push((from, at));
                start = None;
            }
            _ => {}
        }
    }
    if let Some(from) = start {
        runs.push((from, text.len()));
    }
    runs
}

/// Appends `text` lowercased to `out`.
fn push_lowercase(text: &str, out: &mut String) {
    if text.is_ascii() {
        out.extend(text.bytes().map(|b| char::from(b.to_ascii_lowercase())));
    } else {
        out.extend(text.chars().flat_map(char::to_lowercase));
    }
}

/// The pseudonyms a run has worked out: each by form and value as
/// written (the same people come back answer after answer), and each
/// pseudonym given with the value it stands for, as a hash: two values
/// with one pseudonym are a collision.
#[derive(Default)]
struct Made {
    /// By form ([`Likeness::index`]), then value.
    by_value: [FastMap<String, Arc<str>>; 5],
    given: FastMap<String, u64>,
    collisions: u64,
}

/// Pseudonyms worked out that are kept at most; past it they are worked
/// out again.
const MAX_MADE: usize = 1 << 20;

/// Pseudonyms of one key for a run: what it has found so far is found
/// again in every message after.
pub struct Pseudonyms {
    key: Key,
    fields: Vec<String>,
    /// What the run has found so far; a message is pseudonymized with what
    /// was known when it began.
    known: Mutex<Arc<Lookup>>,
    made: Mutex<Made>,
    /// Replaying: the word pseudonyms the cassettes hold (lowercased). A
    /// word of a live request whose pseudonym is among them is a value
    /// the recording found, and is given it.
    seen: Option<HashSet<String>>,
}

impl std::fmt::Debug for Pseudonyms {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pseudonyms").field("key", &self.key).finish_non_exhaustive()
    }
}

impl Pseudonyms {
    /// Pseudonyms under `key`, finding what `settings` adds.
    pub fn new(key: Key, settings: &Settings) -> Pseudonyms {
        let mut lookup = Lookup::default();
        for term in &settings.terms {
            lookup.add(term, Likeness::Words);
        }
        Pseudonyms {
            key,
            fields: settings.fields.clone(),
            known: Mutex::new(Arc::new(lookup)),
            made: Mutex::default(),
            seen: None,
        }
    }

    /// The same pseudonyms, replaying cassettes that hold the word
    /// pseudonyms `seen` ([`note_words`]): a live request's word whose
    /// pseudonym is among them is given it, wherever it stands.
    pub fn recognizing(self, seen: HashSet<String>) -> Pseudonyms {
        Pseudonyms { seen: Some(seen), ..self }
    }

    /// The key's fingerprint, which a cassette keeps.
    pub fn fingerprint(&self) -> String {
        self.key.fingerprint()
    }

    /// How many times two values got one pseudonym in this run.
    pub fn collisions(&self) -> u64 {
        lock(&self.made).collisions
    }

    /// Learns the personal values `message` (of `scope`) holds in its
    /// members, and the domains of the addresses it holds, so that they
    /// are found in every message pseudonymized after.
    pub fn learn(&self, message: &Value, scope: Scope) {
        // Only what is not known yet is kept: the same people come back answer after answer.
        let held = Arc::clone(&lock(&self.known));
        let mut read = String::new();
        let mut new = |value: &str| {
            Lookup::key_into(value, &mut read);
            !held.knows(&read)
        };
        let mut found = Vec::new();
        walk(message, scope, &mut Vec::new(), &self.fields, 0, &mut |text, member, _| match member {
            // A name's words are learned with it, an address's domain stands for it.
            Some(member) if new(if member.form == Likeness::Email { domain_of(text) } else { text }) => {
                found.push((text.trim().to_owned(), member));
            }
            Some(_) => {}
            None => {
                for (start, end, form, _) in shapes(text) {
                    if form == Likeness::Email && new(domain_of(&text[start..end])) {
                        found.push((
                            text[start..end].to_owned(),
                            Field { form, name: false, kind: Kind::Email, linted: true },
                        ));
                    }
                }
            }
        });
        if found.is_empty() {
            return;
        }
        let mut known = lock(&self.known);
        // Copied only when something is new: the same people come back answer after answer.
        let mut added: Option<Lookup> = None;
        let mut add = |value: &str, form| {
            let key = Lookup::key(value);
            let held = |lookup: &Lookup| lookup.knows(&key);
            if !held(&known) && !added.as_ref().is_some_and(held) {
                added.get_or_insert_with(|| Lookup::clone(&known)).add(value, form);
            }
        };
        for (value, member) in found {
            if value.is_empty() || already_pseudonym(&value, member.form) {
                continue;
            }
            match member.form {
                // An address is found by its shape anywhere; its domain is found as a value.
                Likeness::Email => {
                    if let Some((_, domain)) = value.rsplit_once('@') {
                        add(domain, Likeness::Domain);
                    }
                }
                form => add(&value, form),
            }
            if member.name {
                for word in value.split(|c: char| !c.is_alphabetic()) {
                    if word.chars().count() >= MIN_ALONE_LETTERS && !is_word_pseudonym(word) {
                        add(word, Likeness::Words);
                    }
                }
            }
        }
        if let Some(added) = added {
            *known = Arc::new(added);
        }
    }

    /// `message` (of `scope`) with every personal value it holds given its
    /// pseudonym: what [`Pseudonyms::learn`] found, addresses and GUIDs.
    /// The protocol's members are left alone.
    /// Whether anything in it changed.
    pub fn pseudonymize(&self, message: &mut Value, scope: Scope) -> bool {
        let known = Arc::clone(&lock(&self.known));
        self.replace_in(message, scope, &mut Vec::new(), &known, 0)
    }

    /// `text` that is not JSON, with every personal value in it given its
    /// pseudonym (JSON in it is not read as JSON).
    pub fn pseudonymize_text(&self, text: &str) -> String {
        let known = Arc::clone(&lock(&self.known));
        self.replaced(text, &known).unwrap_or_else(|| text.to_owned())
    }

    /// Learns what `text` holds, read as JSON if it is JSON.
    pub fn learn_text(&self, text: &str, scope: Scope) {
        if let Ok(value) = serde_json::from_str::<Value>(text) {
            self.learn(&value, scope);
        }
    }

    /// `text` with its personal values given their pseudonyms: as JSON
    /// spelled as written, but for the strings changed, when it is JSON;
    /// else as text.
    pub fn pseudonymize_written(&self, text: &str, scope: Scope) -> String {
        match serde_json::from_str::<Value>(text) {
            Ok(mut value) => {
                if self.pseudonymize(&mut value, scope) {
                    scan::rewrite(text, &value)
                } else {
                    text.to_owned()
                }
            }
            Err(_) => self.pseudonymize_text(text),
        }
    }

    /// Learns what a stored message holds (its whole text, when only its
    /// top is held as a tree).
    pub fn learn_message(&self, message: &RecordedMessage, scope: Scope) {
        match &message.written {
            Some(text) if message.shallow => self.learn_text(text, scope),
            _ => self.learn(&message.body, scope),
        }
    }

    /// Pseudonymizes a stored message: its tree, and its text when only
    /// its top is held as a tree.
    pub fn pseudonymize_message(&self, message: &mut RecordedMessage, scope: Scope) {
        if message.shallow
            && let Some(text) = &mut message.written
        {
            *text = self.pseudonymize_written(text, scope).into();
        }
        self.pseudonymize(&mut message.body, scope);
    }

    /// Pseudonymizes every string of `value` not in a protocol member;
    /// whether any changed.
    /// Learns what an exchange's request, messages and asides hold.
    pub fn learn_exchange(&self, request: &Value, messages: &[RecordedMessage], asides: &[Aside]) {
        self.learn(request, Scope::Mcp);
        for message in messages.iter().chain(asides.iter().map(|aside| &aside.message)) {
            self.learn_message(message, Scope::Mcp);
        }
    }

    /// Pseudonymizes an exchange's request, messages and asides.
    pub fn pseudonymize_exchange(
        &self,
        request: &mut Value,
        messages: &mut [RecordedMessage],
        asides: &mut [Aside],
    ) {
        self.pseudonymize(request, Scope::Mcp);
        for message in messages.iter_mut().chain(asides.iter_mut().map(|aside| &mut aside.message)) {
            self.pseudonymize_message(message, Scope::Mcp);
        }
    }

    /// Learns what a request to the agent's model and its answer hold.
    pub fn learn_llm(&self, request: &str, answer: &LlmAnswer) {
        self.learn_text(request, Scope::Model);
        for text in answer.json_texts() {
            self.learn_text(text, Scope::Model);
        }
    }

    fn replace_in(
        &self,
        value: &mut Value,
        scope: Scope,
        pointer: &mut Vec<PathPart>,
        known: &Lookup,
        nesting: usize,
    ) -> bool {
        let mut changed = false;
        match value {
            Value::Object(members) => {
                for (key, member) in members.iter_mut() {
                    if is_protocol(scope, pointer, key) {
                        continue;
                    }
                    pointer.push(PathPart::Key(key.clone()));
                    changed |= self.replace_in(member, scope, pointer, known, nesting);
                    pointer.pop();
                }
            }
            Value::Array(items) => {
                for (index, item) in items.iter_mut().enumerate() {
                    pointer.push(PathPart::Index(index));
                    changed |= self.replace_in(item, scope, pointer, known, nesting);
                    pointer.pop();
                }
            }
            Value::String(text) => {
                if let Some(mut nested) = nested_json(text, nesting) {
                    if self.replace_in(&mut nested, Scope::Data, &mut Vec::new(), known, nesting + 1) {
                        *text = scan::rewrite(text, &nested);
                        changed = true;
                    }
                } else if let Some(replaced) = self.replaced(text, known).filter(|replaced| replaced != text)
                {
                    *text = replaced;
                    changed = true;
                }
            }
            _ => {}
        }
        changed
    }

    /// `text` with each address, GUID and known value given its pseudonym
    /// (leftmost first, the longest of those that start together); `None`
    /// when nothing in it changes.
    fn replaced(&self, text: &str, known: &Lookup) -> Option<String> {
        let mut spans: Vec<(usize, usize, Likeness)> =
            shapes(text).map(|(start, end, form, _)| (start, end, form)).collect();
        known.found(text, &mut spans);
        if let Some(seen) = &self.seen {
            for (start, word) in alphabetic_runs(text) {
                if !is_word_pseudonym(word) && seen.contains(&forms::word(&self.key, &word.to_lowercase())) {
                    spans.push((start, start + word.len(), Likeness::Words));
                }
            }
        }
        if spans.is_empty() {
            return None;
        }
        spans.sort_by_key(|&(start, end, _)| (start, std::cmp::Reverse(end)));
        let mut out = String::with_capacity(text.len() + text.len() / 4);
        let mut at = 0;
        for (start, end, form) in spans {
            if start < at {
                continue;
            }
            out.push_str(&text[at..start]);
            out.push_str(&self.pseudonym(&text[start..end], form));
            at = end;
        }
        out.push_str(&text[at..]);
        Some(out)
    }

    /// The pseudonym of `value` in `form`, noted to find collisions.
    fn pseudonym(&self, value: &str, form: Likeness) -> Arc<str> {
        let cached = lock(&self.made).by_value[form.index()].get(value).cloned();
        if let Some(pseudonym) = cached {
            return pseudonym;
        }
        let pseudonym: Arc<str> = match form {
            Likeness::Guid => forms::guid(&self.key, value),
            Likeness::Words => forms::words(&self.key, value),
            Likeness::Email => forms::email(&self.key, value),
            Likeness::Domain => forms::domain(&self.key, value),
            Likeness::Phone => forms::phone(&self.key, value),
        }
        .into();
        let (lower, given) = (value.to_lowercase(), pseudonym.to_lowercase());
        let mut made = lock(&self.made);
        if lower != given {
            let digest = Lookup::hash(&lower);
            if *made.given.entry(given).or_insert(digest) != digest {
                made.collisions += 1;
                tracing::error!("two values were given one pseudonym; this recording cannot tell them apart");
            }
        }
        let by_value = &mut made.by_value[form.index()];
        if by_value.len() >= MAX_MADE {
            by_value.clear();
        }
        by_value.insert(value.to_owned(), Arc::clone(&pseudonym));
        pseudonym
    }
}

/// The domain of the address `address` (empty for none).
fn domain_of(address: &str) -> &str {
    address.rsplit_once('@').map_or("", |(_, domain)| domain)
}

/// Each run of letters in `text`, with where it starts.
fn alphabetic_runs(text: &str) -> impl Iterator<Item = (usize, &str)> {
    runs(text, char::is_alphabetic).into_iter().map(|(start, end)| (start, &text[start..end]))
}

/// Whether `value` holds a pseudonym anywhere in its strings: a word or a
/// GUID a recording gave.
pub fn holds_pseudonym(value: &Value) -> bool {
    match value {
        Value::String(text) => {
            alphabetic_runs(text).any(|(_, word)| is_word_pseudonym(word))
                || GUID.find_iter(text).any(|guid| is_guid_pseudonym(guid.as_str()))
        }
        Value::Array(items) => items.iter().any(holds_pseudonym),
        Value::Object(members) => members.values().any(holds_pseudonym),
        _ => false,
    }
}

/// Adds the word pseudonyms `text` holds to `seen`, lowercased.
pub fn note_words(text: &str, seen: &mut HashSet<String>) {
    for (_, word) in alphabetic_runs(text) {
        if is_word_pseudonym(word) {
            seen.insert(word.to_ascii_lowercase());
        }
    }
}

/// Whether `value` is a pseudonym already in `form`.
fn already_pseudonym(value: &str, form: Likeness) -> bool {
    match form {
        Likeness::Email | Likeness::Domain => {
            is_reserved_domain(value.rsplit_once('@').map_or(value, |(_, domain)| domain))
        }
        Likeness::Phone => is_phone_pseudonym(value),
        Likeness::Guid => is_guid_pseudonym(value),
        Likeness::Words => {
            value.split(|c: char| !c.is_alphabetic()).filter(|w| !w.is_empty()).all(is_word_pseudonym)
        }
    }
}

/// Whether the match `start..end` of `text` stands on its own: no letter
/// or digit (a digit, for a phone number) right before or after it.
fn bounded(text: &str, start: usize, end: usize, form: Likeness) -> bool {
    let joins = |c: char| if form == Likeness::Phone { c.is_ascii_digit() } else { c.is_alphanumeric() };
    !text[..start].chars().next_back().is_some_and(joins) && !text[end..].chars().next().is_some_and(joins)
}

/// The JSON a string carries (a tool's text content), when it starts as
/// an object or an array does and reads as one.
fn nested_json(text: &str, nesting: usize) -> Option<Value> {
    let trimmed = text.trim_start();
    if nesting >= MAX_NESTING || !(trimmed.starts_with('{') || trimmed.starts_with('[')) {
        return None;
    }
    serde_json::from_str(text).ok().filter(|value: &Value| value.is_object() || value.is_array())
}

/// Calls `visit` with each string of `value` not in a protocol member: the
/// string, the member it is the value of when that holds people, and its
/// pointer. JSON in a string is walked as [`Scope::Data`].
fn walk(
    value: &Value,
    scope: Scope,
    pointer: &mut Vec<PathPart>,
    fields: &[String],
    nesting: usize,
    visit: &mut impl FnMut(&str, Option<Field>, &[PathPart]),
) {
    match value {
        Value::Object(members) => {
            let parent = match pointer.last() {
                Some(PathPart::Key(key)) => Some(key.clone()),
                _ => None,
            };
            let person = PERSON_MEMBERS.iter().any(|key| members.contains_key(*key));
            let nobody = ["mail", "userPrincipalName", "address"].iter().any(|key| {
                members.get(*key).and_then(Value::as_str).filter(|address| address.contains('@')).is_some_and(
                    |address| {
                        is_reserved_domain(domain_of(address)) || find::is_fictitious(domain_of(address))
                    },
                )
            });
            for (key, member) in members {
                if is_protocol(scope, pointer, key) {
                    continue;
                }
                let kind = member_kind(key, parent.as_deref(), person, fields)
                    .map(|kind| Field { linted: kind.linted && !nobody, ..kind });
                pointer.push(PathPart::Key(key.clone()));
                match (kind, member) {
                    (Some(kind), Value::String(text)) => visit(text, Some(kind), pointer),
                    (Some(kind), Value::Array(items)) => {
                        for (index, item) in items.iter().enumerate() {
                            if let Value::String(text) = item {
                                pointer.push(PathPart::Index(index));
                                visit(text, Some(kind), pointer);
                                pointer.pop();
                            }
                        }
                    }
                    _ => walk(member, scope, pointer, fields, nesting, visit),
                }
                pointer.pop();
            }
        }
        Value::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                pointer.push(PathPart::Index(index));
                walk(item, scope, pointer, fields, nesting, visit);
                pointer.pop();
            }
        }
        Value::String(text) => match nested_json(text, nesting) {
            Some(nested) => {
                let mut inside = pointer.clone();
                inside.push(PathPart::Inside);
                walk(&nested, Scope::Data, &mut inside, fields, nesting + 1, visit);
            }
            None => visit(text, None, pointer),
        },
        _ => {}
    }
}

#[cfg(test)]
mod tests;
