//! Which recording a match rule picks for a request that no recording
//! matches exactly: an MCP call's, or a request to the agent's model
//! (whatever is [`Filed`]). The index is built once at load: for each
//! rule, the recordings it decides among, grouped by server, method and
//! name (tool, prompt or URI) and by era, each with its params prepared as
//! the rule compares them (and, for `nearest`, indexed by
//! [`super::nearest`]). A request's decision ([`RuleIndex::decide`]: which
//! run of recordings) costs one preparation of its own params and a map
//! lookup (`exact`), nothing (`sequence`), or the nearest index's ranking
//! (`nearest`); it is remembered for params read before
//! ([`RuleIndex::remembered`]). Taking the recording ([`RuleIndex::take`])
//! moves the session's cursors. Rules and their file are
//! [`crate::matching`]'s; cursors belong to the session that asks.

use std::sync::Arc;

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::step::Asked;
use crate::cassette::tape::{ByEra, Cursors, Recorded};
use crate::limits::MAX_RANKED_LEAVES;
use crate::matching::{By, MatchRules};
use crate::mcp;
use crate::model::{Era, MatchKey, canonical_json};
use crate::normalize::{self, Difference, Rules};
use crate::util::{self, FastMap};

use super::memory::Memory;
use super::nearest::{self, NearestIndex};

/// How a rule answered a request: which rule, and for `nearest` where the
/// recording it picked differs from the request.
#[derive(Clone, Debug, PartialEq)]
pub struct RuleUse {
    /// The rule's index in its file.
    pub rule: usize,
    pub differences: Arc<[Difference]>,
}

/// What a rule decided for a request's params, before any cursor moves.
#[derive(Clone, Debug, PartialEq)]
pub enum Choice {
    /// The `at`-th distinct recorded call of the group's `era` recordings,
    /// and (`nearest`) where it differs from the request.
    Variant { era: Era, at: usize, differences: Arc<[Difference]> },
    /// The next recording in recorded order (`sequence`).
    Sequence,
}

/// The rule that decides a request, and its choice or why it has none;
/// `None` (as an `Option<Decision>`): no rule decides it.
pub type Decision = (usize, Result<Choice, Refusal>);

/// What a rule reads of a recording: the rule that decides it, where it
/// went, the tool or prompt name or resource URI it names (`""` for none),
/// and its params as rules compare them, before a rule's own `ignore` and
/// `normalize`.
pub struct Filed<'a> {
    pub rule: usize,
    pub asked: Asked<'a>,
    pub name: &'a str,
    pub compared: Value,
}

/// A rule decided a request but no recording fits it.
#[derive(Clone, Debug, PartialEq)]
pub struct Refusal {
    pub rule: usize,
    pub why: String,
}

/// One rule's groups of recordings by server, then method, then name.
type Groups<R> = FastMap<String, FastMap<String, FastMap<String, Group<R>>>>;

/// The match rules with what they need of the recordings, built at load.
pub struct RuleIndex<R = Recorded> {
    rules: MatchRules,
    /// Per rule (by index): its groups by server, method, then name.
    groups: Vec<Groups<R>>,
    /// Decisions for params read before.
    memory: Memory<Option<Decision>>,
}

impl<R> Default for RuleIndex<R> {
    fn default() -> RuleIndex<R> {
        RuleIndex { rules: MatchRules::default(), groups: Vec::new(), memory: Memory::default() }
    }
}

/// The recordings one rule decides among for one server, method and name.
type Group<R> = ByEra<Recordings<R>>;

/// One era's recordings of a group.
struct Recordings<R> {
    /// Every recording, in recorded order (`sequence`).
    all: Vec<Arc<R>>,
    /// The distinct params as the rule prepares them, in order of first
    /// recording.
    variants: Vec<Variant<R>>,
    /// Variants by their prepared params' canonical JSON (`exact`).
    by_params: FastMap<String, usize>,
    /// The variants as `nearest` ranks them (for a `nearest` rule only).
    nearest: Option<NearestIndex>,
    /// The cursor of `sequence` through `all`.
    sequence_key: MatchKey,
}

