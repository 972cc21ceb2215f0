//! The one check every page URL passes before the pipeline stores it: [`normalize`].
//!
//! A stored URL is a row key (`documents`), part of column names (`links`' `from:<URL>`), the
//! link a search result shows and what a browser opens from the search page. So only absolute
//! `http` and `https` URLs with a host are accepted; `javascript:`, `data:` and `file:` URLs,
//! relative references and anything carrying a control character are refused, with the reason
//! ([`BadUrl`]). Every loader goes through it: [`crate::load`] (the API and the CLI), the
//! directory source ([`crate::sources::html_files`]) and WARC files ([`crate::warc`]).
//!
//! An accepted URL is stored in the `url` crate's serialization (the WHATWG URL Standard's):
//! lowercase scheme and host, no default port, `.` and `..` segments resolved, non-ASCII
//! percent-encoded (paths, queries) or punycoded (hosts), so the result is ASCII. The fragment
//! (`#…`) is dropped: it is not part of a page's identity. That is the form
//! [`crate::html::parse_page`] gives the links and canonicals it resolves (`Url::join`, then the
//! fragment dropped), so a link names a page by the very key the page is stored under.

use std::fmt;

use ::url::Url;

use crate::schema::MAX_URL_BYTES;

/// The most characters of a refused URL a [`BadUrl`] keeps to show it.
pub const SHOWN_CHARS: usize = 200;

/// The most characters of a refused scheme [`Reason::Scheme`] keeps.
const SHOWN_SCHEME_CHARS: usize = 32;

/// A URL the pipeline refuses: the URL (escaped, cut to [`SHOWN_CHARS`]) and why.
///
/// Its message is `bad URL "<url>": <reason>`, e.g.
/// `bad URL "javascript:alert(1)//": not http or https: javascript`. The URL in it is escaped as
/// [`str::escape_debug`] escapes (control characters as `\u{1b}`, `\n`…, quotes and backslashes
/// with a backslash) and bidirectional-text controls as `\u{202e}`, so the message is safe to
/// print on a terminal or in a log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
#[error("bad URL \"{shown}\": {reason}")]
pub struct BadUrl {
    shown: String,
    reason: Reason,
}

impl BadUrl {
    fn new(raw: &str, reason: Reason) -> Self {
        Self {
            shown: shown(raw),
            reason,
        }
    }

    /// Why the URL was refused.
    pub fn reason(&self) -> &Reason {
        &self.reason
    }

    /// The refused URL as the message shows it: escaped (see [`BadUrl`]) and cut to
    /// [`SHOWN_CHARS`] characters (`…` marks a cut).
    pub fn shown_url(&self) -> &str {
        &self.shown
    }
}

/// Why [`normalize`] refused a URL.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Reason {
    /// The empty string (or only spaces).
    Empty,
    /// A control character (C0 U+0000–U+001F, DEL U+007F or C1 U+0080–U+009F) at this byte
    /// offset of the URL as given. Checked before parsing: a URL parser silently drops tabs and
    /// newlines, which would hide them.
    ControlCharacter(usize),
    /// Longer than [`MAX_URL_BYTES`], as given or once normalized (percent-encoding lengthens
    /// non-ASCII text).
    TooLong,
    /// No scheme: a relative reference (`/path`, `../x`, `page.html`).
    NotAbsolute,
    /// A scheme other than `http` and `https` (lowercased, at most 32 characters).
    Scheme(String),
    /// No `//host` after the scheme (`http:x`, `http:///x`, `http:\\x`), or an empty host.
    NoHost,
    /// The URL parser refused it (`invalid port number`, `invalid IPv6 address`, …).
    Invalid(String),
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Empty => f.write_str("empty"),
            Reason::ControlCharacter(at) => write!(f, "control character at byte {at}"),
            Reason::TooLong => write!(f, "longer than MAX_URL_BYTES ({MAX_URL_BYTES} bytes)"),
            Reason::NotAbsolute => f.write_str("not absolute"),
            Reason::Scheme(scheme) => write!(f, "not http or https: {scheme}"),
            Reason::NoHost => f.write_str("no host"),
            Reason::Invalid(why) => write!(f, "invalid: {why}"),
        }
    }
}

