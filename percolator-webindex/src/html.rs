//! Turns a crawled page into what the indexer needs: title, term statistics,
//! outgoing links and a content hash.
//!
//! Parsing uses a real HTML5 parser (`scraper`, i.e. html5ever), so malformed
//! markup is recovered the way browsers recover it. The content hash covers
//! only the page's visible text, so mirrors of a page that differ only in
//! their link URLs hash equal — that is how the pipeline detects duplicates.
//! Nothing here panics, whatever the input bytes.

use std::collections::HashSet;

use scraper::{Html, Node};
use url::Url;
use xxhash_rust::xxh3::xxh3_128;

use crate::terms::PageTerms;

/// The most links [`parse_page`] keeps per page.
pub const MAX_LINKS: usize = 100;
/// The longest anchor text (in chars) [`parse_page`] keeps per link.
pub const MAX_ANCHOR_CHARS: usize = 200;
/// The most visible body text (in chars) [`parse_page`] indexes per page: pages are parsed
/// whole (up to 16 MiB of HTML: see [`crate::raw`]), and this bounds what one page adds to the
/// index and its hash instead. 4 Mi chars hold the text of every page of the Rust
/// toolchain's docs, the largest 8 MiB of HTML.
pub const MAX_TEXT_CHARS: usize = 4 * 1024 * 1024;
/// The longest title (in chars) [`parse_page`] keeps.
pub const MAX_TITLE_CHARS: usize = 1024;

/// One outgoing link of a page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// The absolute target URL, without fragment.
    pub target: String,
    /// The link's text, whitespace-collapsed, at most [`MAX_ANCHOR_CHARS`] chars.
    pub anchor: String,
}

/// What the indexer extracts from one page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedPage {
    /// The text of `<title>`, whitespace-collapsed (empty when there is none), at most
    /// [`MAX_TITLE_CHARS`] chars.
    pub title: String,
    /// Every distinct term of the title and the body, with counts (see [`PageTerms::of`]).
    pub terms: PageTerms,
    /// Outgoing links in document order, distinct targets, at most [`MAX_LINKS`].
    pub links: Vec<Link>,
    /// 32 lowercase hex digits of the XXH3-128 hash of the visible text.
    pub content_hash: String,
    /// The URL the first `<link rel="canonical" href>` declares (resolved like a link, fragment
    /// dropped; the page's own URL counts too), if any.
    pub canonical: Option<String>,
}

/// Parses one page fetched from `base_url`.
///
/// Invalid UTF-8 is decoded lossily. The visible text is the title followed by
/// the text of `<body>` without the contents of `<script>`, `<style>` and
/// `<noscript>`, whitespace-collapsed; block-level element boundaries count as
/// whitespace (so `<p>a</p><p>b</p>` reads `a b`, `a<b>b</b>` reads `ab`).
///
/// Links come from every `<a href>`: the href is resolved against `base_url`,
/// its fragment dropped; only `http` and `https` targets are kept (the only URLs pages are
/// stored under: see [`crate::url::normalize`], whose form the resolved targets have), and
/// neither links to the page itself nor unparseable ones. When `base_url` does
/// not parse only absolute hrefs are kept. The first anchor text seen for a
/// target wins.
pub fn parse_page(base_url: &str, html: &[u8]) -> ParsedPage {
    walk(base_url, html).finish()
}

/// A page's visible text as [`parse_page`] reads it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PageText {
    /// The title, whitespace-collapsed.
    pub title: String,
    /// The body's visible text, whitespace-collapsed.
    pub body: String,
}

/// The title and visible body text of a page (for snippets).
pub fn page_text(html: &[u8]) -> PageText {
    let walker = walk("", html);
    PageText {
        title: walker.title.into_string(),
        body: walker.body_text.into_string(),
    }
}

