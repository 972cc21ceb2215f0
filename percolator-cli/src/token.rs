//! Where the server's token comes from, for `serve` and for the commands that go through a
//! server: `--token-file PATH`, else `PERCOLATOR_TOKEN`, else the token file `serve` keeps in the
//! database directory (made on its first start, readable only by its owner).

use std::path::Path;

use percolator_server::Token;
use percolator_server::auth::token_path;

use crate::{Cli, CliError};

/// The environment variable holding a token.
pub const TOKEN_VAR: &str = "PERCOLATOR_TOKEN";

/// The token `serve` uses: `--token-file` (made if missing), `PERCOLATOR_TOKEN`, or the one in
/// the database directory `db` (made if missing). `None` when there is no source: a store
/// without a directory and neither flag nor variable.
pub fn for_serve(cli: &Cli, db: Option<&Path>) -> Result<Option<Token>, CliError> {
    if let Some(path) = &cli.token_file {
        return Ok(Some(Token::read_or_create(path)?));
    }
    if let Some(token) = from_env()? {
        return Ok(Some(token));
    }
    Ok(match db {
        Some(db) => Some(Token::read_or_create(&token_path(db))?),
        None => None,
    })
}

/// The token a command sends to a server: `--token-file`, `PERCOLATOR_TOKEN`, or the one in the
/// database directory of the server it found there (`None` without any: reads may still work).
pub fn for_client(cli: &Cli, db: Option<&Path>) -> Result<Option<Token>, CliError> {
    if let Some(path) = &cli.token_file {
        return Ok(Some(Token::read(path)?));
    }
    if let Some(token) = from_env()? {
        return Ok(Some(token));
    }
    let Some(path) = db.map(token_path).filter(|p| p.is_file()) else {
        return Ok(None);
    };
    Ok(Some(Token::read(&path)?))
}

fn from_env() -> Result<Option<Token>, CliError> {
    match std::env::var(TOKEN_VAR) {
        Ok(text) if !text.trim().is_empty() => Ok(Some(Token::parse(&text, TOKEN_VAR)?)),
        _ => Ok(None),
    }
}
