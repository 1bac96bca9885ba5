//! The pseudonyms' key: from a variable (`MCP_TAPE_PSEUDONYM_KEY`, or the
//! one `key_env` names), else made once and kept in the user's
//! configuration directory, readable by the user alone. A value's
//! pseudonym is HMAC-SHA256 of the value under the key; what a cassette
//! says of the key is its fingerprint, never the key.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::error::Error;
use crate::os;

/// The variable the key is read from unless `key_env` names another.
pub const KEY_VARIABLE: &str = "MCP_TAPE_PSEUDONYM_KEY";

/// The fewest characters a key given as text may have.
const MIN_KEY_CHARS: usize = 16;

/// SHA-256's block, in bytes (HMAC pads the key to it).
const BLOCK: usize = 64;

impl std::fmt::Display for KeySource {
    /// Where the key came from, as a run says it: `from NAME`, or `kept in
    /// PATH` (with a word on keeping it when it was made now).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeySource::Variable(name) => write!(f, "from {name}"),
            KeySource::File { path, made } => {
                write!(f, "kept in {}", crate::util::printable(&path.display().to_string()))?;
                if *made {
                    f.write_str(" (made now: keep it to give the same people the same pseudonyms again)")?;
                }
                Ok(())
            }
        }
    }
}

/// A key of 32 bytes.
#[derive(Clone)]
pub struct Key([u8; 32]);

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Key({})", self.fingerprint())
    }
}

/// Where the key of a run came from, for the run to say.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeySource {
    /// The variable of this name.
    Variable(String),
    /// This file, made by this run or kept from an earlier one.
    File { path: PathBuf, made: bool },
}

impl Key {
    /// The key `text` stands for: 64 hex digits are the key itself; any
    /// other text of at least 16 characters is hashed into one.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] for text shorter than that.
    pub fn from_text(text: &str) -> Result<Key, Error> {
        let text = text.trim();
        if let Some(bytes) = from_hex(text) {
            return Ok(Key(bytes));
        }
        if text.chars().count() < MIN_KEY_CHARS {
            return Err(Error::Config(format!(
                "a pseudonym key needs {MIN_KEY_CHARS} characters or more (or 64 hex digits); this one has {}",
                text.chars().count()
            )));
        }
        Ok(Key(Sha256::new().chain_update(b"mcp-tape pseudonym key\0").chain_update(text).finalize().into()))
    }

    /// The key of `variable` (the default's when `None`), else the one kept
    /// in the user's configuration directory, made now if there is none.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] for a key that is too short, or a key file that
    /// cannot be read or made.
    pub fn find(variable: Option<&str>) -> Result<(Key, KeySource), Error> {
        if let Some(found) = Key::given(variable)? {
            return Ok(found);
        }
        let variable = variable.unwrap_or(KEY_VARIABLE);
        let path = kept_path().ok_or_else(|| {
            Error::Config(format!("no configuration directory to keep a pseudonym key in: set {variable}"))
        })?;
        Key::kept(&path)
    }

    /// The key of `variable` (the default's when `None`), else the one kept
    /// in the user's configuration directory if there is one; none is made.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] for a key that is too short, or a key file that
    /// cannot be read.
    pub fn given(variable: Option<&str>) -> Result<Option<(Key, KeySource)>, Error> {
        let variable = variable.unwrap_or(KEY_VARIABLE);
        if let Some(text) = std::env::var_os(variable) {
            let text = text.into_string().map_err(|_| Error::Config(format!("{variable} is not UTF-8")))?;
            return Ok(Some((Key::from_text(&text)?, KeySource::Variable(variable.to_owned()))));
        }
        match kept_path().filter(|path| path.is_file()) {
            Some(path) => Key::kept(&path).map(Some),
            None => Ok(None),
        }
    }