/// One pass over the parsed document.
fn walk(base_url: &str, html: &[u8]) -> Walker {
    let source = decode_html(html);
    let document = Html::parse_document(&source);
    let mut walker = Walker::new(base_url);

    // Iterative depth-first walk (no recursion: nesting depth is unbounded).
    let root = document.tree.root();
    let mut node = root;
    'walk: loop {
        walker.open(node.value());
        if let Some(child) = node.first_child() {
            node = child;
            continue;
        }
        loop {
            walker.close(node.value());
            if node == root {
                break 'walk;
            }
            if let Some(sibling) = node.next_sibling() {
                node = sibling;
                break;
            }
            match node.parent() {
                Some(parent) => node = parent,
                None => break 'walk,
            }
        }
    }
    walker
}

/// How far into a page a `<meta charset>` declaration is looked for (as browsers do).
const CHARSET_PRESCAN_BYTES: usize = 1024;

/// The text of a page in its character encoding: a byte-order mark, else the `charset` a
/// `<meta>` declares in the first 1 KiB, else UTF-8 if the bytes are valid UTF-8, else the
/// encoding `chardetng` detects (ISO-8859-1, Windows-1252, Shift_JIS, ...). Undecodable bytes
/// become U+FFFD.
pub fn decode_html(html: &[u8]) -> std::borrow::Cow<'_, str> {
    let encoding = encoding_rs::Encoding::for_bom(html)
        .map(|(encoding, _)| encoding)
        .or_else(|| declared_charset(&html[..html.len().min(CHARSET_PRESCAN_BYTES)]))
        .unwrap_or_else(|| {
            if std::str::from_utf8(html).is_ok() {
                encoding_rs::UTF_8
            } else {
                let mut detector = chardetng::EncodingDetector::new();
                detector.feed(html, true);
                detector.guess(None, true)
            }
        });
    // A page declaring UTF-16 in ASCII-compatible bytes is not UTF-16 (the HTML standard).
    let encoding = encoding.output_encoding();
    encoding.decode_with_bom_removal(html).0
}

/// The encoding named by `charset=` in `head` (a `<meta charset>` or `http-equiv` content).
fn declared_charset(head: &[u8]) -> Option<&'static encoding_rs::Encoding> {
    let lower = head.to_ascii_lowercase();
    let mut from = 0;
    while let Some(at) = find(&lower[from..], b"charset") {
        let mut i = from + at + b"charset".len();
        from = i;
        while lower.get(i).is_some_and(u8::is_ascii_whitespace) {
            i += 1;
        }
        if lower.get(i) != Some(&b'=') {
            continue;
        }
        i += 1;
        while lower
            .get(i)
            .is_some_and(|b| b.is_ascii_whitespace() || *b == b'"' || *b == b'\'')
        {
            i += 1;
        }
        let end = lower[i..]
            .iter()
            .position(|b| !(b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b':' | b'.')))
            .map_or(lower.len(), |n| i + n);
        if let Some(encoding) = encoding_rs::Encoding::for_label(&lower[i..end]) {
            return Some(encoding);
        }
    }
    None
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The normalized visible text's hash, as 32 lowercase hex digits.
fn content_hash(visible_text: &str) -> String {
    format!("{:032x}", xxh3_128(visible_text.as_bytes()))
}

/// Elements whose text is never visible.
fn is_hidden(name: &str) -> bool {
    matches!(name, "script" | "style" | "noscript" | "template")
}

/// Phrasing elements: their boundaries do not separate words.
fn is_inline(name: &str) -> bool {
    matches!(
        name,
        "a" | "abbr"
            | "acronym"
            | "b"
            | "bdi"
            | "bdo"
            | "big"
            | "cite"
            | "code"
            | "data"
            | "del"
            | "dfn"
            | "em"
            | "font"
            | "i"
            | "ins"
            | "kbd"
            | "label"
            | "mark"
            | "q"
            | "s"
            | "samp"
            | "small"
            | "span"
            | "strike"
            | "strong"
            | "sub"
            | "sup"
            | "time"
            | "tt"
            | "u"
            | "var"
    )
}

/// A string built with whitespace collapsed on the fly, optionally capped at a
/// number of chars.
#[derive(Debug, Default)]
struct TextBuf {
    text: String,
    chars: usize,
    limit: Option<usize>,
    pending_space: bool,
}

impl TextBuf {
    fn with_limit(limit: usize) -> Self {
        Self {
            limit: Some(limit),
            ..Self::default()
        }
    }