/// Recordings whose params the rule makes the same.
struct Variant<R> {
    params: Value,
    /// The cursor key of its run of recordings.
    key: MatchKey,
    recordings: Vec<Arc<R>>,
}

impl RuleIndex {
    /// Indexes what `rules` decide among in MCP `recordings` (of one
    /// tape); `normalization` gives the canonical params (redaction and
    /// `--ignore-param`s as for keys).
    pub fn new<'a>(
        rules: MatchRules,
        recordings: impl IntoIterator<Item = &'a Arc<Recorded>>,
        normalization: &Rules,
    ) -> RuleIndex {
        RuleIndex::over(rules, recordings, |recorded, rules| {
            let (server, method) = (recorded.server.as_str(), recorded.method.as_str());
            let name = recorded.subject.as_deref().unwrap_or_default();
            Some(Filed {
                rule: rules.find(server, method, name)?,
                asked: Asked { era: recorded.era, server, method },
                name,
                compared: normalization.canonical_params(recorded.params().as_ref()),
            })
        })
    }
}

impl<R> RuleIndex<R> {
    /// Indexes what `rules` decide among in `recordings` (of one tape), as
    /// `filed` reads each (`None`: no rule decides it).
    pub fn over<'a>(
        rules: MatchRules,
        recordings: impl IntoIterator<Item = &'a Arc<R>>,
        filed: impl Fn(&'a R, &MatchRules) -> Option<Filed<'a>>,
    ) -> RuleIndex<R>
    where
        R: 'a,
    {
        let mut groups: Vec<Groups<R>> = (0..rules.rules().len()).map(|_| FastMap::default()).collect();
        for recorded in recordings {
            let Some(filed) = filed(recorded, &rules) else { continue };
            let Filed { rule: index, asked: Asked { era, server, method }, name, .. } = filed;
            let rule = &rules.rules()[index];
            let (prepared, by) = (rule.prepare(&filed.compared), rule.by);
            let group = groups[index]
                .entry(server.to_owned())
                .or_default()
                .entry(method.to_owned())
                .or_default()
                .entry(name.to_owned())
                .or_insert_with(|| {
                    let recordings = |era| Recordings::new(index, by, server, method, name, era);
                    ByEra::new(recordings(Era::Handshake), recordings(Era::Stateless))
                });
            group.of_mut(era).add(&filed, Arc::clone(recorded), prepared);
        }
        RuleIndex { rules, groups, memory: Memory::default() }
    }

