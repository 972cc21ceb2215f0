//! Who may do what: the server's [`Token`] (a bearer credential every write and every expensive
//! request must present) and the [`Access`] policy for reads.
//!
//! The token is 256 random bits in hex. `percolator serve` keeps it in the database directory
//! ([`TOKEN_FILE`], readable only by its owner), so the CLI on the same `--db` finds it without
//! being told, as it finds the server's address ([`crate::discovery`]). Tokens are compared in
//! constant time, so the time an answer takes says nothing about how much of a guess was right.

use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

use subtle::ConstantTimeEq as _;

/// The token's file in a database directory.
pub const TOKEN_FILE: &str = "percolator-serve.token";

/// The shortest token accepted (a guessable one protects nothing).
pub const MIN_TOKEN_CHARS: usize = 16;

/// A bearer token.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(…)")
    }
}

/// A token that cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TokenError {
    /// Too short, or with whitespace or control characters in it.
    #[error("the token from {source_name} is not usable: {reason}")]
    Invalid {
        /// Where it came from (a file's path, an environment variable).
        source_name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Its file could not be read or written.
    #[error("the token file {path}: {source}")]
    File {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
}

impl Token {
    /// A new random token.
    pub fn generate() -> Self {
        let bytes: [u8; 32] = rand::random();
        Self(bytes.iter().map(|b| format!("{b:02x}")).collect())
    }

    /// A token given as text (`PERCOLATOR_TOKEN`, a file's content); `source_name` names where
    /// it came from in errors. Surrounding whitespace is ignored.
    pub fn parse(text: &str, source_name: &str) -> Result<Self, TokenError> {
        let token = text.trim();
        let invalid = |reason: String| TokenError::Invalid {
            source_name: source_name.to_owned(),
            reason,
        };
        if token.chars().count() < MIN_TOKEN_CHARS {
            return Err(invalid(format!(
                "it has {} characters; at least {MIN_TOKEN_CHARS} are needed",
                token.chars().count()
            )));
        }
        if token.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(invalid(
                "it contains whitespace or a control character".into(),
            ));
        }
        Ok(Self(token.to_owned()))
    }

    /// The token in `path`.
    pub fn read(path: &Path) -> Result<Self, TokenError> {
        let text = std::fs::read_to_string(path).map_err(|source| TokenError::File {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&text, &path.display().to_string())
    }

    /// The token in `path`, made (random) and written there first if the file does not exist.
    /// The file is readable and writable by its owner only; an existing one that others could
    /// read is narrowed to that.
    pub fn read_or_create(path: &Path) -> Result<Self, TokenError> {
        let file_error = |source| TokenError::File {
            path: path.to_owned(),
            source,
        };
        match create_private(path) {
            Ok(mut file) => {
                let token = Self::generate();
                file.write_all(token.0.as_bytes())
                    .and_then(|()| file.sync_all())
                    .map_err(file_error)?;
                Ok(token)
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                restrict_to_owner(path).map_err(file_error)?;
                Self::read(path)
            }
            Err(e) => Err(file_error(e)),
        }
    }

    /// The token as sent in `Authorization: Bearer …`.
    pub fn secret(&self) -> &str {
        &self.0
    }

    /// Whether `presented` is this token, compared in constant time.
    pub fn matches(&self, presented: &[u8]) -> bool {
        self.0.as_bytes().ct_eq(presented).into()
    }
}

/// Creates `path` for writing, failing if it exists; only its owner may read it.
fn create_private(path: &Path) -> io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)
}

/// Makes `path` readable and writable by its owner only.
fn restrict_to_owner(path: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(path)?.permissions().mode();
        if mode & 0o077 != 0 {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
        }
    }
    #[cfg(not(unix))]
    let _ = path;
    Ok(())
}

/// The token's file for the database at `db`.
pub fn token_path(db: &Path) -> PathBuf {
    db.join(TOKEN_FILE)
}

/// Who may read (search, status, metrics, the search page). Writes and expensive requests
/// always need the token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReadAccess {
    /// Anyone who reaches the server (the default on loopback).
    Open,
    /// Only with the token.
    Token,
}

/// The server's access policy.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Access {
    /// The token writes and expensive requests present.
    pub token: Token,
    /// Who may read.
    pub reads: ReadAccess,
    /// Names (host or host:port) requests may be addressed to besides the listen address,
    /// `localhost` and the loopback addresses (the `Host` check that stops DNS rebinding).
    pub allowed_hosts: Vec<String>,
}

impl Access {
    /// Writes with `token`; reads open.
    pub fn new(token: Token) -> Self {
        Self {
            token,
            reads: ReadAccess::Open,
            allowed_hosts: Vec::new(),
        }
    }

    /// With this read access.
    pub fn with_reads(mut self, reads: ReadAccess) -> Self {
        self.reads = reads;
        self
    }

    /// Also answering requests addressed to `host` (a name or address, with or without a port).
    pub fn with_allowed_host(mut self, host: impl Into<String>) -> Self {
        self.allowed_hosts.push(host.into());
        self
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn tokens_are_random_long_and_compared_whole() {
        let (a, b) = (Token::generate(), Token::generate());
        assert_ne!(a, b);
        assert_eq!(a.secret().len(), 64);
        assert!(a.matches(a.secret().as_bytes()));
        assert!(!a.matches(b.secret().as_bytes()));
        assert!(!a.matches(&a.secret().as_bytes()[..63]));
        assert!(!a.matches(b""));
        assert!(Token::parse("short", "test").is_err());
        assert!(Token::parse("has a space in it, long enough", "test").is_err());
        assert_eq!(
            Token::parse("  0123456789abcdef\n", "test")
                .unwrap()
                .secret(),
            "0123456789abcdef"
        );
    }

    #[test]
    fn the_token_file_is_made_once_and_private() {
        let dir = tempfile::tempdir().unwrap();
        let path = token_path(dir.path());
        let made = Token::read_or_create(&path).unwrap();
        assert_eq!(Token::read_or_create(&path).unwrap(), made);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
            Token::read_or_create(&path).unwrap();
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600, "a readable token file is narrowed");
        }
        std::fs::write(&path, "x").unwrap();
        let err = Token::read_or_create(&path).unwrap_err().to_string();
        assert!(err.contains(&path.display().to_string()), "{err}");
    }
}
