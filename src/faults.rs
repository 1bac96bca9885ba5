//! Fault rules: the `[[fault]]` tables of the rules file (`mcp-tape.toml`,
//! beside the `[[match]]` tables), `--fault SPEC` on the command line, and
//! the faults Agent 365 mock files carry (`errorRate`); read and checked
//! once at start. A rule names which requests it is about (server, and a
//! tool, prompt, resource URI or method, all globs, as a match rule does),
//! when it fires among them, and what happens then. Keeping count of the
//! calls and enacting what fires is the engine's (`engine::inject`) and the
//! front doors'.
//!
//! When, counted over the requests a rule is about, from 1, in the order
//! they reach mcp-tape: `nth = [2, 5]` (those calls), `every = 3` (the 3rd,
//! 6th, ...), `after = 10` (the 11th and every one after), `once` (the
//! first), `rate = 0.2` with `seed` (see [`draw`]), or, with none of these,
//! every call. What: `error` (a JSON-RPC error), `tool_error` (a tool
//! result with `isError`), `http` (a status, with `retry_after`), `hang`
//! (no answer), `cut_stream_after` (the answer's stream closed after that
//! many events, before its final answer), `lose_session` (the session is
//! forgotten: 404 from then on), and `delay_ms`, alone (the usual answer,
//! later) or before any of the others.

use std::ops::Range;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;
use sha2::{Digest, Sha256};
use toml::Spanned;

use crate::error::Error;
use crate::jsonrpc::{ErrorCode, ErrorObject};
use crate::matching::{self, BadRule, MatchRules, Selector};
use crate::pseudonym;

/// The JSON-RPC error the Agent 365 mock tooling server answers a call its
/// `errorRate` fails with (the code is its own, outside JSON-RPC's ranges).
pub const MOCK_ERROR_CODE: i32 = 500;

/// The fault rules of a run, in order: the rules file's, then `--fault`'s,
/// then the cassettes'.
#[derive(Clone, Debug, Default)]
pub struct FaultRules {
    rules: Vec<FaultRule>,
}

/// One fault rule.
#[derive(Clone, Debug)]
pub struct FaultRule {
    /// Where it was written, for logs and reports: `FILE:LINE`, `--fault
    /// N`, or the cassette and tool it came from.
    pub place: String,
    selector: Selector,
    pub when: When,
    pub action: Action,
}

/// Which of the calls a rule is about it fires on; `n` counts them from 1.
#[derive(Clone, Debug, PartialEq)]
pub enum When {
    /// Every call.
    Always,
    /// These calls.
    Nth(Vec<u64>),
    /// Every `n`-th call.
    Every(u64),
    /// Every call after the first `n`.
    After(u64),
    /// The first call.
    Once,
    /// The calls whose [`draw`] with `seed` falls under `rate`.
    Rate { rate: f64, seed: u64 },
}

/// What a fired rule does: wait, then do one thing (or, with none, answer
/// as usual).
#[derive(Clone, Debug, PartialEq)]
pub struct Action {
    pub delay: Option<Duration>,
    pub effect: Option<Effect>,
}

/// What a fault does to a call instead of its usual answer.
#[derive(Clone, Debug, PartialEq)]
pub enum Effect {
    /// A JSON-RPC error answer.
    Error(ErrorObject),
    /// A `tools/call` result with `isError: true` and this text.
    ToolError(String),
    /// This HTTP status, with `Retry-After` seconds when given.
    Http { status: u16, retry_after: Option<u64> },
    /// No answer at all, until the client gives up.
    Hang,
    /// The answer's stream ends after this many of its messages, never
    /// with its final answer.
    CutStreamAfter(usize),
    /// The session is forgotten: this call and every later one on it get
    /// the handshake era's answer for a dead session (404).
    LoseSession,
}

