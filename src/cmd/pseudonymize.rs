//! `mcp-tape pseudonymize`: cassettes rewritten with their personal data
//! given pseudonyms, as `record --pseudonymize` stores it.

use std::path::{Path, PathBuf};

use super::{discard, load_rules, pseudonyms};
use crate::cassette::store::{self, Cassette, Everything, Settled};
use crate::config::RuleSources;
use crate::error::Error;
use crate::model::{Exchange, LlmAnswer, LlmExchange, ServiceAnswer};
use crate::normalize::{Normalization, Rules};
use crate::pseudonym::{Pseudonyms, Scope};
use crate::util;

/// One cassette as read: its path, everything in it, and the keys it says
/// it was pseudonymized with.
struct Read {
    path: PathBuf,
    exchanges: Vec<Exchange>,
    services: Vec<ServiceAnswer>,
    templates: Vec<crate::model::AnswerTemplate>,
    llms: Vec<LlmExchange>,
    keys: Vec<String>,
}

/// Reads every cassette under `paths`, learns what each holds, then
/// writes each anew with its personal data pseudonymized, moving it over
/// the old one.
///
/// # Errors
///
/// A path that is no cassette; a cassette another process holds open, or
/// that cannot be read or written; a key that cannot be found or made.
pub(super) fn run(paths: &[PathBuf]) -> Result<u8, Error> {
    let table = load_rules(&RuleSources::default())?.pseudonymize;
    let Some(pseudonyms) = pseudonyms(true, table.as_ref())? else { return Ok(0) };
    let read =
        store::cassette_files(paths)?.into_iter().map(|path| read(&path)).collect::<Result<Vec<_>, _>>()?;
    for cassette in &read {
        learn(&pseudonyms, cassette);
    }
    let rules = Rules::new(&Normalization::default())?;
    for cassette in read {
        let path = cassette.path.clone();
        let written = write(&pseudonyms, &rules, cassette)?;
        util::say(format_args!(
            "mcp-tape: pseudonymized {} ({written} recording(s))",
            util::printable(&path.display().to_string())
        ));
    }
    if pseudonyms.collisions() > 0 {
        return Err(Error::Config(format!(
            "{} value(s) got the pseudonym of another: the cassettes cannot tell them apart",
            pseudonyms.collisions()
        )));
    }
    Ok(0)
}

/// Everything in the cassette at `path`, once everything recorded is in
/// the file itself (a cassette a recorder holds open is refused).
fn read(path: &Path) -> Result<Read, Error> {
    let cassette = Cassette::open(path)?;
    if let Settled::InWal { .. } = cassette.settle() {
        return Err(Error::Config(format!(
            "{}: another process has it open (a recorder?): stop it first",
            path.display()
        )));
    }
    let Everything { exchanges, service_answers, templates, llm_exchanges } = cassette.read_everything()?;
    let exchanges = exchanges
        .into_iter()
        .map(|exchange| {
            let row = exchange.source.as_ref().map_or(0, |source| source.row);
            exchange.parse().map_err(|why| Error::Config(format!("{}#{row}: {why}", path.display())))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let keys = cassette.pseudonym_keys()?;
    Ok(Read {
        path: path.to_owned(),
        exchanges,
        services: service_answers,
        templates,
        llms: llm_exchanges,
        keys,
    })
}

/// Learns the personal values of everything in `cassette`.
fn learn(pseudonyms: &Pseudonyms, cassette: &Read) {
    for exchange in &cassette.exchanges {
        pseudonyms.learn_exchange(&exchange.request, &exchange.messages, &exchange.asides);
    }
    for template in &cassette.templates {
        pseudonyms.learn_text(&template.text, Scope::Data);
    }
    for exchange in &cassette.llms {
        pseudonyms.learn_llm(&exchange.request, &exchange.answer);
    }
}

/// Writes `cassette` anew beside itself with everything pseudonymized (its
/// match keys worked out again from the requests as stored), then moves
/// it over the old file; how many recordings it holds.
fn write(pseudonyms: &Pseudonyms, rules: &Rules, cassette: Read) -> Result<usize, Error> {
    let Read { path, mut exchanges, services, templates, mut llms, keys } = cassette;
    for exchange in &mut exchanges {
        pseudonyms.pseudonymize_exchange(&mut exchange.request, &mut exchange.messages, &mut exchange.asides);
        exchange.key = rules.match_key(&exchange.server, &exchange.method, exchange.request.get("params"));
    }
    for exchange in &mut llms {
        exchange.request = pseudonyms.pseudonymize_written(&exchange.request, Scope::Model);
        match &mut exchange.answer {
            LlmAnswer::Whole(body) => *body = pseudonyms.pseudonymize_written(body, Scope::Model),
            LlmAnswer::Events(events) => {
                for event in events {
                    event.text = event.edited(|text| pseudonyms.pseudonymize_written(text, Scope::Model));
                }
            }
        }
    }
    let services: Vec<ServiceAnswer> = services
        .into_iter()
        .map(|answer| ServiceAnswer {
            body: pseudonyms.pseudonymize_written(&answer.body, Scope::Data),
            ..answer
        })
        .collect();
    let templates: Vec<_> = templates
        .into_iter()
        .map(|template| crate::model::AnswerTemplate {
            text: pseudonyms.pseudonymize_written(&template.text, Scope::Data),
            ..template
        })
        .collect();
    let fresh = util::beside(&path, &format!("pseudonymizing-{}", std::process::id()));
    discard(&fresh);
    let written = (|| {
        let mut new = Cassette::open(&fresh)?;
        new.import(|importing| {
            for exchange in &exchanges {
                importing.exchange(exchange)?;
            }
            for answer in &services {
                importing.service(answer)?;
            }
            for exchange in &llms {
                importing.llm(exchange)?;
            }
            Ok(())
        })?;
        new.insert_templates(&templates)?;
        for key in keys.iter().chain(std::iter::once(&pseudonyms.fingerprint())) {
            new.note_pseudonym_key(key)?;
        }
        if let Settled::InWal { .. } = new.settle() {
            return Err(Error::Config(format!("{}: could not be settled", fresh.display())));
        }
        drop(new);
        std::fs::rename(&fresh, &path).map_err(|source| Error::Write { path: path.clone(), source })
    })();
    if written.is_err() {
        discard(&fresh);
    }
    written.map(|()| exchanges.len() + llms.len())
}
