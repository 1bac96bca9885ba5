//! What never reaches a cassette. Values under sensitive JSON keys become
//! `"[REDACTED]"`; record and replay apply the same rules before the match
//! key is computed, so a redacted recording still matches the live request
//! it came from. Credentials seen in request headers (the bearer token above
//! all) are scrubbed from every stored string, even where the upstream
//! echoed them back.

use aho_corasick::{AhoCorasick, MatchKind};
use serde_json::Value;

use crate::jsonrpc::scan::{self, Edit};
use crate::limits::MIN_SCRUBBED_SECRET_CHARS;
use crate::model::{RawExchange, RecordedMessage};
use crate::secrets::Shapes;

/// What a redacted value is replaced with.
pub const REDACTED: &str = "[REDACTED]";

/// Key endings that mark a value as a credential, compared on the key's
/// lowercase alphanumerics (`api_key`, `X-Api-Key` and `apiKey` all end in
/// `apikey`).
const SENSITIVE_ENDINGS: [&str; 7] =
    ["token", "secret", "password", "passwd", "apikey", "authorization", "cookie"];

/// Keys that end like a credential but are protocol fields replay needs.
const PROTOCOL_KEYS: [&str; 1] = ["progresstoken"];

/// Query parameter names that carry a credential in a URL though they do not
/// end like one (Azure's SAS `sig`, a bare `key`, an OAuth `code`).
const SENSITIVE_QUERY_NAMES: [&str; 4] = ["key", "sig", "signature", "code"];

/// What stands for a credential in a URL shown in a log line or a message.
const MASK: &str = "***";

/// Whether a query parameter named `name` carries a credential: it ends
/// like a sensitive body key, or is one of [`SENSITIVE_QUERY_NAMES`].
fn is_credential_parameter(redactor: &Redactor, name: &str) -> bool {
    redactor.is_sensitive(name) || SENSITIVE_QUERY_NAMES.iter().any(|n| n.eq_ignore_ascii_case(name))
}

/// `query` without the parameters that carry a credential (those
/// [`url_for_log`] masks), and their values, to be scrubbed from whatever
/// else is stored. A name is judged as the server reads it, its `%XX`
/// escapes and `+` decoded (`api%5Fkey` is `api_key`); a value is kept to
/// scrub both as sent and decoded.
pub fn query_without_credentials(query: &str) -> (String, Vec<String>) {
    let redactor = Redactor::default();
    let mut values = Vec::new();
    let kept: Vec<&str> = query
        .split('&')
        .filter(|pair| {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let credential = is_credential_parameter(&redactor, &form_decoded(name));
            if credential {
                let decoded = form_decoded(value);
                for form in [value.to_owned(), decoded] {
                    if form.chars().count() >= MIN_SCRUBBED_SECRET_CHARS && !values.contains(&form) {
                        values.push(form);
                    }
                }
            }
            !credential
        })
        .collect();
    (kept.join("&"), values)
}

/// A query name or value as a server reads it: `+` a space, `%XX` escapes decoded.
fn form_decoded(text: &str) -> String {
    crate::util::percent_decode(&text.replace('+', " "))
}

/// `url` as it may be shown: the password of its user information and the
/// value of each query parameter that names a credential (by the same
/// endings as body keys, or [`SENSITIVE_QUERY_NAMES`]) as `***`; the rest,
/// and so where it leads, as given. Nothing is parsed beyond that, so text
/// that is no URL comes back as it was.
pub fn url_for_log(url: &str) -> String {
    let (head, fragment) = url.split_once('#').map_or((url, None), |(head, fragment)| (head, Some(fragment)));
    let (before, query) = head.split_once('?').map_or((head, None), |(before, query)| (before, Some(query)));
    let mut shown = match before.split_once("://") {
        Some((scheme, rest)) => {
            let authority_end = rest.find('/').unwrap_or(rest.len());
            let (authority, path) = rest.split_at(authority_end);
            match authority.rsplit_once('@') {
                Some((user_info, host)) => {
                    let user = user_info.split_once(':').map_or(user_info, |(user, _)| user);
                    let masked =
                        if user_info.contains(':') { format!("{user}:{MASK}") } else { MASK.to_owned() };
                    format!("{scheme}://{masked}@{host}{path}")
                }
                None => before.to_owned(),
            }
        }
        None => before.to_owned(),
    };
    if let Some(query) = query {
        let redactor = Redactor::default();
        let pairs: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((name, _)) if is_credential_parameter(&redactor, &form_decoded(name)) => {
                    format!("{name}={MASK}")
                }
                _ => pair.to_owned(),
            })
            .collect();
        shown.push('?');
        shown.push_str(&pairs.join("&"));
    }
    if let Some(fragment) = fragment {
        shown.push('#');
        shown.push_str(fragment);
    }
    shown
}