impl Effect {
    /// How the effect is told in logs and reports.
    pub fn describe(&self) -> String {
        match self {
            Effect::Error(error) => format!("error {}", error.code.0),
            Effect::ToolError(_) => "tool_error".into(),
            Effect::Http { status, .. } => format!("http {status}"),
            Effect::Hang => "hang".into(),
            Effect::CutStreamAfter(n) => format!("cut_stream_after {n}"),
            Effect::LoseSession => "lose_session".into(),
        }
    }

    /// Whether a front door without HTTP (stdio) can enact it.
    pub fn needs_http(&self) -> bool {
        matches!(self, Effect::Http { .. } | Effect::LoseSession)
    }
}

impl When {
    /// Whether the `n`-th call (from 1) a rule is about fires it.
    pub fn fires(&self, n: u64) -> bool {
        match self {
            When::Always => true,
            When::Nth(calls) => calls.contains(&n),
            When::Every(every) => n.is_multiple_of(*every),
            When::After(after) => n > *after,
            When::Once => n == 1,
            When::Rate { rate, seed } => draw(*seed, n) < *rate,
        }
    }
}

/// The draw for the `n`-th call (from 1) of a rule with `seed`: the first 8
/// bytes of SHA-256 over `seed` and `n` (each 8 bytes, big-endian), read as
/// a big-endian integer and divided by 2^64, so in [0, 1). It depends on
/// nothing else: the same seed fails the same calls in every run whose
/// requests come in the same order.
pub fn draw(seed: u64, n: u64) -> f64 {
    let mut hash = Sha256::new();
    hash.update(seed.to_be_bytes());
    hash.update(n.to_be_bytes());
    let digest = hash.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(first) as f64 / 18_446_744_073_709_551_616.0
}

/// A `[[fault]]` table (or `--fault` spec) as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFault {
    server: Option<Spanned<String>>,
    method: Option<Spanned<String>>,
    tool: Option<Spanned<String>>,
    prompt: Option<Spanned<String>>,
    uri: Option<Spanned<String>>,
    nth: Option<Spanned<Calls>>,
    every: Option<Spanned<u64>>,
    after: Option<Spanned<u64>>,
    once: Option<Spanned<bool>>,
    rate: Option<Spanned<f64>>,
    seed: Option<Spanned<u64>>,
    error: Option<Spanned<RawError>>,
    tool_error: Option<Spanned<String>>,
    http: Option<Spanned<u16>>,
    retry_after: Option<Spanned<u64>>,
    delay_ms: Option<Spanned<u64>>,
    hang: Option<Spanned<bool>>,
    cut_stream_after: Option<Spanned<u64>>,
    lose_session: Option<Spanned<bool>>,
}

/// `nth`: one call or a list.
#[derive(Deserialize)]
#[serde(untagged)]
enum Calls {
    One(u64),
    Many(Vec<u64>),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawError {
    code: i64,
    message: String,
    data: Option<toml::Value>,
}

/// A rules file as written: its `[[match]]` and `[[fault]]` tables, and
/// its `[pseudonymize]` table.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(rename = "match", default)]
    matches: Vec<Spanned<matching::RawRule>>,
    #[serde(rename = "fault", default)]
    faults: Vec<Spanned<RawFault>>,
    pseudonymize: Option<RawPseudonymize>,
}

/// The `[pseudonymize]` table as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPseudonymize {
    #[serde(default)]
    fields: Vec<String>,
    #[serde(default)]
    terms: Vec<String>,
    key_env: Option<String>,
}

/// What a rules file holds.
pub struct RulesFile {
    pub matches: MatchRules,
    pub faults: FaultRules,
    /// Its `[pseudonymize]` table: what is recorded is pseudonymized.
    pub pseudonymize: Option<pseudonym::Settings>,
}

