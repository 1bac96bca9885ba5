use serde_json::json;

use super::*;

fn pseudonyms(key: &str) -> Pseudonyms {
    Pseudonyms::new(Key::from_text(key).unwrap(), &Settings::default())
}

/// A Graph-shaped answer of a mail tool: a person in structured members,
/// the same JSON in a tool's text content, and free text that names them.
fn mail_answer() -> Value {
    let message = json!({
        "id": "AAMkAGI2TG93AAA=",
        "from": {"emailAddress": {"name": "Aleksander Brightwater", "address": "aleksander.brightwater@northwind.io"}},
        "toRecipients": [{"emailAddress": {"name": "Mia Ng", "address": "mia.ng@northwind.io"}}],
        "subject": "Budget",
        "bodyPreview": "Hi Mia, Aleksander here. Call me on +1 (425) 555-0100.",
        "sender": {"id": "3f2b8a4e-1c2d-4e5f-8a9b-0c1d2e3f4a5b", "displayName": "Aleksander Brightwater",
                   "mobilePhone": "+1 (425) 555-0100", "jobTitle": "Head of Procurement"},
    });
    json!({
        "jsonrpc": "2.0",
        "id": "7c0a1d2e-0000-4000-8000-000000000001",
        "result": {
            "content": [{"type": "text", "text": message.to_string()}],
            "structuredContent": message,
        }
    })
}

fn text(value: &Value) -> String {
    value.to_string()
}