/// Decides which JSON object keys are sensitive and blanks their values,
/// and scrubs text of the secret shapes it was given from every string.
#[derive(Clone, Debug, Default)]
pub struct Redactor {
    /// User-given keys (`--redact-key`), folded like the built-in endings;
    /// these match whole keys, not endings.
    extra: Vec<String>,
    /// `--redact-pattern` shapes.
    shapes: Shapes,
}

impl Redactor {
    pub fn new(extra_keys: &[String], shapes: Shapes) -> Redactor {
        Redactor { extra: extra_keys.iter().map(|k| fold(k)).collect(), shapes }
    }

    pub fn is_sensitive(&self, key: &str) -> bool {
        with_folded(key, |folded| {
            !PROTOCOL_KEYS.contains(&folded)
                && (SENSITIVE_ENDINGS.iter().any(|ending| folded.ends_with(ending))
                    || self.extra.iter().any(|extra| extra == folded))
        })
    }

    /// Whether any key of `value`, at any depth, is sensitive, or any of
    /// its strings holds one of the shapes.
    pub fn finds_sensitive(&self, value: &Value) -> bool {
        self.finds_sensitive_key(value) || (!self.shapes.is_empty() && self.shapes.finds_in(value))
    }

    fn finds_sensitive_key(&self, value: &Value) -> bool {
        match value {
            Value::Object(map) => {
                map.iter().any(|(key, inner)| self.is_sensitive(key) || self.finds_sensitive_key(inner))
            }
            Value::Array(items) => items.iter().any(|item| self.finds_sensitive_key(item)),
            _ => false,
        }
    }

    /// The text values under sensitive keys, at any depth, whatever their
    /// length: what [`Redactor::redact`] blanks in a request, and what must
    /// not come back verbatim in its answer either ([`Scrubber::new`] finds
    /// the long ones anywhere, the short ones as whole tokens).
    pub fn sensitive_values(&self, value: &Value) -> Vec<String> {
        let mut found = Vec::new();
        self.collect_sensitive(value, false, &mut found);
        found.retain(|s| !s.is_empty());
        found
    }

    fn collect_sensitive(&self, value: &Value, under_sensitive: bool, found: &mut Vec<String>) {
        match value {
            Value::String(text) if under_sensitive => found.push(text.clone()),
            Value::Object(map) => {
                for (key, inner) in map {
                    self.collect_sensitive(inner, under_sensitive || self.is_sensitive(key), found);
                }
            }
            Value::Array(items) => {
                items.iter().for_each(|item| self.collect_sensitive(item, under_sensitive, found))
            }
            _ => {}
        }
    }

    /// Replaces, at any depth, every value under a sensitive key, and text
    /// of the shapes anywhere.
    pub fn redact(&self, value: &mut Value) {
        self.blank_sensitive_keys(value);
        if !self.shapes.is_empty() {
            self.shapes.scrub(value, REDACTED);
        }
    }

    /// Replaces text of the shapes in `text`, which has no keys to blank.
    pub fn redact_text(&self, text: &mut String) {
        self.shapes.scrub_text(text, REDACTED);
    }