/// The match and fault rules and the `[pseudonymize]` table of the rules
/// file `text` (the contents of `file`), parsed once.
///
/// # Errors
///
/// [`Error::Rules`] naming the line and what is wrong there.
pub fn parse_rules_file(file: &Path, text: &str) -> Result<RulesFile, Error> {
    let lines = matching::LineStarts::of(text);
    let raw: RawFile = toml::from_str(text).map_err(|e| lines.refuse(file, e.span(), e.message()))?;
    let matches = MatchRules::from_tables(file, &lines, raw.matches)?;
    let pseudonymize = raw.pseudonymize.map(|table| pseudonym::Settings {
        fields: table.fields,
        terms: table.terms.into_iter().filter(|term| !term.trim().is_empty()).collect(),
        key_env: table.key_env,
    });
    Ok(RulesFile { matches, faults: FaultRules::from_tables(file, &lines, raw.faults)?, pseudonymize })
}

/// One `--fault` spec as TOML: the table's keys inside `fault = { ... }`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSpec {
    fault: RawFault,
}

impl FaultRules {
    fn from_tables(
        file: &Path,
        lines: &matching::LineStarts,
        tables: Vec<Spanned<RawFault>>,
    ) -> Result<FaultRules, Error> {
        let mut rules = Vec::with_capacity(tables.len());
        for table in tables {
            let span = table.span();
            let place = format!("{}:{}", file.display(), lines.line_of(span.start));
            let rule = FaultRule::from_raw(place, table.into_inner())
                .map_err(|(at, reason)| lines.refuse(file, at.or(Some(span.clone())), &reason))?;
            rules.push(rule);
        }
        Ok(FaultRules { rules })
    }

    /// Adds the rule `spec` (the keys of a `[[fault]]` table as a TOML
    /// inline table's, e.g. `tool = "Send", nth = [2], http = 429`), the
    /// `number`-th `--fault`.
    ///
    /// # Errors
    ///
    /// [`Error::Usage`] naming the spec and what is wrong with it.
    pub fn add_spec(&mut self, number: usize, spec: &str) -> Result<(), Error> {
        let refuse = |reason: &str| Error::Usage(format!("--fault {spec:?}: {}", reason.trim()));
        let raw: RawSpec =
            toml::from_str(&format!("fault = {{ {spec} }}")).map_err(|e| refuse(e.message()))?;
        let rule =
            FaultRule::from_raw(format!("--fault {number}"), raw.fault).map_err(|(_, why)| refuse(&why))?;
        self.rules.push(rule);
        Ok(())
    }

    /// Leaves out the rules `keep` refuses.
    pub fn retain(&mut self, keep: impl FnMut(&FaultRule) -> bool) {
        self.rules.retain(keep);
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    pub fn rules(&self) -> &[FaultRule] {
        &self.rules
    }
}

/// More rules, after the others (the cassettes' after the file's).
impl Extend<FaultRule> for FaultRules {
    fn extend<I: IntoIterator<Item = FaultRule>>(&mut self, rules: I) {
        self.rules.extend(rules);
    }
}

impl FaultRule {
    /// The rule an Agent 365 mock's `errorRate` (with its `statusCode`,
    /// when that is not a success) stands for: the mock server's failure
    /// for `tool` on `server`, drawn with `seed`.
    pub fn from_mock(
        place: String,
        server: &str,
        tool: &str,
        rate: f64,
        seed: u64,
        status: Option<u16>,
    ) -> FaultRule {
        let effect = match status.filter(|status| !(200..300).contains(status)) {
            Some(status) => Effect::Http { status, retry_after: None },
            None => Effect::Error(ErrorObject::new(
                ErrorCode(MOCK_ERROR_CODE),
                format!("Simulated error for mock tool '{tool}'"),
            )),
        };
        FaultRule {
            place,
            selector: Selector::tool(server, tool),
            when: When::Rate { rate, seed },
            action: Action { delay: None, effect: Some(effect) },
        }
    }

