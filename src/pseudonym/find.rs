//! Personal data found with no key, for `lint`: what a recording would
//! have pseudonymized and is not a pseudonym.

use serde_json::Value;

use super::{Kind, Likeness, Scope, Settings, already_pseudonym, bounded, pointer_of, shapes, walk};

/// One personal value `lint` found, with no key: where, what kind, and
/// the value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Personal {
    /// The JSON pointer of the string it is in (in JSON a string carries,
    /// the pointer of that string).
    pub pointer: String,
    pub kind: Kind,
    pub value: String,
}

/// The personal data in `message` (of `scope`) that is not a pseudonym:
/// addresses at somebody's domain, GUIDs, the values of the members that
/// hold people, and `settings`' terms.
pub fn find(message: &Value, scope: Scope, settings: &Settings) -> Vec<Personal> {
    let mut findings = Vec::new();
    let terms: Vec<String> = settings.terms.iter().map(|term| term.to_lowercase()).collect();
    walk(message, scope, &mut Vec::new(), &settings.fields, 0, &mut |text, member, pointer| {
        let pointer = pointer_of(pointer);
        if let Some(member) = member
            && member.linted
            && !text.trim().is_empty()
            && !already_pseudonym(text.trim(), member.form)
            && member.form != Likeness::Email
        {
            findings.push(Personal {
                pointer: pointer.clone(),
                kind: member.kind,
                value: text.trim().to_owned(),
            });
        }
        for (start, end, _, kind) in shapes(text) {
            let domain = text[start..end].rsplit_once('@').map(|(_, domain)| domain);
            if !domain.is_some_and(is_fictitious) {
                findings.push(Personal {
                    pointer: pointer.clone(),
                    kind,
                    value: text[start..end].to_owned(),
                });
            }
        }
        let lower = text.to_lowercase();
        for term in &terms {
            if let Some(at) = lower.find(term.as_str())
                && bounded(&lower, at, at + term.len(), Likeness::Words)
            {
                findings.push(Personal { pointer: pointer.clone(), kind: Kind::Term, value: term.clone() });
            }
        }
    });
    findings
}

/// Microsoft's documented fictitious companies' domains: addresses there
/// are nobody's (the shipped demo cassette uses them).
const FICTITIOUS_DOMAINS: &[&str] = &[
    "contoso.com",
    "fabrikam.com",
    "northwindtraders.com",
    "adventure-works.com",
    "wingtiptoys.com",
    "tailspintoys.com",
    "woodgrovebank.com",
    "litwareinc.com",
    "proseware.com",
    "fourthcoffee.com",
    "alpineskihouse.com",
    "cohowinery.com",
    "wideworldimporters.com",
    "margiestravel.com",
    "lucernepublishing.com",
    "treyresearch.net",
    "blueyonderairlines.com",
    "humongousinsurance.com",
];

/// Whether `domain` is one of Microsoft's fictitious domains, as a whole.
pub(super) fn is_fictitious(domain: &str) -> bool {
    FICTITIOUS_DOMAINS.iter().any(|known| domain.eq_ignore_ascii_case(known))
}