    fn blank_sensitive_keys(&self, value: &mut Value) {
        match value {
            Value::Object(map) => {
                for (key, inner) in map.iter_mut() {
                    if self.is_sensitive(key) {
                        *inner = Value::String(REDACTED.into());
                    } else {
                        self.blank_sensitive_keys(inner);
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|item| self.blank_sensitive_keys(item)),
            _ => {}
        }
    }
}

/// Scrubbing as [`Scrubber::scrub`] does it: every string and key.
impl Edit for Scrubber {
    fn string(&self, text: &str, _key: bool) -> Option<String> {
        self.clean(text)
    }

    fn blank(&self, _key: &str) -> Option<&str> {
        None
    }
}

/// Redaction as [`Redactor::redact`] does it: the value of a sensitive key
/// blanked, the shapes replaced in every other string value.
impl Edit for Redactor {
    fn string(&self, text: &str, key: bool) -> Option<String> {
        if key || self.shapes.is_empty() {
            return None;
        }
        let mut scrubbed = text.to_owned();
        self.shapes.scrub_text(&mut scrubbed, REDACTED);
        (scrubbed != text).then_some(scrubbed)
    }

    fn blank(&self, key: &str) -> Option<&str> {
        self.is_sensitive(key).then_some(REDACTED)
    }
}

/// Request headers whose values are credentials, besides `Authorization`
/// and names ending like one ([`is_credential_header`]).
const CREDENTIAL_HEADERS: [&str; 4] =
    ["x-api-key", "api-key", "x-functions-key", "ocp-apim-subscription-key"];

/// Whether a (lowercase) request header name carries a credential.
fn is_credential_header(name: &str) -> bool {
    CREDENTIAL_HEADERS.contains(&name)
        || ["-api-key", "-subscription-key", "-token", "-secret"].iter().any(|ending| name.ends_with(ending))
}

/// The credential values in request headers, as (name, value) pairs: the
/// `Authorization` credentials (also without their scheme), API key headers,
/// those named in `extra` (`--redact-header`, any case), and each cookie's
/// value. Values too short to scrub safely are left out.
pub fn header_secrets<'a>(
    headers: impl IntoIterator<Item = (&'a str, &'a str)>,
    extra: &[String],
) -> Vec<String> {
    let mut secrets = Vec::new();
    for (name, value) in headers {
        let name = name.to_ascii_lowercase();
        let value = value.trim();
        if extra.iter().any(|named| named.eq_ignore_ascii_case(&name)) {
            secrets.push(value.to_owned());
        } else if name == "authorization" || name == "proxy-authorization" {
            secrets.push(value.to_owned());
            if let Some((_, credentials)) = value.split_once(' ') {
                secrets.push(credentials.trim().to_owned());
            }
        } else if is_credential_header(&name) {
            secrets.push(value.to_owned());
        } else if name == "cookie" {
            secrets
                .extend(value.split(';').filter_map(|c| c.split_once('=')).map(|(_, v)| v.trim().to_owned()));
        }
    }
    secrets.retain(|s| s.chars().count() >= MIN_SCRUBBED_SECRET_CHARS);
    // Longest first, so a value containing a shorter secret goes whole.
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    secrets.dedup();
    secrets
}

/// The values of environment variables whose names look like credentials
/// (holding `TOKEN`, `SECRET`, `KEY` or `PASSWORD`, in any case): what a
/// stdio server is given to reach its own upstream, scrubbed like a bearer
/// token. Values too short to scrub safely are left out.
pub fn env_secrets(vars: impl IntoIterator<Item = (String, String)>) -> Vec<String> {
    const MARKS: [&str; 4] = ["TOKEN", "SECRET", "KEY", "PASSWORD"];
    let mut secrets: Vec<String> = vars
        .into_iter()
        .filter(|(name, _)| {
            let name = name.to_ascii_uppercase();
            MARKS.iter().any(|mark| name.contains(mark))
        })
        .map(|(_, value)| value.trim().to_owned())
        .filter(|value| value.chars().count() >= MIN_SCRUBBED_SECRET_CHARS)
        .collect();
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    secrets.dedup();
    secrets
}

/// Replaces every occurrence of each secret, in any of the forms a server
/// may echo it in (as sent, percent-encoded, in base64; letters of any case), in every string and
/// object key of `value` with `"[REDACTED]"`.
pub fn scrub(value: &mut Value, secrets: &[String]) {
    Scrubber::new(secrets).scrub(value);
}

/// [`scrub`] for one string.
pub fn scrub_str(text: &str, secrets: &[String]) -> String {
    Scrubber::new(secrets).scrub_str(text)
}

/// Scrubs `secrets` from everything of `raw` that is stored: the request,
/// the answer's messages, the asides, and the server's name (a path
/// outside the Agent 365 forms could carry one).
pub fn scrub_exchange(raw: &mut RawExchange, secrets: &[String]) {
    let scrubber = Scrubber::new(secrets);
    scrubber.scrub(&mut raw.request);
    for message in raw.messages.iter_mut().chain(raw.asides.iter_mut().map(|aside| &mut aside.message)) {
        scrubber.scrub_message(message);
    }
    raw.server = scrubber.scrub_str(&raw.server);
}

/// `message` with `edit` done to its tree and, if it is held as its text
/// ([`RecordedMessage::shallow`]), to that text too.
pub fn edit_message(message: &mut RecordedMessage, edit: &impl Edit, on_tree: impl FnOnce(&mut Value)) {
    on_tree(&mut message.body);
    if message.shallow
        && let Some(text) = &mut message.written
        && let Some(edited) = scan::edit(text, edit)
    {
        *text = edited.into();
    }
}

/// Secrets, in every form a server may echo them in, found in one pass over
/// each text whatever their number: an Aho-Corasick automaton, ASCII case
/// ignored, the leftmost and then longest form replaced. Built once for all
/// the strings of an exchange.
pub struct Scrubber {
    finder: Finder,
    /// Credentials shorter than [`MIN_SCRUBBED_SECRET_CHARS`] taken from
    /// a request's credential keys: replaced where they stand as a whole
    /// token (no letter or digit on either side), never inside a word.
    whole: Option<AhoCorasick>,
}

/// How a [`Scrubber`] finds the forms.
enum Finder {
    /// No secrets.
    Nothing,
    Automaton(AhoCorasick),
    /// Form by form ([`clean_plainly`]): only should the automaton be past
    /// its limits, which no request the front doors take reaches.
    Plainly(Vec<String>),
}

impl Scrubber {
    /// Finds `secrets` in every form at least [`MIN_SCRUBBED_SECRET_CHARS`]
    /// long, anywhere; a secret shorter than that, as sent, only where it
    /// stands as a whole token.
    pub fn new(secrets: &[String]) -> Scrubber {
        let short: Vec<&String> = secrets
            .iter()
            .filter(|s| s.chars().count() < MIN_SCRUBBED_SECRET_CHARS && !s.is_empty())
            .collect();
        let whole = (!short.is_empty())
            .then(|| AhoCorasick::builder().match_kind(MatchKind::LeftmostLongest).build(&short).ok())
            .flatten();
        Scrubber { finder: Finder::of(secrets), whole }
    }