    fn from_raw(place: String, raw: RawFault) -> Result<FaultRule, BadRule> {
        let selector = Selector::new([&raw.server, &raw.method, &raw.tool, &raw.prompt, &raw.uri])?;
        let when = when(&raw)?;
        let effect = effect(&raw)?;
        if let Some(retry) = &raw.retry_after
            && !matches!(effect, Some(Effect::Http { .. }))
        {
            return Err((Some(retry.span()), "retry_after goes with http = STATUS".into()));
        }
        if let (Some(Effect::ToolError(_)), Some(text)) = (&effect, &raw.tool_error)
            && !selector.is_only("tools/call")
        {
            return Err((
                Some(text.span()),
                "tool_error answers tools/call: name a tool (tool = \"*\" for every tool)".into(),
            ));
        }
        let delay = raw.delay_ms.map(|ms| Duration::from_millis(ms.into_inner()));
        if delay.is_none() && effect.is_none() {
            return Err((
                None,
                "say what the fault does: error, tool_error, http, delay_ms, hang, cut_stream_after or \
                 lose_session"
                    .into(),
            ));
        }
        Ok(FaultRule { place, selector, when, action: Action { delay, effect } })
    }

    /// Whether the rule is about a request of `method` to `server` naming
    /// `name` (`""` for none).
    pub fn selects(&self, server: &str, method: &str, name: &str) -> bool {
        self.selector.selects(server, method, name)
    }

