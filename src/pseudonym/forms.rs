//! The form each kind of value keeps as a pseudonym, keyed: a word of
//! syllables for a word, a GUID for a GUID, the same count of digits for
//! digits, an address at a `.example` domain for an address. Each is the
//! keyed hash of the value (lowercased) with the key, so it is the same
//! wherever and whenever the same key meets the same value, and each
//! carries a check anyone can test without the key, so that a pseudonym
//! is never taken for a value: the last syllable of a word, the last four
//! hex digits of a GUID, the last two digits of a phone number.

use sha2::{Digest, Sha256};

use super::key::Key;

/// A syllable's consonant (a maximal run of consonants is one of these).
const ONSETS: [&str; 20] =
    ["b", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "y", "z", "sh", "th"];

/// A syllable's vowel.
const VOWELS: [&str; 5] = ["a", "e", "i", "o", "u"];

/// Syllables in a word: five keyed (10^10 words), then the check.
const KEYED_SYLLABLES: usize = 5;

/// How many syllables there are.
const SYLLABLES: usize = ONSETS.len() * VOWELS.len();

/// Letters a GUID pseudonym's version and check take: not keyed.
const GUID_VERSION: u8 = b'8';

/// The syllable of index `i` (below [`SYLLABLES`]).
fn syllable(i: usize) -> String {
    format!("{}{}", ONSETS[i / VOWELS.len()], VOWELS[i % VOWELS.len()])
}

/// The check syllable of a word's keyed syllables: no key, so that a
/// pseudonym can be told from a value without one.
fn word_check(keyed: &[usize]) -> usize {
    let mut hash = Sha256::new().chain_update(b"mcp-tape word\0");
    for i in keyed {
        hash.update([*i as u8]);
    }
    let hash = hash.finalize();
    usize::from(u16::from_be_bytes([hash[0], hash[1]])) % SYLLABLES
}

/// The pseudonym of the word `lower` (lowercased): six syllables of a
/// consonant and a vowel, the last the check, in lowercase.
pub(super) fn word(key: &Key, lower: &str) -> String {
    let hash = key.hash("word", lower);
    let keyed: Vec<usize> = hash
        .chunks(2)
        .take(KEYED_SYLLABLES)
        .map(|pair| usize::from(u16::from_be_bytes([pair[0], pair[1]])) % SYLLABLES)
        .collect();
    let mut word: String = keyed.iter().map(|&i| syllable(i)).collect();
    word.push_str(&syllable(word_check(&keyed)));
    word
}

/// Whether `word` is a word pseudonym (any letter case): its syllables and
/// their check.
pub fn is_word_pseudonym(word: &str) -> bool {
    let lower = word.to_ascii_lowercase();
    let mut rest = lower.as_str();
    let mut indices = Vec::with_capacity(KEYED_SYLLABLES + 1);
    while !rest.is_empty() && indices.len() <= KEYED_SYLLABLES {
        let consonants = rest.find(|c: char| "aeiou".contains(c)).unwrap_or(rest.len());
        let Some(onset) = ONSETS.iter().position(|o| *o == &rest[..consonants]) else { return false };
        rest = &rest[consonants..];
        let Some(vowel) = VOWELS.iter().position(|v| rest.starts_with(v)) else { return false };
        rest = &rest[1..];
        indices.push(onset * VOWELS.len() + vowel);
    }
    rest.is_empty()
        && indices.len() == KEYED_SYLLABLES + 1
        && word_check(&indices[..KEYED_SYLLABLES]) == indices[KEYED_SYLLABLES]
}

/// `pseudonym` (lowercase) in the letter case of `like`: all capitals,
/// capitalized, or lowercase.
pub(super) fn recased(pseudonym: &str, like: &str) -> String {
    let mut letters = like.chars().filter(|c| c.is_alphabetic());
    let first = letters.next();
    let upper = first.is_some_and(char::is_uppercase);
    let rest_upper = {
        let rest: Vec<char> = letters.collect();
        !rest.is_empty() && rest.iter().all(|c| c.is_uppercase())
    };
    if upper && rest_upper {
        pseudonym.to_uppercase()
    } else if upper {
        let mut chars = pseudonym.chars();
        chars.next().map(|c| c.to_uppercase().chain(chars).collect()).unwrap_or_default()
    } else {
        pseudonym.to_owned()
    }
}

/// `text` with each run of letters made its word's pseudonym (in the run's
/// letter case); everything else (digits, spaces, hyphens, commas, dots)
/// kept.
pub(super) fn words(key: &Key, text: &str) -> String {
    let mut out = String::with_capacity(text.len() * 2);
    let mut run = String::new();
    let flush = |run: &mut String, out: &mut String| {
        if is_word_pseudonym(run) {
            out.push_str(run);
        } else if !run.is_empty() {
            out.push_str(&recased(&word(key, &run.to_lowercase()), run));
        }
        run.clear();
    };
    for c in text.chars() {
        if c.is_alphabetic() {
            run.push(c);
        } else {
            flush(&mut run, &mut out);
            out.push(c);
        }
    }
    flush(&mut run, &mut out);
    out
}