    /// Every string and object key of `value`, scrubbed.
    pub fn scrub(&self, value: &mut Value) {
        if matches!(self.finder, Finder::Nothing) && self.whole.is_none() {
            return;
        }
        match value {
            Value::String(text) => {
                if let Some(cleaned) = self.clean(text) {
                    *text = cleaned;
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|item| self.scrub(item)),
            Value::Object(map) => {
                let entries = std::mem::take(map);
                for (key, mut inner) in entries {
                    self.scrub(&mut inner);
                    map.insert(self.clean(&key).unwrap_or(key), inner);
                }
            }
            _ => {}
        }
    }

    /// `message` scrubbed, its text too when it is held as its text.
    pub fn scrub_message(&self, message: &mut RecordedMessage) {
        if matches!(self.finder, Finder::Nothing) && self.whole.is_none() {
            return;
        }
        edit_message(message, self, |body| self.scrub(body));
    }

    /// `text`, scrubbed.
    pub fn scrub_str(&self, text: &str) -> String {
        self.clean(text).unwrap_or_else(|| text.to_owned())
    }

    /// `text` with each form, and each short secret standing as a whole
    /// token, replaced; `None` if none occurs.
    fn clean(&self, text: &str) -> Option<String> {
        let found = self.finder.clean(text);
        let Some(whole) = &self.whole else { return found };
        let current = found.as_deref().unwrap_or(text);
        let alone = |at: usize, end: usize| {
            let before = current[..at].chars().next_back();
            let after = current[end..].chars().next();
            !before.is_some_and(char::is_alphanumeric) && !after.is_some_and(char::is_alphanumeric)
        };
        let mut hits = whole.find_iter(current).filter(|hit| alone(hit.start(), hit.end())).peekable();
        if hits.peek().is_none() {
            return found;
        }
        let mut cleaned = String::with_capacity(current.len());
        let mut last = 0;
        for hit in hits {
            cleaned.push_str(&current[last..hit.start()]);
            cleaned.push_str(REDACTED);
            last = hit.end();
        }
        cleaned.push_str(&current[last..]);
        Some(cleaned)
    }
}

impl Finder {
    fn of(secrets: &[String]) -> Finder {
        let forms = forms(secrets);
        if forms.is_empty() {
            return Finder::Nothing;
        }
        let built = AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::LeftmostLongest)
            .build(&forms);
        match built {
            Ok(automaton) => Finder::Automaton(automaton),
            Err(e) => {
                tracing::warn!("scrubbing {} secret forms one by one: {e}", forms.len());
                Finder::Plainly(forms)
            }
        }
    }