    /// Marks a word boundary: the next text starts after a space.
    fn boundary(&mut self) {
        self.pending_space = true;
    }

    fn push(&mut self, text: &str) {
        // Word by word: a page's text is mostly words that fit, appended whole.
        for (i, word) in text.split(char::is_whitespace).enumerate() {
            if i > 0 {
                self.pending_space = true;
            }
            if word.is_empty() {
                continue;
            }
            let space = self.pending_space && !self.text.is_empty();
            let chars = if word.is_ascii() {
                word.len()
            } else {
                word.chars().count()
            };
            if self
                .limit
                .is_some_and(|limit| self.chars + chars + usize::from(space) > limit)
            {
                // Full within this word: as much of it as fits, then nothing more.
                self.push_chars(word);
                return;
            }
            if space {
                self.text.push(' ');
            }
            self.pending_space = false;
            self.text.push_str(word);
            self.chars += chars + usize::from(space);
        }
    }

    /// Appends `word` (no whitespace) char by char until the limit is reached.
    fn push_chars(&mut self, word: &str) {
        for c in word.chars() {
            let space = self.pending_space && !self.text.is_empty();
            let needed = if space { 2 } else { 1 };
            if self.limit.is_some_and(|limit| self.chars + needed > limit) {
                // Full: a space that no char can follow is not kept either.
                return;
            }
            if space {
                self.text.push(' ');
            }
            self.pending_space = false;
            self.text.push(c);
            self.chars += needed;
        }
    }

    fn into_string(self) -> String {
        self.text
    }
}

/// State of the single pass over the document tree.
struct Walker {
    /// The page's own URL (fragment removed), when it parses.
    base: Option<Url>,
    /// Depth inside hidden elements (`script`, `style`, ...).
    hidden: usize,
    /// Depth inside `<body>`.
    body: usize,
    /// Depth inside the first `<title>`.
    in_title: usize,
    title_done: bool,
    title: TextBuf,
    body_text: TextBuf,
    /// For each open `<a>`: the index of its entry in `links`, if it got one.
    open_anchors: Vec<Option<usize>>,
    links: Vec<(String, TextBuf)>,
    seen_targets: HashSet<String>,
    canonical: Option<Url>,
}

impl Walker {
    fn new(base_url: &str) -> Self {
        let base = Url::parse(base_url).ok().map(|mut url| {
            url.set_fragment(None);
            url
        });
        Self {
            base,
            hidden: 0,
            body: 0,
            in_title: 0,
            title_done: false,
            title: TextBuf::with_limit(MAX_TITLE_CHARS),
            body_text: TextBuf::with_limit(MAX_TEXT_CHARS),
            open_anchors: Vec::new(),
            links: Vec::new(),
            seen_targets: HashSet::new(),
            canonical: None,
        }
    }

    fn open(&mut self, node: &Node) {
        match node {
            Node::Element(element) => {
                let name = element.name();
                if is_hidden(name) {
                    self.hidden += 1;
                }
                match name {
                    "body" => self.body += 1,
                    "title" if !self.title_done => self.in_title += 1,
                    "a" => {
                        let entry = element.attr("href").and_then(|href| self.add_link(href));
                        self.open_anchors.push(entry);
                    }
                    "link" if self.canonical.is_none() => {
                        let is_canonical = element.attr("rel").is_some_and(|rel| {
                            rel.split_ascii_whitespace()
                                .any(|t| t.eq_ignore_ascii_case("canonical"))
                        });
                        if is_canonical {
                            self.canonical = element.attr("href").and_then(|h| self.resolve(h));
                        }
                    }
                    _ => {}
                }
                if !is_inline(name) {
                    self.boundary();
                }
            }
            Node::Text(text) if self.hidden == 0 => {
                if self.in_title > 0 {
                    self.title.push(text);
                }
                if self.body > 0 {
                    self.body_text.push(text);
                }
                for &index in self.open_anchors.iter().flatten() {
                    if let Some((_, anchor)) = self.links.get_mut(index) {
                        anchor.push(text);
                    }
                }
            }
            _ => {}
        }
    }