#[test]
fn every_name_address_id_and_phone_is_replaced_and_the_protocol_is_not() {
    let pseudonyms = pseudonyms("the key of this test, long enough");
    let mut answer = mail_answer();
    pseudonyms.learn(&answer, Scope::Mcp);
    pseudonyms.pseudonymize(&mut answer, Scope::Mcp);
    let stored = text(&answer);
    for original in
        ["aleksander", "brightwater", "mia", "northwind", "3f2b8a4e", "555-0100", "procurement", "Ng\""]
    {
        assert!(!stored.to_lowercase().contains(&original.to_lowercase()), "{original} in {stored}");
    }
    assert_eq!(answer["jsonrpc"], "2.0");
    assert_eq!(answer["id"], "7c0a1d2e-0000-4000-8000-000000000001", "the envelope's id is protocol");
    assert_eq!(answer["result"]["content"][0]["type"], "text");
    assert_eq!(answer["result"]["structuredContent"]["subject"], "Budget");
    assert_eq!(answer["result"]["structuredContent"]["id"], "AAMkAGI2TG93AAA=");
    let nested: Value =
        serde_json::from_str(answer["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(nested, answer["result"]["structuredContent"], "the text content and the structure agree");
}

#[test]
fn a_person_has_one_pseudonym_in_every_form_and_message() {
    let pseudonyms = pseudonyms("the key of this test, long enough");
    let mut answer = mail_answer();
    pseudonyms.learn(&answer, Scope::Mcp);
    pseudonyms.pseudonymize(&mut answer, Scope::Mcp);
    let sender = &answer["result"]["structuredContent"]["from"]["emailAddress"];
    let name = sender["name"].as_str().unwrap();
    let address = sender["address"].as_str().unwrap();
    let (first, last) = name.split_once(' ').unwrap();
    assert!(is_word_pseudonym(first) && is_word_pseudonym(last), "{name}");
    assert!(first.starts_with(char::is_uppercase), "{name}");
    assert_eq!(
        address,
        format!("{}.{}@{}", first.to_lowercase(), last.to_lowercase(), address.split_once('@').unwrap().1)
    );
    assert!(address.ends_with(".example"), "{address}");
    let preview = answer["result"]["structuredContent"]["bodyPreview"].as_str().unwrap();
    assert!(preview.contains(&format!("{first} here")), "{preview}");
    let phone = answer["result"]["structuredContent"]["sender"]["mobilePhone"].as_str().unwrap();
    assert!(preview.contains(phone) && is_phone_pseudonym(phone), "{preview} / {phone}");

    let mut request = json!({"model": "gpt-4o", "messages": [
        {"role": "user", "content": "Reply to ALEKSANDER at aleksander.brightwater@northwind.io"},
        {"role": "assistant", "tool_calls": [{"id": "call_abc", "type": "function",
            "function": {"name": "send_mail", "arguments": "{\"to\":\"aleksander.brightwater@northwind.io\"}"}}]},
    ]});
    pseudonyms.learn(&request, Scope::Model);
    pseudonyms.pseudonymize(&mut request, Scope::Model);
    let prompt = request["messages"][0]["content"].as_str().unwrap();
    assert_eq!(prompt, format!("Reply to {} at {address}", first.to_uppercase()));
    let call = &request["messages"][1]["tool_calls"][0];
    assert_eq!(call["id"], "call_abc");
    assert_eq!(call["function"]["name"], "send_mail");
    assert_eq!(call["function"]["arguments"], format!("{{\"to\":\"{address}\"}}"));
}

#[test]
fn the_same_key_gives_the_same_pseudonyms_and_another_key_others() {
    let run = |key: &str| {
        let pseudonyms = pseudonyms(key);
        let mut answer = mail_answer();
        pseudonyms.learn(&answer, Scope::Mcp);
        pseudonyms.pseudonymize(&mut answer, Scope::Mcp);
        text(&answer)
    };
    assert_eq!(run("the key of this test, long enough"), run("the key of this test, long enough"));
    assert_ne!(run("the key of this test, long enough"), run("another key of this test, as long"));
}

#[test]
fn pseudonymizing_twice_changes_nothing_the_second_time() {
    let pseudonyms = pseudonyms("the key of this test, long enough");
    let mut answer = mail_answer();
    pseudonyms.learn(&answer, Scope::Mcp);
    pseudonyms.pseudonymize(&mut answer, Scope::Mcp);
    let once = answer.clone();
    let again = self::pseudonyms("the key of this test, long enough");
    again.learn(&answer, Scope::Mcp);
    again.pseudonymize(&mut answer, Scope::Mcp);
    assert_eq!(answer, once);
    assert!(
        find(&answer, Scope::Mcp, &Settings::default()).is_empty(),
        "{:?}",
        find(&answer, Scope::Mcp, &Settings::default())
    );
}

#[test]
fn lint_finds_each_kind_without_a_key() {
    let settings = Settings { terms: vec!["Project Falcon".into()], ..Settings::default() };
    let mut answer = mail_answer();
    answer["result"]["structuredContent"]["subject"] = "project falcon budget".into();
    let findings = find(&answer, Scope::Mcp, &settings);
    let kinds: std::collections::BTreeSet<&str> = findings.iter().map(|f| f.kind.as_str()).collect();
    assert_eq!(kinds, ["email", "guid", "name", "phone", "term"].into_iter().collect());
    assert!(findings.iter().any(|f| f.pointer == "/result/structuredContent/sender/mobilePhone"));
    assert!(findings.iter().all(|f| !f.pointer.starts_with("/id")), "the envelope's id is protocol");
    let demo = json!({"mail": "megan@contoso.com", "note": "write to someone@example.com or x@sub.test"});
    assert!(find(&demo, Scope::Data, &Settings::default()).iter().all(|f| f.kind != Kind::Email));
}

#[test]
fn text_that_is_not_json_is_pseudonymized_as_text() {
    let pseudonyms = pseudonyms("the key of this test, long enough");
    pseudonyms.learn(&mail_answer(), Scope::Mcp);
    let text = pseudonyms.pseudonymize_written("data: Mia wrote to mia.ng@northwind.io {", Scope::Model);
    assert!(!text.to_lowercase().contains("mia") && text.starts_with("data: "), "{text}");
    let written = "{\"n\": 1.50, \"list\": [ 1 ], \"note\":\"Mia\"}";
    let kept = pseudonyms.pseudonymize_written(written, Scope::Data);
    assert!(kept.starts_with("{\"n\":1.50,\"list\":[1],\"note\":\"") && !kept.contains("Mia"), "{kept}");
}

#[test]
fn schemas_tool_names_and_meta_are_left_alone() {
    let pseudonyms = pseudonyms("the key of this test, long enough");
    pseudonyms.learn(&json!({"displayName": "Mail Sender"}), Scope::Data);
    let mut list = json!({"jsonrpc": "2.0", "id": 1, "result": {"tools": [{
        "name": "mail_sender", "description": "Sends mail as the Mail Sender",
        "inputSchema": {"type": "object", "properties": {"mail": {"description": "Mail Sender's address"}}}
    }]}});
    let before = list.clone();
    pseudonyms.pseudonymize(&mut list, Scope::Mcp);
    assert_eq!(list["result"]["tools"][0]["name"], before["result"]["tools"][0]["name"]);
    assert_eq!(list["result"]["tools"][0]["inputSchema"], before["result"]["tools"][0]["inputSchema"]);
    assert_ne!(list["result"]["tools"][0]["description"], before["result"]["tools"][0]["description"]);
}