    /// `text` with each form replaced; `None` if none occurs.
    fn clean(&self, text: &str) -> Option<String> {
        let automaton = match self {
            Finder::Nothing => return None,
            Finder::Plainly(forms) => return clean_plainly(text, forms),
            Finder::Automaton(automaton) => automaton,
        };
        if !automaton.is_match(text) {
            return None;
        }
        let mut cleaned = String::with_capacity(text.len());
        automaton.replace_all_with(text, &mut cleaned, |_, _, out| {
            out.push_str(REDACTED);
            true
        });
        Some(cleaned)
    }
}

/// Each secret as sent, percent-encoded (`%20` and `+` for spaces) and in
/// base64 (standard with and without padding, URL-safe): the forms an
/// upstream echoes a credential in. Longest first, so that a form holding a
/// shorter one goes whole.
fn forms(secrets: &[String]) -> Vec<String> {
    use base64::Engine;
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE_NO_PAD};
    let mut forms = Vec::new();
    for secret in secrets {
        let encoded = percent_encoded(secret);
        forms.push(encoded.replace("%20", "+"));
        forms.push(encoded);
        for engine in [&STANDARD, &STANDARD_NO_PAD, &URL_SAFE_NO_PAD] {
            forms.push(engine.encode(secret));
        }
        forms.push(secret.clone());
    }
    forms.retain(|f| f.chars().count() >= MIN_SCRUBBED_SECRET_CHARS);
    forms.sort_by_key(|f| std::cmp::Reverse(f.len()));
    forms.dedup();
    forms
}

