//! Replay of pseudonymized cassettes (`--pseudonymize`): with their key,
//! what a request sends is pseudonymized before it is matched; without,
//! a miss on a request that holds personal data says which key to set.

use std::sync::Arc;

use serde_json::Value;

use super::Replay;
use crate::engine::llm::LlmCall;
use crate::engine::step::Call;
use crate::jsonrpc::Params;
use crate::pseudonym::{self, Pseudonyms, Scope};
use crate::util::printable;

impl Replay {
    /// `call`'s params pseudonymized as record stored them, when replay has
    /// the cassettes' key and they change.
    pub(super) fn pseudonymized_params(&self, call: &Call) -> Option<Params> {
        let pseudonyms = self.rules.pseudonyms()?;
        let asked = call.params()?;
        let mut request = serde_json::json!({"params": asked});
        pseudonyms.learn(&request, Scope::Mcp);
        pseudonyms.pseudonymize(&mut request, Scope::Mcp);
        let params = request["params"].take();
        (params != *asked).then(|| Params::new(params))
    }

    /// A model request's body pseudonymized as record stored it, when
    /// replay has the cassettes' key.
    pub(super) fn pseudonymized_body(&self, call: &LlmCall) -> Option<String> {
        let pseudonyms = self.rules.pseudonyms()?;
        pseudonyms.learn_text(call.body, Scope::Model);
        Some(pseudonyms.pseudonymize_written(call.body, Scope::Model))
    }

    /// The same engine, for cassettes pseudonymized with the keys of
    /// `fingerprints`: with `pseudonyms` (under one of those keys), what
    /// requests send is pseudonymized before it is matched; without, a
    /// miss on a request that holds personal data says which key to set.
    pub fn with_pseudonyms(self, fingerprints: Vec<String>, pseudonyms: Option<Arc<Pseudonyms>>) -> Replay {
        match pseudonyms {
            Some(pseudonyms) => Replay { rules: self.rules.clone().with_pseudonyms(pseudonyms), ..self },
            None => Replay { keyless: fingerprints, ..self },
        }
    }

    /// What a miss on `requested` adds when the cassettes are pseudonymized
    /// and replay has no key: where the request holds personal data, and
    /// which variable to set.
    pub(super) fn pseudonym_hint(&self, requested: &Value) -> String {
        if self.keyless.is_empty() {
            return String::new();
        }
        let found = pseudonym::find(requested, Scope::Data, &pseudonym::Settings::default());
        let Some(first) = found.first() else { return String::new() };
        format!(
            "; the cassettes are pseudonymized (key {}) and this request holds personal data ({} at {}): \
             set {} to their key, so that it is pseudonymized before it is matched",
            self.keyless.join(", "),
            first.kind.as_str(),
            printable(&first.pointer),
            pseudonym::KEY_VARIABLE
        )
    }
}