/// The URL the pipeline stores for `raw`, or why it is refused (see the module docs).
///
/// Refused, in this order: a control character anywhere in `raw` ([`Reason::ControlCharacter`]),
/// more than [`MAX_URL_BYTES`] bytes ([`Reason::TooLong`]), nothing but spaces
/// ([`Reason::Empty`]), no scheme ([`Reason::NotAbsolute`]), a scheme other than `http` and
/// `https` ([`Reason::Scheme`]), no `//` and a host after it ([`Reason::NoHost`]), what the URL
/// parser refuses ([`Reason::Invalid`]), and a normalized URL longer than [`MAX_URL_BYTES`].
/// Leading and trailing spaces are ignored (as the parser ignores them).
///
/// ```
/// use percolator_webindex::url::{Reason, normalize};
///
/// assert_eq!(
///     normalize("HTTP://Example.COM:80/a/../b#frag").as_deref(),
///     Ok("http://example.com/b")
/// );
/// let refused = normalize("javascript:alert(1)//").unwrap_err();
/// assert_eq!(refused.reason(), &Reason::Scheme("javascript".into()));
/// assert_eq!(
///     refused.to_string(),
///     "bad URL \"javascript:alert(1)//\": not http or https: javascript"
/// );
/// ```
///
/// # Errors
/// [`BadUrl`], naming the URL and the [`Reason`].
pub fn normalize(raw: &str) -> Result<String, BadUrl> {
    if let Some((at, _)) = raw.char_indices().find(|&(_, c)| c.is_control()) {
        return refuse(raw, Reason::ControlCharacter(at));
    }
    if raw.len() > MAX_URL_BYTES {
        return refuse(raw, Reason::TooLong);
    }
    let trimmed = raw.trim_matches(' ');
    if trimmed.is_empty() {
        return refuse(raw, Reason::Empty);
    }
    let Some((scheme, rest)) = split_scheme(trimmed) else {
        return refuse(raw, Reason::NotAbsolute);
    };
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        let scheme: String = scheme.chars().take(SHOWN_SCHEME_CHARS).collect();
        return refuse(raw, Reason::Scheme(scheme.to_ascii_lowercase()));
    }
    // The parser would take `http:x`, `http:///x` and `http:\\x` for `http://x/`: a host must be
    // there, after exactly `//`.
    let has_authority = rest.strip_prefix("//").is_some_and(|after| {
        let end = after.find(['/', '\\', '?', '#']).unwrap_or(after.len());
        end > 0
    });
    if !has_authority {
        return refuse(raw, Reason::NoHost);
    }
    let mut url = match Url::parse(trimmed) {
        Ok(url) => url,
        Err(::url::ParseError::EmptyHost) => return refuse(raw, Reason::NoHost),
        Err(e) => return refuse(raw, Reason::Invalid(e.to_string())),
    };
    if !matches!(url.scheme(), "http" | "https") {
        let scheme = url.scheme().to_owned();
        return refuse(raw, Reason::Scheme(scheme));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return refuse(raw, Reason::NoHost);
    }
    url.set_fragment(None);
    let normalized = String::from(url);
    if normalized.len() > MAX_URL_BYTES {
        return refuse(raw, Reason::TooLong);
    }
    Ok(normalized)
}

fn refuse(raw: &str, reason: Reason) -> Result<String, BadUrl> {
    Err(BadUrl::new(raw, reason))
}

/// The scheme and what follows its `:`, if `url` starts with one: an ASCII letter, then
/// letters, digits, `+`, `-` or `.`, then `:` (else it is a relative reference).
fn split_scheme(url: &str) -> Option<(&str, &str)> {
    let (scheme, rest) = url.split_once(':')?;
    let mut chars = scheme.chars();
    let valid = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    valid.then_some((scheme, rest))
}

/// Whether `c` is a bidirectional-text control (it reorders what a terminal or a browser shows
/// around it).
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}')
        || ('\u{202a}'..='\u{202e}').contains(&c)
        || ('\u{2066}'..='\u{2069}').contains(&c)
}