/// `text` with every byte outside the URL's unreserved characters as `%XX`.
fn percent_encoded(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// `text` with each form replaced in turn, longest first, ignoring ASCII
/// case; `None` if none occurs: the plain path, which the automaton is
/// checked against.
fn clean_plainly(text: &str, forms: &[String]) -> Option<String> {
    let mut cleaned: Option<String> = None;
    for form in forms {
        let current = cleaned.as_deref().unwrap_or(text);
        // ASCII lowering keeps every byte where it was, so offsets carry over.
        let haystack = current.to_ascii_lowercase();
        let needle = form.to_ascii_lowercase();
        if !haystack.contains(&needle) {
            continue;
        }
        let mut out = String::with_capacity(current.len());
        let mut last = 0;
        for (at, _) in haystack.match_indices(&needle) {
            out.push_str(&current[last..at]);
            out.push_str(REDACTED);
            last = at + needle.len();
        }
        out.push_str(&current[last..]);
        cleaned = Some(out);
    }
    cleaned
}

fn fold(key: &str) -> String {
    key.chars().filter(char::is_ascii_alphanumeric).map(|c| c.to_ascii_lowercase()).collect()
}

/// `check` of [`fold`]`(key)`, folded on the stack when it is short (every
/// key of every request is checked: no allocation for the usual ones).
fn with_folded<R>(key: &str, check: impl FnOnce(&str) -> R) -> R {
    let mut buffer = [0u8; 64];
    let mut len = 0;
    for byte in key.bytes().filter(u8::is_ascii_alphanumeric) {
        let Some(slot) = buffer.get_mut(len) else {
            return check(&fold(key));
        };
        *slot = byte.to_ascii_lowercase();
        len += 1;
    }
    // ASCII letters and digits only, so always UTF-8.
    check(std::str::from_utf8(&buffer[..len]).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_credential_name_is_judged_decoded_and_its_value_kept_both_ways() {
        let (kept, secrets) =
            query_without_credentials("api%5Fkey=sk%2Dproj%2D0123456789&x=1&Token=T0k3n%2B99");
        assert_eq!(kept, "x=1");
        assert_eq!(secrets, ["sk%2Dproj%2D0123456789", "sk-proj-0123456789", "T0k3n%2B99", "T0k3n+99"]);
        let (kept, _) = query_without_credentials("a%70i_key=sk-proj-0123456789&api+version=2");
        assert_eq!(kept, "api+version=2", "a name with an escaped letter is still api_key");
    }

    #[test]
    fn a_url_is_shown_without_its_credentials() {
        let shown = url_for_log("http://ada:hunter2@mcp.example:8443/base?api_key=K1&x=1&sig=S2&Token=T3#f");
        assert_eq!(shown, "http://ada:***@mcp.example:8443/base?api_key=***&x=1&sig=***&Token=***#f");
        assert_eq!(
            url_for_log("https://tok3n@h/mcp"),
            "https://***@h/mcp",
            "a user part alone may be a token"
        );
        assert_eq!(url_for_log("http://h/v1?api%5Fkey=K1&x=1"), "http://h/v1?api%5Fkey=***&x=1");
        assert_eq!(url_for_log("http://127.0.0.1:8000/mcp"), "http://127.0.0.1:8000/mcp");
        assert_eq!(url_for_log("stdio:python server.py"), "stdio:python server.py");
    }

    /// Keys are folded on the stack up to 64 letters and digits, in a
    /// String past that: both give the same verdicts.
    #[test]
    fn long_and_non_ascii_keys_are_judged_like_short_ones() {
        let redactor = Redactor::new(&["ssn".into()], Shapes::default());
        let long = "a".repeat(100);
        assert!(redactor.is_sensitive(&format!("{long}_Token")));
        assert!(!redactor.is_sensitive(&format!("{long}_name")));
        assert!(redactor.is_sensitive("Größe-Password") && redactor.is_sensitive("S.S.N"));
        let at_bound = format!("{}apikey", "x".repeat(58));
        let past_bound = format!("{}apikey", "x".repeat(59));
        assert!(redactor.is_sensitive(&at_bound) && redactor.is_sensitive(&past_bound));
        assert!(!redactor.is_sensitive(&"x".repeat(64)) && !redactor.is_sensitive(&"x".repeat(65)));
    }

    #[test]
    fn redacts_credentials_at_any_depth_and_keeps_protocol_fields() {
        let redactor = Redactor::new(&["ssn".into()], Shapes::default());
        let mut value = json!({
            "arguments": {"api_key": "k", "nested": [{"Password": "p", "SSN": "1"}], "maxTokens": 5},
            "_meta": {"progressToken": 3},
            "refresh-token": {"deep": "x"},
        });
        assert!(redactor.finds_sensitive(&value));
        assert!(!redactor.finds_sensitive(&json!({"a": [{"b": 1}], "_meta": {"progressToken": 1}})));
        redactor.redact(&mut value);
        assert_eq!(
            value,
            json!({
                "arguments": {"api_key": REDACTED, "nested": [{"Password": REDACTED, "SSN": REDACTED}], "maxTokens": 5},
                "_meta": {"progressToken": 3},
                "refresh-token": REDACTED,
            })
        );
    }

    #[test]
    fn credential_like_environment_variables() {
        let vars = [
            ("GITHUB_TOKEN", "ghp_abcdefghijklmnop"),
            ("azure_client_secret", "s3cr3t-value-long"),
            ("OPENAI_API_KEY", "sk-1234567890"),
            ("DB_PASSWORD", "correct horse"),
            ("KEYBOARD", "us"),
            ("HOME", "/home/someone/long/path"),
        ]
        .map(|(n, v)| (n.to_owned(), v.to_owned()));
        let found = env_secrets(vars);
        assert_eq!(found, ["ghp_abcdefghijklmnop", "s3cr3t-value-long", "sk-1234567890", "correct horse"]);
    }

    #[test]
    fn named_headers_are_credentials_too() {
        let forwarded = ("X-Forwarded-Auth", "forwarded-credential-1");
        assert!(header_secrets([forwarded], &[]).is_empty(), "not a credential by its name");
        assert_eq!(header_secrets([forwarded], &["x-forwarded-auth".into()]), ["forwarded-credential-1"]);
    }

    #[test]
    fn header_secrets_and_scrubbing() {
        let token = "eyJhbGciOiJSUzI1NiJ9.payload.signature";
        let bearer = format!("Bearer {token}");
        let secrets = header_secrets(
            [
                ("Authorization", bearer.as_str()),
                ("Cookie", "session=0123456789abcdef; theme=dark"),
                ("X-Api-Key", "short"),
                ("Accept", "application/json"),
            ],
            &[],
        );
        assert_eq!(secrets, [bearer.clone(), token.to_owned(), "0123456789abcdef".to_owned()]);
        let mut value = json!({
            "content": [{"type": "text", "text": format!("you sent {bearer} and {token}")}],
            token: {"cookie-copy": "0123456789abcdef!"},
        });
        scrub(&mut value, &secrets);
        let text = value.to_string();
        assert!(!text.contains("payload.signature") && !text.contains("0123456789abcdef"), "{text}");
        assert_eq!(value["content"][0]["text"], "you sent [REDACTED] and [REDACTED]");
        assert_eq!(value["[REDACTED]"]["cookie-copy"], "[REDACTED]!");
    }

    /// An echoed credential once survived in other forms: URL-encoded,
    /// base64, upper-cased; `Ocp-Apim-Subscription-Key` was not a credential.
    #[test]
    fn secrets_are_scrubbed_in_every_echoed_form() {
        use base64::Engine;
        let token = "eyJhbGciOiJSUzI1NiJ9.pay/load+sig=";
        let bearer = format!("Bearer {token}");
        let secrets = header_secrets(
            [("Authorization", bearer.as_str()), ("Ocp-Apim-Subscription-Key", "0a1b2c3d4e5f6a7b")],
            &[],
        );
        assert!(secrets.contains(&"0a1b2c3d4e5f6a7b".to_owned()), "{secrets:?}");
        let echoes = [
            token.to_uppercase(),
            percent_encoded(token),
            percent_encoded(&bearer).replace("%20", "+"),
            base64::engine::general_purpose::STANDARD.encode(token),
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&bearer),
            "0A1B2C3D4E5F6A7B".to_owned(),
        ];
        for echo in echoes {
            let mut value = json!({"text": format!("seen: {echo} (end)")});
            scrub(&mut value, &secrets);
            assert_eq!(value["text"], "seen: [REDACTED] (end)", "{echo}");
        }
        assert_eq!(scrub_str(&format!("/v1/{token}/mcp"), &secrets), "/v1/[REDACTED]/mcp");
    }

    #[test]
    fn values_under_sensitive_keys_are_found_for_scrubbing_answers() {
        let redactor = Redactor::default();
        let request = json!({"params": {"arguments": {"apiKey": "k-0123456789", "city": "Paris", "auth": {"token": "t-9876543210"}}}});
        assert_eq!(redactor.sensitive_values(&request), ["k-0123456789", "t-9876543210"]);
    }

    #[test]
    fn user_keys_match_whole_keys_only() {
        let redactor = Redactor::new(&["name".into()], Shapes::default());
        assert!(redactor.is_sensitive("Name"));
        assert!(!redactor.is_sensitive("displayName"));
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    /// The forms a server may echo a credential in (finding 8 of the adversarial run).
    fn echoed(secret: &str, form: usize) -> String {
        use base64::Engine;
        use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE_NO_PAD};
        match form {
            0 => secret.to_owned(),
            1 => percent_encoded(secret),
            2 => percent_encoded(secret).replace("%20", "+"),
            3 => STANDARD.encode(secret),
            4 => STANDARD_NO_PAD.encode(secret),
            5 => URL_SAFE_NO_PAD.encode(secret),
            6 => secret.to_ascii_uppercase(),
            _ => secret.to_ascii_lowercase(),
        }
    }

    proptest! {
        #[test]
        fn the_automaton_scrubs_as_the_plain_path_does(
            secrets in proptest::collection::vec("[A-Za-z0-9._~+/=: -]{8,24}", 1..4),
            one in proptest::bool::ANY,
            echoes in proptest::collection::vec((0usize..4, 0usize..8), 0..4),
            filler in proptest::collection::vec("[a-z {}\"]{0,8}", 5),
        ) {
            let secrets = if one { secrets[..1].to_vec() } else { secrets };
            let mut text = filler[0].clone();
            for (i, (which, form)) in echoes.iter().enumerate() {
                text.push_str(&echoed(&secrets[which % secrets.len()], *form));
                text.push_str(&filler[(i + 1) % filler.len()]);
            }
            let (scrubber, forms) = (Scrubber::new(&secrets), forms(&secrets));
            let (fast, plain) = (scrubber.clean(&text), clean_plainly(&text, &forms));
            // Overlapping secrets may be cut at other places; what is found, and that nothing is
            // left, are the same. One secret's forms come out the same.
            prop_assert_eq!(fast.is_some(), plain.is_some(), "{}", text);
            let left = fast.clone().unwrap_or_else(|| text.clone()).to_ascii_lowercase();
            prop_assert!(forms.iter().all(|f| !left.contains(&f.to_ascii_lowercase())), "{} left in {}", text, left);
            if secrets.iter().all(|secret| secret == &secrets[0]) {
                prop_assert_eq!(fast, plain, "{}", text);
            }
        }

        #[test]
        fn a_secret_survives_no_encoding_anywhere_in_a_value(
            // Token alphabets (JWT, base64, API keys with separators and spaces); no '[' or ']',
            // which could make the secret again out of the "[REDACTED]" put in its place.
            secret in "[A-Za-z0-9._~+/=: -]{8,40}",
            form in 0usize..8,
            before in "[a-z {}\"]{0,10}",
            after in "[a-z {}\"]{0,10}",
        ) {
            prop_assume!(secret.trim().chars().count() >= MIN_SCRUBBED_SECRET_CHARS);
            let secret = secret.trim().to_owned();
            let echo = echoed(&secret, form);
            let text = format!("{before}{echo}{after}");
            let mut value = serde_json::json!({"result": {"content": [{"type": "text", "text": text}]},
                text.clone(): [text.clone(), {"nested": text}]});
            scrub(&mut value, std::slice::from_ref(&secret));
            let stored = value.to_string().to_ascii_lowercase();
            prop_assert!(!stored.contains(&echo.to_ascii_lowercase()), "{echo} survived in {stored}");
        }
    }
}