    /// The key kept at `path`, made there first if there is none.
    fn kept(path: &Path) -> Result<(Key, KeySource), Error> {
        let unreadable = |e: std::io::Error| Error::Config(format!("pseudonym key {}: {e}", path.display()));
        match std::fs::read_to_string(path) {
            Ok(text) => {
                let key = from_hex(text.trim()).map(Key).ok_or_else(|| {
                    Error::Config(format!("pseudonym key {}: not 64 hex digits", path.display()))
                })?;
                Ok((key, KeySource::File { path: path.to_owned(), made: false }))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let mut bytes = [0u8; 32];
                getrandom::fill(&mut bytes).map_err(|e| Error::Config(format!("no random source: {e}")))?;
                let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir).map_err(unreadable)?;
                }
                match os::create_private(path, format!("{hex}\n").as_bytes()) {
                    Ok(()) => Ok((Key(bytes), KeySource::File { path: path.to_owned(), made: true })),
                    // Another run made it first: that one is the key.
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Key::kept(path),
                    Err(e) => Err(unreadable(e)),
                }
            }
            Err(e) => Err(unreadable(e)),
        }
    }

    /// HMAC-SHA256 under the key of `kind` and `value`, each told apart.
    pub(super) fn hash(&self, kind: &str, value: &str) -> [u8; 32] {
        let mut message = Vec::with_capacity(kind.len() + value.len() + 1);
        message.extend_from_slice(kind.as_bytes());
        message.push(0);
        message.extend_from_slice(value.as_bytes());
        hmac(&self.0, &message)
    }

    /// What a cassette and a run may say of the key: eight hex digits of
    /// its hash, which tell two keys apart and give nothing of either.
    pub fn fingerprint(&self) -> String {
        let hash = Sha256::new().chain_update(b"mcp-tape key fingerprint\0").chain_update(self.0).finalize();
        hash[..4].iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// Where the key is kept in the user's configuration directory.
fn kept_path() -> Option<PathBuf> {
    os::config_dir().map(|dir| dir.join("mcp-tape").join("pseudonym.key"))
}

/// 32 bytes from 64 hex digits.
fn from_hex(text: &str) -> Option<[u8; 32]> {
    if text.len() != 64 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let mut bytes = [0u8; 32];
    for (i, byte) in bytes.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(bytes)
}

/// HMAC-SHA256 (RFC 2104) of `message` under `key` (at most a block long).
fn hmac(key: &[u8], message: &[u8]) -> [u8; 32] {
    let (mut inner, mut outer) = ([0x36u8; BLOCK], [0x5cu8; BLOCK]);
    for (i, byte) in key.iter().take(BLOCK).enumerate() {
        inner[i] ^= byte;
        outer[i] ^= byte;
    }
    let inner = Sha256::new().chain_update(inner).chain_update(message).finalize();
    Sha256::new().chain_update(outer).chain_update(inner).finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 4231's first two test cases.
    #[test]
    fn hmac_is_rfc_4231s() {
        let hex = |bytes: [u8; 32]| bytes.iter().map(|b| format!("{b:02x}")).collect::<String>();
        assert_eq!(
            hex(hmac(&[0x0b; 20], b"Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
        );
        assert_eq!(
            hex(hmac(b"Jefe", b"what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn a_key_is_hex_or_long_text() {
        let hex = "00".repeat(32);
        assert_eq!(Key::from_text(&hex).unwrap().0, [0; 32]);
        assert!(Key::from_text("short").unwrap_err().to_string().contains("16 characters"));
        let a = Key::from_text("a sixteen-character key").unwrap();
        assert_eq!(a.fingerprint().len(), 8);
        assert_ne!(a.fingerprint(), Key::from_text(&hex).unwrap().fingerprint());
    }

    #[test]
    fn a_kept_key_is_made_once() {
        let dir = std::env::temp_dir().join(format!("mcp-tape-key-{}", std::process::id()));
        let path = dir.join("mcp-tape").join("pseudonym.key");
        let _ = std::fs::remove_dir_all(&dir);
        let (made, source) = Key::kept(&path).unwrap();
        assert_eq!(source, KeySource::File { path: path.clone(), made: true });
        let (kept, source) = Key::kept(&path).unwrap();
        assert_eq!(source, KeySource::File { path: path.clone(), made: false });
        assert_eq!(made.0, kept.0);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