/// `raw` escaped for messages and cut to [`SHOWN_CHARS`] characters (see [`BadUrl`]).
fn shown(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len().min(4 * SHOWN_CHARS));
    for (i, c) in raw.chars().enumerate() {
        if i == SHOWN_CHARS {
            out.push('…');
            break;
        }
        if is_bidi_control(c) {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            out.extend(c.escape_debug());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(raw: &str) -> Reason {
        match normalize(raw) {
            Ok(url) => panic!("{raw:?} accepted as {url:?}"),
            Err(e) => e.reason().clone(),
        }
    }

    #[test]
    fn refused_urls_name_the_reason() {
        let scheme = |s: &str| Reason::Scheme(s.to_owned());
        let long = format!("http://x.example/{}", "a".repeat(MAX_URL_BYTES));
        // Short as given, but each `é` is 6 bytes percent-encoded.
        let long_encoded = format!("http://x.example/{}", "é".repeat(400));
        let cases = [
            ("javascript:alert(document.domain)//x", scheme("javascript")),
            ("JavaScript:alert(document.domain)//x", scheme("javascript")),
            (" javascript:alert(1)", scheme("javascript")),
            ("data:text/html,<script>alert(1)</script>", scheme("data")),
            ("file:///etc/passwd", scheme("file")),
            ("ftp://x/", scheme("ftp")),
            ("mailto:someone@example.org", scheme("mailto")),
            ("c:\\windows\\system32", scheme("c")),
            ("../../etc/passwd", Reason::NotAbsolute),
            ("/relative", Reason::NotAbsolute),
            ("page.html", Reason::NotAbsolute),
            ("1http://x/", Reason::NotAbsolute),
            ("//host.example/x", Reason::NotAbsolute),
            ("http://a/b\nc", Reason::ControlCharacter(10)),
            ("http://a/b\0", Reason::ControlCharacter(10)),
            ("http://a/\u{85}", Reason::ControlCharacter(9)),
            ("\thttp://a/", Reason::ControlCharacter(0)),
            ("http://a/\r\n", Reason::ControlCharacter(9)),
            ("http://a/\u{7f}", Reason::ControlCharacter(9)),
            ("http://a/\u{1b}[31m", Reason::ControlCharacter(9)),
            ("http:///nohost", Reason::NoHost),
            ("http:nohost", Reason::NoHost),
            ("https:/x", Reason::NoHost),
            ("http:\\\\evil.example\\", Reason::NoHost),
            ("http://\\evil.example/", Reason::NoHost),
            ("http://?q", Reason::NoHost),
            ("http://user@/x", Reason::NoHost),
            ("", Reason::Empty),
            ("   ", Reason::Empty),
            (long.as_str(), Reason::TooLong),
            (long_encoded.as_str(), Reason::TooLong),
        ];
        for (raw, expected) in cases {
            assert_eq!(reason(raw), expected, "{raw:?}");
        }
        assert!(
            matches!(reason("http://x.example:99999/"), Reason::Invalid(why) if why.contains("port"))
        );
        assert!(matches!(reason("http://[::1/"), Reason::Invalid(_)));
    }

    #[test]
    fn accepted_urls_are_normalized() {
        let cases = [
            ("HTTP://Example.COM:80/a/../b#frag", "http://example.com/b"),
            ("https://example.com", "https://example.com/"),
            (
                "https://example.com:443/x?q=1#top",
                "https://example.com/x?q=1",
            ),
            (
                "http://example.com:8080/./a/b/../c",
                "http://example.com:8080/a/c",
            ),
            ("  http://example.com/a b  ", "http://example.com/a%20b"),
            (
                "http://x.example/\u{202e}txt",
                "http://x.example/%E2%80%AEtxt",
            ),
            (
                "http://x.example/caf\u{e9}?q=cr\u{e8}me",
                "http://x.example/caf%C3%A9?q=cr%C3%A8me",
            ),
        ];
        for (raw, expected) in cases {
            let url = normalize(raw).unwrap();
            assert_eq!(url, expected, "{raw:?}");
            assert_eq!(
                normalize(&url).as_deref(),
                Ok(expected),
                "idempotent: {url}"
            );
        }
        let idn = normalize("http://Bücher.example/").unwrap();
        assert!(idn.starts_with("http://xn--") && idn.is_ascii(), "{idn}");
        let longest = format!("http://x.example/{}", "a".repeat(MAX_URL_BYTES - 17));
        assert_eq!(normalize(&longest).unwrap().len(), MAX_URL_BYTES);
    }

    #[test]
    fn messages_escape_and_cut_the_url() {
        let err = normalize("javascript:alert(1)\u{1b}[31m").unwrap_err();
        assert_eq!(
            err.to_string(),
            "bad URL \"javascript:alert(1)\\u{1b}[31m\": control character at byte 19"
        );
        let err = normalize("ftp://x/\u{202e}\"q\"\n").unwrap_err();
        assert_eq!(err.reason(), &Reason::ControlCharacter(14));
        assert_eq!(err.shown_url(), "ftp://x/\\u{202e}\\\"q\\\"\\n");
        let err = normalize(&format!("gopher://x/{}", "a".repeat(5000))).unwrap_err();
        assert_eq!(err.reason(), &Reason::TooLong);
        assert_eq!(err.shown_url().chars().count(), SHOWN_CHARS + 1);
        assert!(err.shown_url().ends_with('…'));
        assert_eq!(
            normalize("http://a/").map_err(|e| e.to_string()),
            Ok("http://a/".to_owned())
        );
    }
}