/// `count` keyed digits for the digits `run`.
fn keyed_digits(key: &Key, kind: &str, run: &str, count: usize) -> Vec<u8> {
    let mut digits = Vec::with_capacity(count);
    let mut round = 0u32;
    while digits.len() < count {
        let hash = key.hash(kind, &format!("{run}\0{round}"));
        digits.extend(hash.iter().map(|b| b % 10).take(count - digits.len()));
        round += 1;
    }
    digits
}

/// The check of a phone number's keyed digits: two digits, no key.
fn phone_check(keyed: &[u8]) -> [u8; 2] {
    let hash = Sha256::new().chain_update(b"mcp-tape phone\0").chain_update(keyed).finalize();
    let check = u16::from_be_bytes([hash[0], hash[1]]) % 100;
    [(check / 10) as u8, (check % 10) as u8]
}

/// The phone number `text`: its format kept, each digit keyed, the last two
/// the check (a number of fewer than four digits has none); a first digit
/// that was not 0 is not 0.
pub(super) fn phone(key: &Key, text: &str) -> String {
    let original: String = text.chars().filter(char::is_ascii_digit).collect();
    let count = original.len();
    let mut digits = keyed_digits(key, "phone", &original, count);
    if original.starts_with(|c| c != '0') && digits.first() == Some(&0) {
        digits[0] = 1 + (key.hash("phone first", &original)[0] % 9);
    }
    if count >= 4 {
        let check = phone_check(&digits[..count - 2]);
        digits[count - 2..].copy_from_slice(&check);
    }
    let mut next = digits.into_iter();
    text.chars()
        .map(|c| if c.is_ascii_digit() { char::from(b'0' + next.next().unwrap_or(0)) } else { c })
        .collect()
}

/// Whether `text` is a phone number's pseudonym: four digits or more, the
/// last two the check of the others.
pub fn is_phone_pseudonym(text: &str) -> bool {
    let digits: Vec<u8> = text.bytes().filter(u8::is_ascii_digit).map(|d| d - b'0').collect();
    digits.len() >= 4 && phone_check(&digits[..digits.len() - 2]) == digits[digits.len() - 2..]
}

/// The check of a GUID pseudonym's first 28 hex digits: the last four.
fn guid_check(first: &str) -> String {
    let hash = Sha256::new().chain_update(b"mcp-tape guid\0").chain_update(first.as_bytes()).finalize();
    format!("{:02x}{:02x}", hash[0], hash[1])
}

/// The GUID `text` (`8-4-4-4-12` hex digits): a GUID of version 8 whose
/// last four hex digits are the check, in `text`'s letter case.
pub(super) fn guid(key: &Key, text: &str) -> String {
    let lower: String = text.chars().filter(|c| *c != '-').collect::<String>().to_ascii_lowercase();
    let hash = key.hash("guid", &lower);
    let mut hex: Vec<u8> = hash[..16].iter().flat_map(|b| format!("{b:02x}").into_bytes()).collect();
    hex[12] = GUID_VERSION;
    hex[16] = b"89ab"[usize::from(hash[16] & 3)];
    let first = String::from_utf8_lossy(&hex[..28]).into_owned();
    let hex = format!("{first}{}", guid_check(&first));
    let guid = format!("{}-{}-{}-{}-{}", &hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..]);
    if text.chars().any(|c| c.is_ascii_uppercase()) { guid.to_ascii_uppercase() } else { guid }
}

/// Whether `text` (a GUID) is a GUID pseudonym: version 8 and the check.
pub fn is_guid_pseudonym(text: &str) -> bool {
    let hex: String = text.chars().filter(|c| *c != '-').collect::<String>().to_ascii_lowercase();
    hex.len() == 32
        && hex.as_bytes()[12] == GUID_VERSION
        && matches!(hex.as_bytes()[16], b'8' | b'9' | b'a' | b'b')
        && guid_check(&hex[..28]) == hex[28..]
}

/// The domain `domain`'s pseudonym: one keyed word, then `.example`;
/// nothing of its labels kept.
pub(super) fn domain(key: &Key, domain: &str) -> String {
    let lower = domain.to_ascii_lowercase();
    recased(&format!("{}.example", word(key, &format!("domain {lower}"))), domain)
}

/// The address `text` (`local@domain`): the local part's words and digits
/// as [`words`] makes them, the domain as [`domain`].
pub(super) fn email(key: &Key, text: &str) -> String {
    match text.rsplit_once('@') {
        Some((local, at)) => format!("{}@{}", words(key, local), domain(key, at)),
        None => words(key, text),
    }
}