    /// How the rule is told in reports: `PLACE (what)`.
    pub fn label(&self) -> String {
        let what = match (&self.action.effect, self.action.delay) {
            (Some(effect), None) => effect.describe(),
            (Some(effect), Some(delay)) => {
                format!("delay_ms {} then {}", delay.as_millis(), effect.describe())
            }
            (None, delay) => format!("delay_ms {}", delay.unwrap_or_default().as_millis()),
        };
        format!("{} ({what})", self.place)
    }
}

/// The one `when` key of a table, if any.
fn when(raw: &RawFault) -> Result<When, BadRule> {
    let mut chosen: Vec<(&str, Range<usize>, When)> = Vec::new();
    if let Some(nth) = &raw.nth {
        let calls = match nth.get_ref() {
            Calls::One(n) => vec![*n],
            Calls::Many(calls) => calls.clone(),
        };
        if calls.is_empty() || calls.contains(&0) {
            return Err((
                Some(nth.span()),
                "nth counts calls from 1: name at least one, e.g. nth = [2]".into(),
            ));
        }
        chosen.push(("nth", nth.span(), When::Nth(calls)));
    }
    if let Some(every) = &raw.every {
        if *every.get_ref() == 0 {
            return Err((Some(every.span()), "every must be 1 or more".into()));
        }
        chosen.push(("every", every.span(), When::Every(*every.get_ref())));
    }
    if let Some(after) = &raw.after {
        chosen.push(("after", after.span(), When::After(*after.get_ref())));
    }
    if let Some(once) = &raw.once {
        if !once.get_ref() {
            return Err((Some(once.span()), "once = false means nothing: leave it out".into()));
        }
        chosen.push(("once", once.span(), When::Once));
    }
    match (&raw.rate, &raw.seed) {
        (Some(rate), seed) => {
            let value = *rate.get_ref();
            if !(0.0..=1.0).contains(&value) {
                return Err((Some(rate.span()), format!("rate {value}: a share of calls, from 0 to 1")));
            }
            let seed = seed.as_ref().map_or(0, |seed| *seed.get_ref());
            chosen.push(("rate", rate.span(), When::Rate { rate: value, seed }));
        }
        (None, Some(seed)) => return Err((Some(seed.span()), "seed goes with rate".into())),
        (None, None) => {}
    }
    Ok(at_most_one(chosen, "a fault fires by one of nth, every, after, once and rate")?
        .unwrap_or(When::Always))
}

/// The one effect key of a table, if any (`delay_ms` goes with any).
fn effect(raw: &RawFault) -> Result<Option<Effect>, BadRule> {
    let mut chosen: Vec<(&str, Range<usize>, Effect)> = Vec::new();
    if let Some(error) = &raw.error {
        let RawError { code, message, data } = error.get_ref();
        let code = i32::try_from(*code)
            .map_err(|_| (Some(error.span()), format!("error code {code}: not a JSON-RPC error code")))?;
        let mut object = ErrorObject::new(ErrorCode(code), message.clone());
        if let Some(data) = data {
            let data = serde_json::to_value(data).unwrap_or(Value::Null);
            object = object.with_data(data);
        }
        chosen.push(("error", error.span(), Effect::Error(object)));
    }
    if let Some(text) = &raw.tool_error {
        chosen.push(("tool_error", text.span(), Effect::ToolError(text.get_ref().clone())));
    }
    if let Some(status) = &raw.http {
        if !(400..=599).contains(status.get_ref()) {
            return Err((
                Some(status.span()),
                format!("http {}: a failure status, from 400 to 599", status.get_ref()),
            ));
        }
        let retry_after = raw.retry_after.as_ref().map(|retry| *retry.get_ref());
        chosen.push(("http", status.span(), Effect::Http { status: *status.get_ref(), retry_after }));
    }
    for (key, flag, effect) in
        [("hang", &raw.hang, Effect::Hang), ("lose_session", &raw.lose_session, Effect::LoseSession)]
    {
        if let Some(flag) = flag {
            if !flag.get_ref() {
                return Err((Some(flag.span()), format!("{key} = false means nothing: leave it out")));
            }
            chosen.push((key, flag.span(), effect));
        }
    }
    if let Some(after) = &raw.cut_stream_after {
        let events = usize::try_from(*after.get_ref()).unwrap_or(usize::MAX);
        chosen.push(("cut_stream_after", after.span(), Effect::CutStreamAfter(events)));
    }
    at_most_one(chosen, "a fault does one thing (besides delay_ms)")
}

/// The one of `chosen` (key, where, value) a table names, if any; two or
/// more are refused at the second in the file, with `rule` and their keys.
fn at_most_one<T>(mut chosen: Vec<(&str, Range<usize>, T)>, rule: &str) -> Result<Option<T>, BadRule> {
    chosen.sort_by_key(|(_, span, _)| span.start);
    if chosen.len() < 2 {
        return Ok(chosen.pop().map(|(_, _, value)| value));
    }
    let keys: Vec<&str> = chosen.iter().map(|(key, _, _)| *key).collect();
    Err((Some(chosen[1].1.clone()), format!("{rule}, not {}", keys.join(" and "))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<FaultRules, String> {
        parse_rules_file(Path::new("mcp-tape.toml"), text).map(|file| file.faults).map_err(|e| e.to_string())
    }

    #[test]
    fn each_when_fires_on_the_calls_it_names() {
        let fired = |when: When| (1..=12).filter(|n| when.fires(*n)).collect::<Vec<u64>>();
        assert_eq!(fired(When::Nth(vec![2, 5])), [2, 5]);
        assert_eq!(fired(When::Every(3)), [3, 6, 9, 12]);
        assert_eq!(fired(When::After(10)), [11, 12]);
        assert_eq!(fired(When::Once), [1]);
        assert_eq!(fired(When::Always).len(), 12);
        assert!(fired(When::Rate { rate: 0.0, seed: 1 }).is_empty());
        assert_eq!(fired(When::Rate { rate: 1.0, seed: 1 }).len(), 12);
    }

    #[test]
    fn a_seeded_rate_draws_the_same_calls_and_about_its_share() {
        let calls =
            |seed| (1..=1000).filter(|n| When::Rate { rate: 0.2, seed }.fires(*n)).collect::<Vec<u64>>();
        assert_eq!(calls(7), calls(7));
        assert_ne!(calls(7), calls(8));
        let share = calls(7).len();
        assert!((150..=250).contains(&share), "{share} of 1000 at rate 0.2");
        assert!((0..10_000).all(|n| (0.0..1.0).contains(&draw(3, n))));
    }

    #[test]
    fn tables_read_with_their_place() {
        let rules = parse(
            "[[match]]\ntool = \"x\"\n\n[[fault]]\nserver = \"mcp_MailTools\"\ntool = \"SendEmail\"\nnth = [2]\nhttp = 429\nretry_after = 1\n\n[[fault]]\nmethod = \"tools/list\"\ndelay_ms = 50\nerror = { code = -32000, message = \"down\" }\n",
        )
        .unwrap();
        let [first, second] = rules.rules() else { panic!("two rules") };
        assert_eq!(first.label(), "mcp-tape.toml:4 (http 429)");
        assert_eq!(first.when, When::Nth(vec![2]));
        assert_eq!(first.action.effect, Some(Effect::Http { status: 429, retry_after: Some(1) }));
        assert!(first.selects("mcp_MailTools", "tools/call", "SendEmail"));
        assert!(!first.selects("mcp_MailTools", "tools/call", "GetEmail"));
        assert_eq!(second.label(), "mcp-tape.toml:11 (delay_ms 50 then error -32000)");
        assert!(second.selects("any", "tools/list", ""));
    }

    #[test]
    fn bad_tables_are_refused_with_line_and_reason() {
        let refused = |text: &str| parse(text).unwrap_err();
        assert_eq!(
            refused("[[fault]]\ntool = \"a\"\nnth = [2]\nevery = 3\nhang = true\n"),
            "mcp-tape.toml:4: a fault fires by one of nth, every, after, once and rate, not nth and every"
        );
        assert_eq!(
            refused("[[fault]]\ntool = \"a\"\nhang = true\nhttp = 503\n"),
            "mcp-tape.toml:4: a fault does one thing (besides delay_ms), not hang and http"
        );
        assert!(refused("[[fault]]\ntool = \"a\"\nhttp = 200\n").starts_with("mcp-tape.toml:3: http 200"));
        assert!(
            refused("[[fault]]\nmethod = \"tools/list\"\ntool_error = \"x\"\n")
                .contains("tool_error answers tools/call")
        );
        assert!(
            refused("[[fault]]\ntool = \"a\"\nrate = 1.5\nhang = true\n")
                .starts_with("mcp-tape.toml:3: rate 1.5")
        );
        assert!(
            refused("[[fault]]\ntool = \"a\"\nnth = [2]\n")
                .starts_with("mcp-tape.toml:1: say what the fault does")
        );
        assert!(
            refused("[[fault]]\ntool = \"a\"\nhang = true\nretry_after = 2\n")
                .contains("retry_after goes with http")
        );
        assert!(
            refused("[[fault]]\ntool = \"a\"\nhang = true\nwhen = 2\n")
                .starts_with("mcp-tape.toml:4: unknown field `when`")
        );
        assert!(refused("[[fault]]\ntool = \"[a\"\nhang = true\n").starts_with("mcp-tape.toml:2: tool"));
    }

    #[test]
    fn a_command_line_spec_is_the_inside_of_a_table() {
        let mut rules = FaultRules::default();
        rules.add_spec(1, "tool = \"SendEmail\", nth = 2, tool_error = \"mailbox full\"").unwrap();
        assert_eq!(rules.rules()[0].label(), "--fault 1 (tool_error)");
        assert_eq!(rules.rules()[0].when, When::Nth(vec![2]));
        let error = rules.add_spec(2, "tool = \"x\", hang = yes").unwrap_err().to_string();
        assert!(error.starts_with("--fault \"tool = \\\"x\\\", hang = yes\": "), "{error}");
    }

    #[test]
    fn a_mock_error_rate_is_the_mock_servers_failure() {
        let rule = FaultRule::from_mock("m".into(), "mcp_Mail", "Send", 0.5, 9, None);
        assert_eq!(rule.when, When::Rate { rate: 0.5, seed: 9 });
        let Some(Effect::Error(error)) = &rule.action.effect else { panic!("an error") };
        assert_eq!((error.code.0, error.message.as_str()), (500, "Simulated error for mock tool 'Send'"));
        let ok = FaultRule::from_mock("m".into(), "mcp_Mail", "Send", 0.5, 9, Some(200));
        assert!(matches!(ok.action.effect, Some(Effect::Error(_))));
        let unavailable = FaultRule::from_mock("m".into(), "mcp_Mail", "Send", 0.5, 9, Some(503));
        assert_eq!(unavailable.action.effect, Some(Effect::Http { status: 503, retry_after: None }));
    }
}