    fn close(&mut self, node: &Node) {
        if let Node::Element(element) = node {
            let name = element.name();
            if is_hidden(name) {
                self.hidden = self.hidden.saturating_sub(1);
            }
            match name {
                "body" => self.body = self.body.saturating_sub(1),
                "title" if self.in_title > 0 => {
                    self.in_title -= 1;
                    self.title_done = self.in_title == 0;
                }
                "a" => {
                    self.open_anchors.pop();
                }
                _ => {}
            }
            if !is_inline(name) {
                self.boundary();
            }
        }
    }

    fn boundary(&mut self) {
        self.title.boundary();
        self.body_text.boundary();
        for &index in self.open_anchors.iter().flatten() {
            if let Some((_, anchor)) = self.links.get_mut(index) {
                anchor.boundary();
            }
        }
    }

    /// `href` resolved against the page's URL, without fragment, if it is an `http` or `https`
    /// URL (as [`crate::url::normalize`] would store it).
    fn resolve(&self, href: &str) -> Option<Url> {
        let mut target = match &self.base {
            Some(base) => base.join(href),
            None => Url::parse(href),
        }
        .ok()?;
        if !matches!(target.scheme(), "http" | "https") || target.host_str().is_none() {
            return None;
        }
        target.set_fragment(None);
        Some(target)
    }

    /// Records a link to `href` if it is kept; returns its index in `links`.
    fn add_link(&mut self, href: &str) -> Option<usize> {
        if self.links.len() >= MAX_LINKS {
            return None;
        }
        let target = self.resolve(href)?;
        if self.base.as_ref() == Some(&target) {
            return None;
        }
        let target = String::from(target);
        if !self.seen_targets.insert(target.clone()) {
            return None;
        }
        self.links
            .push((target, TextBuf::with_limit(MAX_ANCHOR_CHARS)));
        Some(self.links.len() - 1)
    }

    fn finish(self) -> ParsedPage {
        let title = self.title.into_string();
        let body = self.body_text.into_string();
        let terms = PageTerms::of(&title, &body);
        let visible = match (title.is_empty(), body.is_empty()) {
            (_, true) => title.clone(),
            (true, false) => body,
            (false, false) => format!("{title} {body}"),
        };
        ParsedPage {
            terms,
            content_hash: content_hash(&visible),
            links: self
                .links
                .into_iter()
                .map(|(target, anchor)| Link {
                    target,
                    anchor: anchor.into_string(),
                })
                .collect(),
            title,
            canonical: self.canonical.map(String::from),
        }
    }
}

#[cfg(test)]
mod tests {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::terms::distinct_terms;

    #[test]
    fn text_buffer_appends_what_a_char_by_char_buffer_does() {
        // The reference: every char in turn, whitespace collapsed, capped at `limit` chars.
        fn reference(pieces: &[&str], limit: Option<usize>) -> String {
            let (mut text, mut chars, mut pending) = (String::new(), 0usize, false);
            'pieces: for piece in pieces {
                for c in piece.chars() {
                    if c.is_whitespace() {
                        pending = true;
                        continue;
                    }
                    let space = pending && !text.is_empty();
                    let needed = 1 + usize::from(space);
                    if limit.is_some_and(|l| chars + needed > l) {
                        continue 'pieces;
                    }
                    if space {
                        text.push(' ');
                    }
                    pending = false;
                    text.push(c);
                    chars += needed;
                }
            }
            text
        }
        const PARTS: &[&str] = &[
            "ab", " ", "\n\t", "é", "東京", "x y", "\u{a0}", "🦀", "word ",
        ];
        let mut rng = StdRng::seed_from_u64(11);
        for round in 0..500 {
            let pieces: Vec<String> = (0..rng.random_range(0..12))
                .map(|_| {
                    (0..rng.random_range(0..4))
                        .map(|_| PARTS[rng.random_range(0..PARTS.len())])
                        .collect()
                })
                .collect();
            let pieces: Vec<&str> = pieces.iter().map(String::as_str).collect();
            let limit = (round % 2 == 0).then(|| rng.random_range(0..30));
            let mut buf = match limit {
                Some(l) => TextBuf::with_limit(l),
                None => TextBuf::default(),
            };
            for piece in &pieces {
                buf.push(piece);
            }
            assert_eq!(
                buf.into_string(),
                reference(&pieces, limit),
                "{pieces:?} {limit:?}"
            );
        }
    }

    /// The page's distinct terms, sorted.
    fn terms(page: &ParsedPage) -> Vec<String> {
        page.terms.counts.keys().cloned().collect()
    }

    const BASE: &str = "http://example.org/dir/page.html";

    const PAGE: &str = r##"<!DOCTYPE html>