/// Whether addresses at `domain` are nobody's: the names RFC 2606 keeps for
/// examples and tests (a pseudonym's `.example` among them).
pub fn is_reserved_domain(domain: &str) -> bool {
    let domain = domain.trim_end_matches('.');
    let is = |name: &str| {
        let at = domain.len().wrapping_sub(name.len());
        domain.get(at..).is_some_and(|end| end.eq_ignore_ascii_case(name))
            && (at == 0 || domain.as_bytes().get(at.wrapping_sub(1)) == Some(&b'.'))
    };
    ["example", "test", "invalid", "localhost", "example.com", "example.net", "example.org"]
        .into_iter()
        .any(is)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> Key {
        Key::from_text("a key for the tests of the forms").unwrap()
    }

    #[test]
    fn a_word_is_five_syllables_and_passes_its_check() {
        let key = key();
        for original in ["aleksander", "brightwater", "a", "zoë", "o"] {
            let word = word(&key, original);
            assert!(is_word_pseudonym(&word), "{word}");
            assert!(is_word_pseudonym(&recased(&word, "Aleksander")), "{word}");
            assert_eq!(word, super::word(&key, original));
        }
        for name in ["Aleksander", "Brightwater", "Maria", "bakotemiru", "Kobe"] {
            assert!(!is_word_pseudonym(name), "{name}");
        }
    }

    #[test]
    fn words_keep_their_case_separators_and_digit_counts() {
        let key = key();
        let made = words(&key, "Brightwater, Aleksander (Building 40/1234)");
        let parts: Vec<&str> = made.split([',', ' ', '(', ')', '/']).filter(|p| !p.is_empty()).collect();
        assert_eq!(parts.len(), 5, "{made}");
        assert!(parts[0].starts_with(char::is_uppercase) && is_word_pseudonym(parts[0]), "{made}");
        assert_eq!((parts[3], parts[4]), ("40", "1234"), "{made}");
        assert_eq!(words(&key, "ALEKSANDER"), recased(&word(&key, "aleksander"), "ALEKSANDER"));
        assert_eq!(words(&key, &made), made, "a pseudonym is never pseudonymized again");
    }

    #[test]
    fn guids_keep_their_form_and_case() {
        let key = key();
        let lower = guid(&key, "3f2b8a4e-1c2d-4e5f-8a9b-0c1d2e3f4a5b");
        let upper = guid(&key, "3F2B8A4E-1C2D-4E5F-8A9B-0C1D2E3F4A5B");
        assert_eq!(lower.to_ascii_uppercase(), upper);
        assert_eq!(lower.len(), 36);
        assert_eq!(lower.matches('-').count(), 4);
        assert!(is_guid_pseudonym(&lower) && is_guid_pseudonym(&upper));
        assert!(!is_guid_pseudonym("3f2b8a4e-1c2d-4e5f-8a9b-0c1d2e3f4a5b"));
    }

    #[test]
    fn phones_keep_their_format() {
        let key = key();
        let made = phone(&key, "+1 (425) 555-0100");
        assert_eq!(made.len(), "+1 (425) 555-0100".len());
        assert!(made.starts_with("+") && &made[2..4] == " (" && made.as_bytes()[12] == b'-', "{made}");
        assert!(made.as_bytes()[1] != b'0', "{made}");
        assert!(is_phone_pseudonym(&made), "{made}");
    }

    #[test]
    fn addresses_go_to_one_keyed_example_domain_per_domain() {
        let key = key();
        let first = email(&key, "aleksander.brightwater@contoso.com");
        let second = email(&key, "Mia.Ng@Contoso.com");
        let (_, a) = first.split_once('@').unwrap();
        let (_, b) = second.split_once('@').unwrap();
        assert_eq!(a.to_ascii_lowercase(), b.to_ascii_lowercase());
        assert!(a.ends_with(".example") && !a.contains("contoso"), "{first}");
        assert!(first.starts_with(&word(&key, "aleksander")), "{first}");
        assert!(is_reserved_domain(a) && is_reserved_domain("mail.example.com"));
        assert!(!is_reserved_domain("contoso.com") && !is_reserved_domain("myexample.com"));
    }

    #[test]
    fn another_key_gives_other_pseudonyms() {
        let other = Key::from_text("another key, for the same values").unwrap();
        assert_ne!(word(&key(), "aleksander"), word(&other, "aleksander"));
        assert_ne!(
            guid(&key(), "3f2b8a4e-1c2d-4e5f-8a9b-0c1d2e3f4a5b"),
            guid(&other, "3f2b8a4e-1c2d-4e5f-8a9b-0c1d2e3f4a5b")
        );
    }
}