    pub fn rules(&self) -> &MatchRules {
        &self.rules
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The rule that decides a request of `method` to `server` with
    /// (redacted) `params`, if any.
    pub fn rule_for(&self, server: &str, method: &str, params: Option<&Value>) -> Option<usize> {
        if self.rules.is_empty() {
            return None;
        }
        self.rules.find(server, method, mcp::subject_of(method, params).unwrap_or_default())
    }

    /// What rule `rule` decides for a request as `asked` with canonical
    /// `params` (redacted, `_meta` out): which run of recordings answers
    /// it, before any cursor moves.
    ///
    /// # Errors
    ///
    /// A [`Refusal`]: no recording of this server, method and name; none
    /// equal under the rule (`exact`).
    pub fn decide(&self, rule: usize, asked: Asked, params: &Value) -> Result<Choice, Refusal> {
        if self.rules.rules()[rule].by == By::Nearest {
            // Ranking may compare with every recording of the tool: no async worker waits on it.
            return util::off_the_workers(|| self.decide_now(rule, asked, params));
        }
        self.decide_now(rule, asked, params)
    }

    fn decide_now(&self, rule: usize, asked: Asked, params: &Value) -> Result<Choice, Refusal> {
        let Asked { era, server, method } = asked;
        let refuse = |why: &str| Refusal { rule, why: why.to_owned() };
        let group = self
            .group(rule, server, method, mcp::subject_of(method, Some(params)).unwrap_or_default())
            .ok_or_else(|| refuse("nothing of this server, method and name is recorded"))?;
        let definition = &self.rules.rules()[rule];
        match definition.by {
            By::Sequence => Ok(Choice::Sequence),
            By::Exact => {
                let prepared = canonical_json(&definition.prepare(params));
                group
                    .own_first(era)
                    .into_iter()
                    .find_map(|(recorded_in, recordings)| {
                        let at = *recordings.by_params.get(&prepared)?;
                        Some(Choice::Variant { era: recorded_in, at, differences: Arc::default() })
                    })
                    .ok_or_else(|| {
                        refuse("no recording is the same once the rule's ignore and normalize apply")
                    })
            }
            By::Nearest => {
                let prepared = definition.prepare(params);
                let request = nearest::leaves(&prepared);
                if request.len() > MAX_RANKED_LEAVES {
                    return Err(refuse(&format!(
                        "the request's params hold {} leaves; nearest ranks requests of at most \
                         {MAX_RANKED_LEAVES}",
                        request.len()
                    )));
                }
                // Both eras' recorded calls; at equal rank, the request's own era first.
                let found = group
                    .own_first(era)
                    .into_iter()
                    .enumerate()
                    .filter_map(|(order, (recorded_in, recordings))| {
                        let (rank, at) = recordings.nearest.as_ref()?.nearest(&request)?;
                        Some(((rank, order), recorded_in, at))
                    })
                    .min_by_key(|(rank, _, _)| *rank);
                let (_, recorded_in, at) =
                    found.ok_or_else(|| refuse("nothing of this server, method and name is recorded"))?;
                let differences =
                    normalize::differences(&group.of(recorded_in).variants[at].params, &prepared);
                Ok(Choice::Variant { era: recorded_in, at, differences: differences.into() })
            }
        }
    }

    /// The recording `choice` (rule `rule`'s decision for a request as
    /// `asked`, naming `name`) gives the session of `cursors`, advancing
    /// them.
    ///
    /// # Errors
    ///
    /// A [`Refusal`] when a `sequence` has used every recording.
    pub fn take(
        &self,
        rule: usize,
        choice: &Choice,
        asked: Asked,
        name: &str,
        cursors: &mut Cursors,
    ) -> Result<(Arc<R>, RuleUse), Refusal> {
        let Asked { era, server, method } = asked;
        let refuse = |why: String| Refusal { rule, why };
        let group = self
            .group(rule, server, method, name)
            .ok_or_else(|| refuse("nothing of this server, method and name is recorded".into()))?;
        match choice {
            Choice::Variant { era: recorded_in, at, differences } => {
                let recordings = group.of(*recorded_in);
                let recorded = recordings.variants[*at].next(*recorded_in, cursors);
                Ok((Arc::clone(recorded), RuleUse { rule, differences: Arc::clone(differences) }))
            }
            Choice::Sequence => {
                let (recorded_in, recordings) = group.for_era(era, |recordings| !recordings.all.is_empty());
                let position = cursors.advance(recordings.sequence_key, recorded_in);
                match recordings.all.get(position) {
                    Some(recorded) => {
                        Ok((Arc::clone(recorded), RuleUse { rule, differences: Arc::default() }))
                    }
                    None => Err(refuse(format!(
                        "call {} of this kind, past the last of its {} recordings",
                        position + 1,
                        recordings.all.len()
                    ))),
                }
            }
        }
    }

    /// [`RuleIndex::decide`], then [`RuleIndex::take`].
    ///
    /// # Errors
    ///
    /// Either's [`Refusal`].
    pub fn pick(
        &self,
        rule: usize,
        asked: Asked,
        params: &Value,
        cursors: &mut Cursors,
    ) -> Result<(Arc<R>, RuleUse), Refusal> {
        let choice = self.decide(rule, asked, params)?;
        let name = mcp::subject_of(asked.method, Some(params)).unwrap_or_default();
        self.take(rule, &choice, asked, name, cursors)
    }

    /// The decision for a request as `asked` with params `text`,
    /// remembered for params read before (see [`Memory`]): `work_out` is
    /// the plain path, asked only for params not remembered.
    pub fn remembered(
        &self,
        asked: Asked,
        text: Option<&str>,
        work_out: impl FnOnce() -> Option<Decision>,
    ) -> Option<Decision> {
        self.memory.get_or(asked, text, work_out)
    }

    fn group(&self, rule: usize, server: &str, method: &str, name: &str) -> Option<&Group<R>> {
        self.groups.get(rule)?.get(server)?.get(method)?.get(name)
    }
}

impl<R> Recordings<R> {
    fn new(rule: usize, by: By, server: &str, method: &str, name: &str, era: Era) -> Recordings<R> {
        let tag = format!("sequence/{}", era.as_str());
        Recordings {
            all: Vec::new(),
            variants: Vec::new(),
            by_params: FastMap::default(),
            nearest: (by == By::Nearest).then(NearestIndex::default),
            sequence_key: key_of(rule, [server, method, name, &tag]),
        }
    }