<html><head>
  <title>  The   Example
     Page </title>
  <style>.hidden { colour: red }</style>
  <script>var scripted = "invisible";</script>
</head>
<body>
  <h1>Hello World</h1>
  <p>First paragraph with <b>bold</b> text and a
     <a href="other.html#section">relative   link</a>.</p>
  <p><a href="https://absolute.example/x?q=1">Absolute</a>
     <a href="#top">fragment only</a>
     <a href="javascript:alert(1)">script link</a>
     <a href="mailto:me@example.org">mail</a>
     <a href="page.html">self link</a>
     <a href="/dir/other.html">duplicate target</a>
     <a href="http://[::1">broken</a>
     <a>no href</a>
     <a href="file:///tmp/local.html">local file</a></p>
  <noscript>enable javascript please</noscript>
  <script>document.write("also invisible")</script>
</body></html>"##;

    fn link(target: &str, anchor: &str) -> Link {
        Link {
            target: target.into(),
            anchor: anchor.into(),
        }
    }

    #[test]
    fn extracts_title_terms_and_links() {
        let page = parse_page(BASE, PAGE.as_bytes());
        assert_eq!(page.title, "The Example Page");
        assert_eq!(
            page.links,
            [
                link("http://example.org/dir/other.html", "relative link"),
                link("https://absolute.example/x?q=1", "Absolute"),
            ]
        );
        let expected_terms = distinct_terms(
            "The Example Page Hello World First paragraph with bold text and a relative link . \
             Absolute fragment only script link mail self link duplicate target broken no href \
             local file",
        );
        assert_eq!(terms(&page), expected_terms);
        assert!(page.terms.contains("example"));
        assert_eq!(page.terms.counts["example"].title, 1);
        assert_eq!(page.terms.counts["link"].body, 3);
        assert!(!page.terms.contains("a"), "single chars dropped");
        let text = page_text(PAGE.as_bytes());
        assert_eq!(text.title, "The Example Page");
        assert!(
            text.body
                .starts_with("Hello World First paragraph with bold text")
        );
    }

    #[test]
    fn script_style_and_noscript_text_is_excluded() {
        let page = parse_page(BASE, PAGE.as_bytes());
        for hidden in [
            "scripted",
            "invisible",
            "hidden",
            "colour",
            "enable",
            "please",
        ] {
            assert!(!page.terms.contains(hidden), "{hidden} leaked");
        }
    }

    #[test]
    fn block_boundaries_separate_words_and_inline_ones_do_not() {
        let page = parse_page(BASE, b"<p>alpha</p><p>beta</p><div>ga<b>mma</b></div>");
        assert_eq!(terms(&page), ["alpha", "beta", "gamma"]);
    }

    #[test]
    fn hash_depends_on_visible_text_only() {
        let a = parse_page(
            "http://a.example/p1",
            b"<title>T</title><p>same words <a href=\"/x\">here</a></p>",
        );
        let b = parse_page(
            "http://mirror.example/a/p1",
            b"<html><head><title>T</title></head><body><p>same   words\n\
              <a href=\"http://elsewhere.example/y\">here</a></p><script>x=1</script></body></html>",
        );
        let c = parse_page(
            "http://a.example/p1",
            b"<title>T</title><p>other words <a href=\"/x\">here</a></p>",
        );
        assert_ne!(a.links, b.links);
        assert_eq!(a.content_hash, b.content_hash);
        assert_ne!(a.content_hash, c.content_hash);
        assert_eq!(a.content_hash.len(), 32);
        assert!(
            a.content_hash
                .chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
        let expected = format!("{:032x}", xxh3_128(b"T same words here"));
        assert_eq!(a.content_hash, expected);
    }

    #[test]
    fn the_first_canonical_link_is_declared() {
        let page = parse_page(
            BASE,
            b"<head><link rel=\"stylesheet\" href=\"s.css\"><link REL=\"alternate Canonical\" \
              href=\"../book/ch1.html#top\"><link rel=canonical href=\"/other\"></head><p>x</p>",
        );
        assert_eq!(
            page.canonical.as_deref(),
            Some("http://example.org/book/ch1.html")
        );
        // Its own URL counts; a scheme that is not a page's does not; none is none.
        let own = parse_page(BASE, b"<link rel=canonical href=page.html>");
        assert_eq!(own.canonical.as_deref(), Some(BASE));
        let mail = parse_page(BASE, b"<link rel=canonical href=\"mailto:a@b\">");
        assert_eq!(mail.canonical, None);
        assert_eq!(parse_page(BASE, b"<p>no head</p>").canonical, None);
    }

    #[test]
    fn empty_and_titleless_pages() {
        let empty = parse_page(BASE, b"");
        assert_eq!(empty.title, "");
        assert!(empty.terms.counts.is_empty() && empty.links.is_empty());
        assert_eq!(empty.content_hash, format!("{:032x}", xxh3_128(b"")));

        let no_title = parse_page(BASE, b"<body>just text</body>");
        assert_eq!(no_title.title, "");
        assert_eq!(terms(&no_title), ["just", "text"]);
    }

    #[test]
    fn indexed_text_and_title_are_bounded_not_the_parse() {
        // A link after the text bound is still found: the whole page is parsed.
        let words = "ab ".repeat(MAX_TEXT_CHARS / 3 + 10);
        let html = format!(
            "<title>{}</title><p>{words}tailword</p><a href=\"/late\">late</a>",
            "t".repeat(MAX_TITLE_CHARS + 50)
        );
        let page = parse_page(BASE, html.as_bytes());
        assert!(page.terms.contains("ab") && !page.terms.contains("tailword"));
        assert_eq!(page.title.chars().count(), MAX_TITLE_CHARS);
        assert_eq!(page.links.len(), 1);
    }

    #[test]
    fn links_are_capped_and_deduplicated() {
        let mut html = String::new();
        for i in 0..(MAX_LINKS + 50) {
            html.push_str(&format!(
                "<a href=\"/p{i}\">first {i}</a><a href=\"/p{i}#f\">again</a>"
            ));
        }
        let page = parse_page(BASE, html.as_bytes());
        assert_eq!(page.links.len(), MAX_LINKS);
        assert_eq!(page.links[0], link("http://example.org/p0", "first 0"));
        assert_eq!(page.links[99], link("http://example.org/p99", "first 99"));
    }

    #[test]
    fn unparseable_base_keeps_only_absolute_links() {
        let page = parse_page(
            "not a url",
            b"<a href=\"/rel\">rel</a><a href=\"http://abs.example/a#frag\">abs</a>",
        );
        assert_eq!(page.links, [link("http://abs.example/a", "abs")]);
    }

    #[test]
    fn anchor_is_cut_on_a_char_boundary() {
        let anchor = "é".repeat(MAX_ANCHOR_CHARS - 1) + "日本語";
        let html = format!("<a href=\"/x\">{anchor}</a>");
        let page = parse_page(BASE, html.as_bytes());
        let expected = "é".repeat(MAX_ANCHOR_CHARS - 1) + "日";
        assert_eq!(page.links[0].anchor, expected);
        assert_eq!(page.links[0].anchor.chars().count(), MAX_ANCHOR_CHARS);

        // A space at the cut does not count as trailing content.
        let html = format!("<a href=\"/x\">{} tail</a>", "a".repeat(MAX_ANCHOR_CHARS));
        let page = parse_page(BASE, html.as_bytes());
        assert_eq!(page.links[0].anchor, "a".repeat(MAX_ANCHOR_CHARS));
    }

    #[test]
    fn bytes_that_are_not_utf8_are_decoded_in_the_detected_encoding() {
        // Not UTF-8 and nothing declared: a single-byte Western encoding is detected, where a
        // lossy UTF-8 decoding gives "caf\u{fffd}" and splits the words.
        let page = parse_page(BASE, b"<title>caf\xe9 ok</title><p>na\xefve</p>");
        assert_eq!(page.title, "caf\u{e9} ok");
        assert!(page.terms.contains("caf\u{e9}"), "{:?}", page.terms);
        assert!(page.terms.contains("na\u{ef}ve"), "{:?}", page.terms);
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut rng = StdRng::seed_from_u64(0x5eed);
        let fragments: [&[u8]; 10] = [
            b"<a href=\"",
            b"\">",
            b"</a>",
            b"<title>",
            b"<script>",
            b"<!--",
            b"<svg><a href=x>",
            b"&#x1F600;",
            b"\xf0\x9f",
            b"<table><td>",
        ];
        for round in 0..300 {
            let len = rng.random_range(0..400);
            let mut bytes = Vec::with_capacity(len);
            while bytes.len() < len {
                if round % 2 == 0 && rng.random_bool(0.2) {
                    bytes.extend_from_slice(fragments[rng.random_range(0..fragments.len())]);
                } else {
                    bytes.push(rng.random());
                }
            }
            let base = if round % 3 == 0 { "garbage" } else { BASE };
            let page = parse_page(base, &bytes);
            assert_eq!(page.content_hash.len(), 32);
            assert!(page.links.len() <= MAX_LINKS);
            assert!(page.terms.counts.len() <= page.terms.length as usize);
        }
    }

    #[test]
    fn deep_nesting_does_not_overflow() {
        let html = "<div>".repeat(5_000) + "deep" + &"</div>".repeat(5_000);
        let page = parse_page(BASE, html.as_bytes());
        assert_eq!(terms(&page), ["deep"]);
    }

    #[test]
    fn pages_are_decoded_by_their_declared_or_detected_charset() {
        // ISO-8859-1 declared in a meta tag.
        let latin1 = b"<html><head><meta charset=\"iso-8859-1\"><title>Caf\xe9</title></head><body><p>Caf\xe9 cr\xe8me br\xfbl\xe9e</p></body></html>";
        let page = parse_page("http://x.example/", latin1);
        assert_eq!(page.title, "Caf\u{e9}");
        assert!(page.terms.contains("cr\u{e8}me"), "{:?}", page.terms);
        // http-equiv form, Shift_JIS: 日本語のテキスト.
        let (sjis, _, _) = encoding_rs::SHIFT_JIS.encode("日本語のテキスト");
        let mut html =
            b"<meta http-equiv=\"Content-Type\" content=\"text/html; charset=Shift_JIS\"><p>"
                .to_vec();
        html.extend_from_slice(&sjis);
        html.extend_from_slice(b"</p>");
        let page = parse_page("http://x.example/", &html);
        assert!(!page.terms.counts.is_empty(), "Shift_JIS text gives terms");
        assert!(
            page.terms.counts.keys().any(|t| t.contains("日本語")),
            "{:?}",
            page.terms
        );
        // Undeclared Windows-1252 is detected; undeclared valid UTF-8 stays UTF-8.
        let cp1252 = b"<p>na\xefve fa\xe7ade d\xe9j\xe0 vu r\xe9sum\xe9 \x93quoted\x94 caf\xe9</p>";
        let page = parse_page("http://x.example/", cp1252);
        assert!(page.terms.contains("fa\u{e7}ade"), "{:?}", page.terms);
        let page = parse_page("http://x.example/", "<p>Grüße aus Köln</p>".as_bytes());
        assert!(page.terms.contains("grüße"), "{:?}", page.terms);
        // A byte-order mark wins over a wrong declaration.
        let mut bom = vec![0xEF, 0xBB, 0xBF];
        bom.extend_from_slice("<meta charset=iso-8859-1><p>Zürich</p>".as_bytes());
        assert!(
            parse_page("http://x.example/", &bom)
                .terms
                .contains("zürich")
        );
    }
}