    fn add(&mut self, filed: &Filed, recorded: Arc<R>, prepared: Value) {
        let text = canonical_json(&prepared);
        let at = match self.by_params.get(&text) {
            Some(at) => *at,
            None => {
                let Filed { rule, asked, name, .. } = filed;
                let key = key_of(*rule, [asked.server, asked.method, name, &text]);
                if let Some(nearest) = &mut self.nearest {
                    nearest.add(&prepared);
                }
                self.variants.push(Variant { params: prepared, key, recordings: Vec::new() });
                self.by_params.insert(text, self.variants.len() - 1);
                self.variants.len() - 1
            }
        };
        self.variants[at].recordings.push(Arc::clone(&recorded));
        self.all.push(recorded);
    }
}

impl<R> Variant<R> {
    /// Its next recording for the session of `cursors`: in recorded order,
    /// then the last one again.
    fn next(&self, era: Era, cursors: &mut Cursors) -> &Arc<R> {
        cursors.next_in(self.key, era, &self.recordings).expect("a variant holds a recording")
    }
}

/// A cursor key for rule `rule`'s `what` among a server's, method's and
/// name's recordings (`[server, method, name, what]`): apart from every
/// exact match key (those hash no rule).
fn key_of(rule: usize, parts: [&str; 4]) -> MatchKey {
    let mut hash = Sha256::new();
    for part in ["mcp-tape match rule", &rule.to_string()].into_iter().chain(parts) {
        hash.update(part.as_bytes());
        hash.update([0]);
    }
    MatchKey::from_digest(hash.finalize().into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cassette::tape::Tape;
    use serde_json::json;
    use std::path::Path;

    /// The index of `rules` over handshake-era recordings of server `s`:
    /// (tool, arguments, answer text).
    fn index(rules: &str, recorded: &[(&str, Value, &str)]) -> RuleIndex {
        let handshake: Vec<_> =
            recorded.iter().map(|(t, a, x)| (*t, a.clone(), *x, Era::Handshake)).collect();
        index_in_eras(rules, &handshake)
    }

    /// The same with each recording's era.
    fn index_in_eras(rules: &str, recorded: &[(&str, Value, &str, Era)]) -> RuleIndex {
        let exchanges = recorded.iter().map(|(tool, arguments, text, era)| {
            let mut sample = crate::normalize::tests::sample("s", tool, text);
            sample.request["params"]["arguments"] = arguments.clone();
            if *era == Era::Stateless {
                sample.era = Era::Stateless;
                sample.request["params"]["_meta"] = json!({
                    mcp::META_PROTOCOL_VERSION: "2026-07-28", mcp::META_CLIENT_CAPABILITIES: {},
                });
            }
            sample.to_text()
        });
        let normalization = Rules::default();
        let tape = Tape::new(exchanges.collect(), &normalization);
        let rules = MatchRules::parse(Path::new("mcp-tape.toml"), rules).unwrap();
        RuleIndex::new(rules, tape.recordings(), &normalization)
    }

    fn pick(
        index: &RuleIndex,
        tool: &str,
        arguments: Value,
        cursors: &mut Cursors,
    ) -> Result<String, String> {
        let params = json!({"name": tool, "arguments": arguments});
        let rule = index.rule_for("s", "tools/call", Some(&params)).ok_or("no rule")?;
        index
            .pick(rule, Asked { era: Era::Handshake, server: "s", method: "tools/call" }, &params, cursors)
            .map(|(recorded, _)| {
                recorded.result().unwrap()["content"][0]["text"].as_str().unwrap().to_owned()
            })
            .map_err(|refusal| refusal.why)
    }

    #[test]
    fn exact_compares_what_is_left() {
        let index = index(
            "[[match]]\ntool = \"t\"\nignore = [\"/arguments/at\"]\nnormalize = { \"/arguments/q\" = [\"case\"] }\n",
            &[("t", json!({"q": "Sync", "at": 1}), "one"), ("t", json!({"q": "other", "at": 2}), "two")],
        );
        let mut cursors = Cursors::default();
        assert_eq!(pick(&index, "t", json!({"q": "SYNC", "at": 99}), &mut cursors), Ok("one".into()));
        assert_eq!(pick(&index, "t", json!({"q": "Other"}), &mut cursors), Ok("two".into()));
        assert!(pick(&index, "t", json!({"q": "third", "at": 1}), &mut cursors).is_err());
        assert_eq!(pick(&index, "u", json!({"q": "Sync"}), &mut cursors), Err("no rule".into()));
    }

    #[test]
    fn sequence_runs_out() {
        let index = index(
            "[[match]]\ntool = \"t\"\nby = \"sequence\"\n",
            &[
                ("t", json!({"n": 1}), "first"),
                ("t", json!({"n": 2}), "second"),
                ("u", json!({}), "other tool"),
            ],
        );
        let mut cursors = Cursors::default();
        assert_eq!(pick(&index, "t", json!({"x": "a"}), &mut cursors), Ok("first".into()));
        assert_eq!(pick(&index, "t", json!({"x": "b"}), &mut cursors), Ok("second".into()));
        let past = pick(&index, "t", json!({"x": "c"}), &mut cursors).unwrap_err();
        assert!(past.contains("past the last of its 2 recordings"), "{past}");
        assert_eq!(pick(&index, "t", json!({}), &mut Cursors::default()), Ok("first".into()));
    }

    #[test]
    fn nearest_refuses_a_request_with_more_leaves_than_it_ranks() {
        let index = index("[[match]]\ntool = \"t\"\nby = \"nearest\"\n", &[("t", json!({"a": 1}), "one")]);
        // With the tool's name, one leaf past the bound.
        let arguments: serde_json::Map<String, Value> =
            (0..MAX_RANKED_LEAVES).map(|n| (format!("k{n}"), json!(n))).collect();
        let refused =
            pick(&index, "t", Value::Object(arguments.clone()), &mut Cursors::default()).unwrap_err();
        assert!(
            refused.contains(&format!(
                "hold {} leaves; nearest ranks requests of at most",
                MAX_RANKED_LEAVES + 1
            )),
            "{refused}"
        );
        let mut within = arguments;
        within.remove("k0");
        assert_eq!(pick(&index, "t", Value::Object(within), &mut Cursors::default()), Ok("one".into()));
    }

    #[test]
    fn nearest_counts_differing_pointers_then_distance() {
        let index = index(
            "[[match]]\ntool = \"t\"\nby = \"nearest\"\n",
            &[
                ("t", json!({"subject": "Team sync", "top": 5}), "sync"),
                ("t", json!({"subject": "Budget review", "top": 5}), "budget"),
                ("t", json!({"subject": "Team sync", "top": 10, "extra": true}), "two away"),
            ],
        );
        let mut cursors = Cursors::default();
        assert_eq!(
            pick(&index, "t", json!({"subject": "Team sync tomorrow", "top": 5}), &mut cursors),
            Ok("sync".into())
        );
        assert_eq!(
            pick(&index, "t", json!({"subject": "Budget", "top": 5}), &mut cursors),
            Ok("budget".into())
        );
        assert_eq!(
            pick(&index, "t", json!({"subject": "Team sync", "top": 10}), &mut cursors),
            Ok("sync".into())
        );
    }

    #[test]
    fn nearest_and_exact_look_in_both_eras_the_requests_own_first() {
        let index = index_in_eras(
            "[[match]]\ntool = \"q\"\nby = \"nearest\"\n",
            &[
                ("q", json!({"query": "How do I use the vpn?"}), "vpn", Era::Handshake),
                ("q", json!({"query": "What are the expenses rules?"}), "expenses", Era::Handshake),
                ("q", json!({"query": "How do I use the vpn?"}), "vpn, stateless", Era::Stateless),
            ],
        );
        let text = |era: Era, query: &str| {
            let params = json!({"name": "q", "arguments": {"query": query}});
            let (recorded, _) = index
                .pick(0, Asked { era, server: "s", method: "tools/call" }, &params, &mut Cursors::default())
                .unwrap();
            recorded.result().unwrap()["content"][0]["text"].as_str().unwrap().to_owned()
        };
        assert_eq!(text(Era::Stateless, "What are the EXPENSES rules?"), "expenses");
        assert_eq!(text(Era::Stateless, "How do I use the VPN?"), "vpn, stateless");
        assert_eq!(text(Era::Handshake, "How do I use the VPN?"), "vpn");
    }

    /// The remembered decision is the plain path's, whatever order params
    /// come in: the same params object again, an equal one read anew, to
    /// another server, method or era.
    mod remembered {
        use super::*;
        use crate::engine::{Call, Facts};
        use crate::jsonrpc::{Params, RequestId};
        use proptest::prelude::*;

        const RULES: &str = "[[match]]\ntool = \"t\"\nignore = [\"/arguments/at\"]\n\n\
            [[match]]\ntool = \"n*\"\nby = \"nearest\"\n\n[[match]]\ntool = \"q\"\nby = \"sequence\"\n";

        fn pool() -> Vec<Value> {
            let mut pool = Vec::new();
            for tool in ["t", "near", "q", "other"] {
                for (subject, at) in [("a", 1), ("b", 2), ("a", 3), ("abc", 1)] {
                    pool.push(json!({"name": tool, "arguments": {"subject": subject, "at": at}}));
                }
            }
            pool
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(300))]
            #[test]
            fn equals_the_plain_path(calls in prop::collection::vec((0..16usize, any::<bool>(), 0..2usize, 0..2usize, 0..2usize), 1..40)) {
                let index = index_in_eras(RULES, &[
                    ("t", json!({"subject": "a", "at": 9}), "t a", Era::Handshake),
                    ("t", json!({"subject": "b", "at": 9}), "t b", Era::Stateless),
                    ("t", json!({"subject": "a", "at": 5}), "t a, stateless", Era::Stateless),
                    ("near", json!({"subject": "abc", "at": 1}), "near abc", Era::Handshake),
                    ("near", json!({"subject": "b", "at": 2}), "near b", Era::Handshake),
                    ("near", json!({"subject": "a", "at": 1}), "near a", Era::Stateless),
                    ("q", json!({}), "q", Era::Handshake),
                ]);
                let values = pool();
                let mut objects: Vec<Params> = values.iter().cloned().map(Params::new).collect();
                let (id, facts) = (RequestId::from_value(&json!(1)).unwrap(), Facts::default());
                for (at, fresh, server, method, era) in calls {
                    let at = at % objects.len();
                    if fresh {
                        objects[at] = Params::new(values[at].clone());
                    }
                    let call = Call {
                        server: ["s", "x"][server],
                        era: [Era::Handshake, Era::Stateless][era],
                        session: None,
                        id: &id,
                        method: ["tools/call", "prompts/get"][method],
                        params: Some(&objects[at]),
                        facts: &facts,
                    };
                    let plain = || {
                        let params = call.params();
                        let rule = index.rule_for(call.server, call.method, params)?;
                        let canonical = Rules::default().canonical_params(params);
                        Some((rule, index.decide(rule, call.asked(), &canonical)))
                    };
                    let text = call.params.map(Params::text);
                    prop_assert_eq!(index.remembered(call.asked(), text, plain), plain());
                }
            }
        }
    }
}
