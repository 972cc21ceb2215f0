//! A deterministic synthetic crawl, for tests and benchmarks of the
//! web-indexing pipeline without network access or stored data.
//!
//! The crawl has `docs` pages spread over sites of about 20 pages each. About
//! `duplicate_fraction` of them are *mirrors*: copies, on another host and at a
//! longer, deeper URL, of an *original* with a lower index. A mirror has
//! exactly the visible text of its original (so the same content hash) but its
//! own links, which exercises duplicate detection and canonical-URL choice.
//! Text is drawn with a Zipf-like skew from a vocabulary of 5000 pronounceable
//! made-up words; re-rendering a page at a later generation adds the marker
//! word `rev{generation}`, so recrawls change content.
//!
//! Everything is a pure function of `(docs, seed, duplicate_fraction, shape)`
//! and the arguments: [`SyntheticCrawl::page`] never depends on what was
//! generated before it.
//!
//! Two shapes ([`Shape`]). [`Shape::Demo`], the default, makes small pages
//! (30–120 words, 3–9 links) that keep tests fast. [`Shape::Realistic`] makes
//! pages shaped like a real crawl, so that benchmarks see real costs: body text
//! log-normal around 1 800 words (median about 20 KB of HTML, a tail to about
//! 500 KB), 20–200 links (a navigation bar of same-site links, then links in
//! the text), `<style>` and `<script>` blocks, a Zipf vocabulary of 60 000
//! words, and 4% mirrors.

use std::fmt::Write as _;
use std::sync::OnceLock;

use bytes::Bytes;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use xxhash_rust::xxh3::xxh3_64_with_seed;

use super::sources::CrawledPage;

/// The duplicate fraction [`SyntheticCrawl::new`] uses.
const DEFAULT_DUPLICATE_FRACTION: f64 = 0.15;
/// Pages per site, roughly.
const PAGES_PER_SITE: usize = 20;
/// Sites per mirror host, roughly.
const SITES_PER_MIRROR_HOST: usize = 4;
/// Pages each thread of [`SyntheticCrawl::initial_prefetched`] renders ahead of the consumer.
pub const PREFETCH_PAGES: usize = 16;

/// Threads a loader renders synthetic pages on ahead of itself
/// ([`SyntheticCrawl::initial_prefetched`]), as files would be read ahead.
pub const RENDER_THREADS: usize = 2;

/// Number of distinct words in the demo vocabulary.
const VOCABULARY_SIZE: usize = 5000;
/// And in the realistic one.
const REALISTIC_VOCABULARY_SIZE: usize = 60_000;
/// The realistic shape's duplicate fraction.
const REALISTIC_DUPLICATE_FRACTION: f64 = 0.04;
/// Two-char consonant-vowel syllables: every word is a concatenation of them.
const CONSONANTS: &[u8; 16] = b"bdfghklmnprstvwz";
const VOWELS: &[u8; 5] = b"aeiou";
const SYLLABLES: usize = CONSONANTS.len() * VOWELS.len();
/// Multiplier that scatters word indices over all two-syllable stems; it must
/// be coprime with `SYLLABLES²` (= 2⁸·5²) so the map is a bijection.
const STEM_SCATTER: usize = 7919;
/// Chance that a page also links to a URL outside the crawl.
const ELSEWHERE_PROBABILITY: f64 = 0.1;
/// Targets outside the crawl are `http://elsewhere.example/x{k}`, `k` below this.
const ELSEWHERE_TARGETS: u64 = 1000;

/// Independent random streams, so that e.g. link targets do not shift when
/// the content generator changes.
#[derive(Debug, Clone, Copy)]
#[repr(u64)]
enum Stream {
    IsMirror = 1,
    MirrorOf = 2,
    Content = 3,
    Links = 4,
    Recrawl = 5,
}

/// What the pages of a synthetic crawl look like (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Shape {
    /// Small pages: fast tests.
    #[default]
    Demo,
    /// Pages sized and linked like a real crawl: realistic benchmarks.
    Realistic,
}

/// A deterministic synthetic crawl of `docs` pages.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SyntheticCrawl {
    docs: usize,
    seed: u64,
    duplicate_fraction: f64,
    shape: Shape,
}

/// The visible content of one original at one generation, shared by its
/// mirrors.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Content {
    title: Vec<Word>,
    /// Paragraphs of words; the first starts with `rev{g}` when g > 0.
    paragraphs: Vec<Vec<Word>>,
    /// Link slots: paragraph index and anchor words. Slots pointing into the
    /// crawl come first; the optional last one (`elsewhere`) points outside.
    slots: Vec<(usize, Vec<Word>)>,
    elsewhere: bool,
    /// The first `nav` slots form a navigation bar of same-site links (realistic shape).
    nav: usize,
    /// Bytes of `<script>` filler (realistic shape; not visible text).
    script_bytes: usize,
}

impl SyntheticCrawl {
    /// A crawl of `docs` pages derived from `seed`, about 15% of them mirrors.
    pub fn new(docs: usize, seed: u64) -> Self {
        Self {
            docs,
            seed,
            duplicate_fraction: DEFAULT_DUPLICATE_FRACTION,
            shape: Shape::Demo,
        }
    }

    /// The same crawl with pages of `shape`; [`Shape::Realistic`] also sets the duplicate
    /// fraction to 4% (change it afterwards with [`Self::with_duplicate_fraction`]).
    #[must_use]
    pub fn with_shape(self, shape: Shape) -> Self {
        let duplicate_fraction = match shape {
            Shape::Demo => self.duplicate_fraction,
            Shape::Realistic => REALISTIC_DUPLICATE_FRACTION,
        };
        Self {
            shape,
            duplicate_fraction,
            ..self
        }
    }

    /// The shape of the pages.
    pub fn shape(&self) -> Shape {
        self.shape
    }

    /// The same crawl with about `fraction` of the pages mirrors (clamped to
    /// `0.0..=1.0`; NaN counts as 0). Page 0 is always an original.
    #[must_use]
    pub fn with_duplicate_fraction(self, fraction: f64) -> Self {
        Self {
            duplicate_fraction: clamp_fraction(fraction),
            ..self
        }
    }

    /// The number of pages in the crawl.
    pub fn docs(&self) -> usize {
        self.docs
    }

    /// The URL of page `index`: `http://site{s}.example/p{index}` for an
    /// original, `http://mirror{m}.example/site{s}/p{index}` for a mirror
    /// (where `s` is its original's site).
    pub fn url(&self, index: usize) -> String {
        let (host, path) = self.location(index);
        format!("http://{host}{path}")
    }

    /// Page `index` rendered at `generation` (0 for the initial crawl).
    ///
    /// Indices past [`docs`](Self::docs) still give well-formed pages, but no
    /// page of the crawl links to them.
    pub fn page(&self, index: usize, generation: u32) -> CrawledPage {
        CrawledPage {
            url: self.url(index),
            html: Bytes::from(self.render(index, generation)),
        }
    }

    /// Every page of the crawl at generation 0, in index order.
    pub fn initial(&self) -> impl Iterator<Item = CrawledPage> + '_ {
        (0..self.docs).map(|index| self.page(index, 0))
    }

    /// [`initial`](Self::initial), rendered ahead of the consumer on `threads` threads (page
    /// `i` on thread `i % threads`, at most [`PREFETCH_PAGES`] ahead each), in index order.
    /// Rendering a realistic page costs about as much as storing it, so a loader that renders
    /// inline keeps one core busy rendering while the store waits. Dropping the iterator stops
    /// the threads.
    pub fn initial_prefetched(&self, threads: usize) -> impl Iterator<Item = CrawledPage> + use<> {
        let threads = threads.max(1);
        let receivers: Vec<std::sync::mpsc::Receiver<CrawledPage>> = (0..threads)
            .map(|first| {
                let (sender, receiver) = std::sync::mpsc::sync_channel(PREFETCH_PAGES);
                let crawl = *self;
                std::thread::spawn(move || {
                    for index in (first..crawl.docs).step_by(threads) {
                        if sender.send(crawl.page(index, 0)).is_err() {
                            return; // the consumer is gone
                        }
                    }
                });
                receiver
            })
            .collect();
        // A thread that died (it cannot: rendering does not panic) ends the pages early.
        (0..self.docs).map_while(move |index| receivers[index % threads].recv().ok())
    }

    /// A deterministic subset of about `fraction` of the pages (chosen by the
    /// seed and `generation`), re-rendered at `generation`, in index order.
    pub fn recrawl(&self, generation: u32, fraction: f64) -> Vec<CrawledPage> {
        self.recrawl_indexes(generation, fraction)
            .into_iter()
            .map(|index| self.page(index, generation))
            .collect()
    }

    /// The indexes of the pages [`recrawl`](Self::recrawl) visits, in order.
    pub fn recrawl_indexes(&self, generation: u32, fraction: f64) -> Vec<usize> {
        let fraction = clamp_fraction(fraction);
        (0..self.docs)
            .filter(|&index| {
                self.rng(Stream::Recrawl, index, generation).random::<f64>() < fraction
            })
            .collect()
    }

    /// The original page `index` duplicates: `index` itself for an original,
    /// a lower index for a mirror.
    pub fn original_of(&self, index: usize) -> usize {
        let mut current = index;
        // Each step strictly lowers the index, and 0 is never a mirror.
        while self.is_mirror(current) {
            current = self
                .rng(Stream::MirrorOf, current, 0)
                .random_range(0..current);
        }
        current
    }

    fn is_mirror(&self, index: usize) -> bool {
        index > 0 && self.rng(Stream::IsMirror, index, 0).random::<f64>() < self.duplicate_fraction
    }

    fn rng(&self, stream: Stream, index: usize, generation: u32) -> StdRng {
        let mut key = [0u8; 20];
        key[..8].copy_from_slice(&(stream as u64).to_le_bytes());
        key[8..16].copy_from_slice(&(index as u64).to_le_bytes());
        key[16..].copy_from_slice(&generation.to_le_bytes());
        StdRng::seed_from_u64(xxh3_64_with_seed(&key, self.seed))
    }

    fn sites(&self) -> usize {
        (self.docs / PAGES_PER_SITE).max(1)
    }

    /// Host and path of page `index`.
    fn location(&self, index: usize) -> (String, String) {
        let original = self.original_of(index);
        let site = original % self.sites();
        if original == index {
            (format!("site{site}.example"), format!("/p{index}"))
        } else {
            let mirror_hosts = (self.sites() / SITES_PER_MIRROR_HOST).max(1);
            let mirror = index % mirror_hosts;
            (
                format!("mirror{mirror}.example"),
                format!("/site{site}/p{index}"),
            )
        }
    }

    fn content(&self, original: usize, generation: u32) -> Content {
        let mut rng = self.rng(Stream::Content, original, generation);
        let realistic = self.shape == Shape::Realistic;
        let vocabulary = if realistic {
            REALISTIC_VOCABULARY_SIZE
        } else {
            VOCABULARY_SIZE
        };
        let title = zipf_words(&mut rng, vocabulary, if realistic { 3..=10 } else { 2..=4 });
        let body = if realistic {
            let n = log_normal(&mut rng, 1800.0, 0.9).clamp(50.0, 60_000.0) as usize;
            n..=n
        } else {
            30..=120
        };
        let mut words = zipf_words(&mut rng, vocabulary, body);
        if generation > 0 {
            words.insert(0, Word::Owned(format!("rev{generation}")));
        }
        let paragraph_words = if realistic { 20..=80 } else { 8..=25 };
        let mut paragraphs = Vec::new();
        let mut rest = words.as_slice();
        while !rest.is_empty() {
            let take = rng.random_range(paragraph_words.clone()).min(rest.len());
            let (paragraph, tail) = rest.split_at(take);
            paragraphs.push(paragraph.to_vec());
            rest = tail;
        }
        let elsewhere = rng.random::<f64>() < ELSEWHERE_PROBABILITY;
        let links = if realistic {
            // Log-uniform over 20..=200 (median about 63), the link outside included.
            let ln = rng.random_range(20f64.ln()..=200f64.ln());
            (ln.exp() as usize).clamp(20, 200)
        } else {
            rng.random_range(3..=8) + usize::from(elsewhere)
        };
        let (nav, script_bytes) = if realistic {
            (rng.random_range(8..=16), rng.random_range(1000..=6000))
        } else {
            (0, 0)
        };
        let slots = (0..links)
            .map(|_| {
                let paragraph = rng.random_range(0..paragraphs.len());
                (paragraph, zipf_words(&mut rng, vocabulary, 1..=3))
            })
            .collect();
        Content {
            title,
            paragraphs,
            slots,
            elsewhere,
            nav,
            script_bytes,
        }
    }

    /// The `href` of each link slot of page `index` at `generation`.
    fn hrefs(&self, index: usize, generation: u32, content: &Content) -> Vec<String> {
        let mut rng = self.rng(Stream::Links, index, generation);
        let (host, _) = self.location(index);
        let crawl_links = content.slots.len() - usize::from(content.elsewhere);
        let mut hrefs: Vec<String> = Vec::with_capacity(content.slots.len());
        for slot in 0..crawl_links {
            let target = if slot < content.nav {
                self.same_site_target(&mut rng, index)
            } else {
                self.link_target(&mut rng, index)
            };
            hrefs.push(match target {
                Some(target) => {
                    let (target_host, path) = self.location(target);
                    if target_host == host {
                        path
                    } else {
                        format!("http://{target_host}{path}")
                    }
                }
                // A single-page crawl has nothing else to link to.
                None => elsewhere_url(&mut rng),
            });
        }
        if content.elsewhere {
            hrefs.push(elsewhere_url(&mut rng));
        }
        hrefs
    }

    /// An original on the site of page `index` (itself, if the site has no other page), for
    /// navigation links. Mirrors link to their original's site.
    fn same_site_target(&self, rng: &mut StdRng, index: usize) -> Option<usize> {
        let sites = self.sites();
        let site = self.original_of(index) % sites;
        let pages = self.docs.saturating_sub(site).div_ceil(sites);
        (pages > 0).then(|| site + rng.random_range(0..pages) * sites)
    }

    /// A page of the crawl other than `index`, if there is one.
    fn link_target(&self, rng: &mut StdRng, index: usize) -> Option<usize> {
        if index < self.docs {
            let other = rng.random_range(0..self.docs.checked_sub(1).filter(|&n| n > 0)?);
            Some(if other >= index { other + 1 } else { other })
        } else if self.docs > 0 {
            Some(rng.random_range(0..self.docs))
        } else {
            None
        }
    }

    fn render(&self, index: usize, generation: u32) -> String {
        let content = self.content(self.original_of(index), generation);
        let hrefs = self.hrefs(index, generation, &content);
        let title = escape(&content.title.join(" "));

        let mut html = String::with_capacity(2048 + content.script_bytes * 2);
        html.push_str("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">");
        let _ = write!(html, "<title>{title}</title>");
        if content.script_bytes > 0 {
            html.push_str(STYLE);
            filler_script(&mut html, content.script_bytes);
        }
        let _ = write!(html, "</head>\n<body>\n");
        let link = |html: &mut String, anchor: &[Word], href: &str| {
            let _ = write!(
                html,
                " <a href=\"{}\">{}</a>",
                escape(href),
                escape(&anchor.join(" "))
            );
        };
        if content.nav > 0 {
            html.push_str("<nav><ul>");
            for ((_, anchor), href) in content.slots.iter().zip(&hrefs).take(content.nav) {
                html.push_str("<li>");
                link(&mut html, anchor, href);
                html.push_str("</li>");
            }
            html.push_str("</ul></nav>\n");
        }
        let _ = writeln!(html, "<h1>{title}</h1>");
        for (p, paragraph) in content.paragraphs.iter().enumerate() {
            html.push_str("<p>");
            html.push_str(&escape(&paragraph.join(" ")));
            for ((_, anchor), href) in content
                .slots
                .iter()
                .zip(&hrefs)
                .skip(content.nav)
                .filter(|((slot_paragraph, _), _)| *slot_paragraph == p)
            {
                link(&mut html, anchor, href);
            }
            html.push_str("</p>\n");
        }
        html.push_str("</body></html>\n");
        html
    }
}

/// The stylesheet of every realistic page (hidden text, as on real sites).
const STYLE: &str = "<style>body{margin:0;font:16px/1.5 system-ui,sans-serif;color:#222}\
nav ul{list-style:none;display:flex;gap:1em;padding:.5em 1em;background:#f4f4f4}\
nav a{color:#06c;text-decoration:none}h1{font-size:2em;margin:.67em 1em}\
p{max-width:42em;margin:1em auto}a:hover{text-decoration:underline}\
@media (max-width:600px){nav ul{flex-direction:column}p{margin:1em}}</style>";

/// About `bytes` of script, as pages carry analytics and widgets (hidden text).
fn filler_script(html: &mut String, bytes: usize) {
    html.push_str("<script>");
    let start = html.len();
    let mut i = 0usize;
    while html.len() - start < bytes {
        let _ = write!(
            html,
            "var w{i}=document.querySelectorAll('[data-w=\"{i}\"]');w{i}.forEach(function(e){{e.dataset.seen=1}});"
        );
        i += 1;
    }
    html.push_str("</script>");
}

fn clamp_fraction(fraction: f64) -> f64 {
    if fraction.is_nan() {
        0.0
    } else {
        fraction.clamp(0.0, 1.0)
    }
}

fn elsewhere_url(rng: &mut StdRng) -> String {
    format!(
        "http://elsewhere.example/x{}",
        rng.random_range(0..ELSEWHERE_TARGETS)
    )
}

/// Word `k` of the vocabulary (`k < VOCABULARY_SIZE`): two or three
/// consonant-vowel syllables. Distinct `k` give distinct words, because the
/// two-syllable stem alone is a bijection of `k` (see `STEM_SCATTER`).
fn word(k: usize) -> String {
    let syllable = |s: usize| {
        [
            char::from(CONSONANTS[s / VOWELS.len() % CONSONANTS.len()]),
            char::from(VOWELS[s % VOWELS.len()]),
        ]
    };
    let stem = k.wrapping_mul(STEM_SCATTER) % (SYLLABLES * SYLLABLES);
    let mut word: String = syllable(stem / SYLLABLES)
        .into_iter()
        .chain(syllable(stem % SYLLABLES))
        .collect();
    if k % 3 == 1 {
        word.extend(syllable(k.wrapping_mul(31) % SYLLABLES));
    }
    word
}

/// A vocabulary rank below `size` with a Zipf-like skew: P(rank = r) ∝ about 1/(r+1).
fn zipf_rank(rng: &mut StdRng, size: usize) -> usize {
    let u: f64 = rng.random();
    // (N+1)^u is log-uniform on [1, N+1): the continuous Zipf with s = 1.
    let rank = ((size + 1) as f64).powf(u) as usize;
    rank.saturating_sub(1).min(size - 1)
}

/// A word of a synthetic page: from the vocabulary's table, or made for one page (`rev{g}`).
type Word = std::borrow::Cow<'static, str>;

/// Every word of the vocabulary of `size` words ([`VOCABULARY_SIZE`] or more), made once per
/// process: rendering a realistic page draws about 2 000 words, and building each from its
/// syllables would take a large part of the rendering time.
fn vocabulary_table(size: usize) -> &'static [String] {
    static SMALL: OnceLock<Vec<String>> = OnceLock::new();
    static LARGE: OnceLock<Vec<String>> = OnceLock::new();
    if size > VOCABULARY_SIZE {
        debug_assert_eq!(size, REALISTIC_VOCABULARY_SIZE);
        LARGE.get_or_init(|| {
            (0..REALISTIC_VOCABULARY_SIZE)
                .map(large_vocabulary_word)
                .collect()
        })
    } else {
        SMALL.get_or_init(|| (0..VOCABULARY_SIZE).map(word).collect())
    }
}

fn zipf_words(
    rng: &mut StdRng,
    vocabulary: usize,
    count: std::ops::RangeInclusive<usize>,
) -> Vec<Word> {
    let n = rng.random_range(count);
    let table = vocabulary_table(vocabulary);
    (0..n)
        .map(|_| {
            let rank = zipf_rank(rng, vocabulary);
            // Both tables hold at least `vocabulary` words, and `zipf_rank` stays below it.
            Word::Borrowed(table.get(rank).map_or("", String::as_str))
        })
        .collect()
}

/// A log-normal draw with the given median and shape `sigma` (Box–Muller).
fn log_normal(rng: &mut StdRng, median: f64, sigma: f64) -> f64 {
    let u1: f64 = rng.random_range(f64::EPSILON..1.0);
    let u2: f64 = rng.random();
    let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
    median * (sigma * z).exp()
}

/// Word `k` of a vocabulary of up to 512 000 words: three consonant-vowel syllables, a
/// fourth for every third `k`. Distinct `k` give distinct words: the three-syllable stem is a
/// bijection of `k` (7919 is coprime with `SYLLABLES³` = 2⁹·5³).
fn large_vocabulary_word(k: usize) -> String {
    let syllable = |s: usize| {
        [
            char::from(CONSONANTS[s / VOWELS.len() % CONSONANTS.len()]),
            char::from(VOWELS[s % VOWELS.len()]),
        ]
    };
    let cube = SYLLABLES * SYLLABLES * SYLLABLES;
    let stem = k.wrapping_mul(STEM_SCATTER) % cube;
    let mut word: String = [stem / (SYLLABLES * SYLLABLES), stem / SYLLABLES, stem]
        .into_iter()
        .flat_map(|s| syllable(s % SYLLABLES))
        .collect();
    if k % 3 == 1 {
        word.extend(syllable(k.wrapping_mul(31) % SYLLABLES));
    }
    word
}

/// Escapes text for an HTML text node or a double-quoted attribute value.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::{HashMap, HashSet};

    use url::Url;

    use super::super::html::parse_page;
    use super::*;

    fn hash(page: &CrawledPage) -> String {
        parse_page(&page.url, &page.html).content_hash
    }

    #[test]
    fn pages_are_deterministic_and_independent_of_call_order() {
        let crawl = SyntheticCrawl::new(300, 42);
        let forward: Vec<CrawledPage> = (0..300).map(|i| crawl.page(i, 3)).collect();
        let fresh = SyntheticCrawl::new(300, 42);
        for i in (0..300).rev() {
            assert_eq!(fresh.page(i, 3), forward[i], "page {i}");
        }
        assert_eq!(crawl.page(17, 0), crawl.initial().nth(17).unwrap());
        assert_eq!(crawl.initial().count(), 300);
        assert!(crawl.initial_prefetched(3).eq(crawl.initial()));
        // Stopping early stops the threads (their sends fail) instead of blocking them.
        assert_eq!(crawl.initial_prefetched(2).take(5).count(), 5);

        let other_seed = SyntheticCrawl::new(300, 43);
        assert_ne!(other_seed.page(17, 0).html, crawl.page(17, 0).html);
    }

    #[test]
    fn about_duplicate_fraction_are_mirrors() {
        let count_mirrors = |crawl: &SyntheticCrawl| {
            (0..crawl.docs())
                .filter(|&i| crawl.original_of(i) != i)
                .count()
        };
        let crawl = SyntheticCrawl::new(4000, 7);
        let mirrors = count_mirrors(&crawl);
        assert!((480..=720).contains(&mirrors), "{mirrors} mirrors of 4000");

        let half = crawl.with_duplicate_fraction(0.5);
        let mirrors = count_mirrors(&half);
        assert!(
            (1800..=2200).contains(&mirrors),
            "{mirrors} mirrors of 4000"
        );

        assert_eq!(count_mirrors(&crawl.with_duplicate_fraction(0.0)), 0);
        assert_eq!(count_mirrors(&crawl.with_duplicate_fraction(f64::NAN)), 0);
        let all = crawl.with_duplicate_fraction(7.0);
        assert_eq!(count_mirrors(&all), 3999, "page 0 is always an original");
        assert!((0..4000).all(|i| all.original_of(i) == 0));
    }

    #[test]
    fn mirrors_point_to_lower_originals_at_longer_urls_on_other_hosts() {
        let crawl = SyntheticCrawl::new(1000, 1);
        let mut mirrors = 0;
        for i in 0..1000 {
            let original = crawl.original_of(i);
            assert_eq!(crawl.original_of(original), original);
            let url = Url::parse(&crawl.url(i)).unwrap();
            if original == i {
                assert_eq!(url.as_str(), format!("http://site{}.example/p{i}", i % 50));
                continue;
            }
            mirrors += 1;
            assert!(original < i);
            let original_url = Url::parse(&crawl.url(original)).unwrap();
            assert_ne!(url.host_str(), original_url.host_str());
            assert!(url.as_str().starts_with("http://mirror"));
            assert!(url.as_str().len() > original_url.as_str().len());
            assert!(url.path_segments().unwrap().count() > 1);
        }
        assert!(mirrors > 0);
        let urls: HashSet<String> = (0..1000).map(|i| crawl.url(i)).collect();
        assert_eq!(urls.len(), 1000, "URLs are unique");
    }

    #[test]
    fn mirrors_hash_like_their_original_and_unlike_other_pages() {
        let crawl = SyntheticCrawl::new(400, 99);
        for generation in [0, 1] {
            let hashes: Vec<String> = (0..400).map(|i| hash(&crawl.page(i, generation))).collect();
            let mut by_original: HashMap<&str, usize> = HashMap::new();
            for (i, h) in hashes.iter().enumerate() {
                let original = crawl.original_of(i);
                assert_eq!(*h, hashes[original], "page {i} vs original {original}");
                if original == i {
                    assert!(by_original.insert(h, i).is_none(), "originals collide");
                }
            }
            // Mirrors do differ from their original in their links.
            let mirror = (0..400).find(|&i| crawl.original_of(i) != i).unwrap();
            let original = crawl.original_of(mirror);
            let mirror_page = crawl.page(mirror, generation);
            let original_page = crawl.page(original, generation);
            assert_ne!(
                parse_page(&mirror_page.url, &mirror_page.html).links,
                parse_page(&original_page.url, &original_page.html).links
            );
        }
    }

    #[test]
    fn recrawl_changes_the_hash() {
        let crawl = SyntheticCrawl::new(100, 5);
        for i in 0..100 {
            let before = crawl.page(i, 0);
            let after = crawl.page(i, 1);
            assert_eq!(before.url, after.url);
            assert_ne!(hash(&before), hash(&after));
            let parsed = parse_page(&after.url, &after.html);
            assert!(parsed.terms.contains("rev1"));
            assert_ne!(hash(&after), hash(&crawl.page(i, 2)));
        }
    }

    #[test]
    fn recrawl_picks_a_deterministic_fraction() {
        let crawl = SyntheticCrawl::new(2000, 11);
        let picked = crawl.recrawl(1, 0.2);
        assert!(
            (320..=480).contains(&picked.len()),
            "{} of 2000",
            picked.len()
        );
        assert_eq!(picked, SyntheticCrawl::new(2000, 11).recrawl(1, 0.2));
        for page in &picked {
            let index: usize = page.url.rsplit("/p").next().unwrap().parse().unwrap();
            assert_eq!(*page, crawl.page(index, 1));
        }
        let urls = |pages: &[CrawledPage]| -> Vec<String> {
            pages.iter().map(|p| p.url.clone()).collect()
        };
        assert_ne!(urls(&picked), urls(&crawl.recrawl(2, 0.2)));
        assert!(crawl.recrawl(1, 0.0).is_empty());
        assert_eq!(crawl.recrawl(1, 1.0).len(), 2000);
    }

    #[test]
    fn links_are_absolute_after_parsing_and_mostly_in_the_crawl() {
        let crawl = SyntheticCrawl::new(500, 3);
        let urls: HashSet<String> = (0..500).map(|i| crawl.url(i)).collect();
        let (mut relative, mut absolute, mut elsewhere) = (0, 0, 0);
        for page in crawl.initial() {
            let text = String::from_utf8(page.html.to_vec()).unwrap();
            relative += text.matches("href=\"/").count();
            absolute += text.matches("href=\"http://").count();
            let parsed = parse_page(&page.url, &page.html);
            assert!(
                (1..=9).contains(&parsed.links.len()),
                "{}",
                parsed.links.len()
            );
            for link in &parsed.links {
                let target = Url::parse(&link.target).unwrap();
                assert_eq!(target.scheme(), "http");
                assert_ne!(link.target, page.url);
                assert!(!link.anchor.is_empty());
                if link.target.starts_with("http://elsewhere.example/x") {
                    elsewhere += 1;
                } else {
                    assert!(urls.contains(&link.target), "{}", link.target);
                }
            }
        }
        assert!(relative > 0 && absolute > 0);
        assert!(
            (20..=90).contains(&elsewhere),
            "{elsewhere} elsewhere links"
        );
    }

    /// Every URL the crawl makes (pages of both shapes, recrawls, link targets) is one the
    /// pipeline stores as it is: [`crate::url::normalize`] accepts it unchanged.
    #[test]
    fn every_url_passes_normalize_unchanged() {
        let check = |url: &str| {
            assert_eq!(crate::url::normalize(url).as_deref(), Ok(url), "{url}");
        };
        for crawl in [
            SyntheticCrawl::new(300, 5),
            SyntheticCrawl::new(300, 5).with_shape(Shape::Realistic),
            SyntheticCrawl::new(1, 5),
        ] {
            for page in crawl.initial().chain(crawl.recrawl(1, 0.5)) {
                check(&page.url);
                for link in parse_page(&page.url, &page.html).links {
                    check(&link.target);
                }
            }
        }
    }

    #[test]
    fn content_has_the_promised_shape() {
        let crawl = SyntheticCrawl::new(200, 8);
        for i in 0..200 {
            let content = crawl.content(crawl.original_of(i), 0);
            assert!((2..=4).contains(&content.title.len()));
            let words: usize = content.paragraphs.iter().map(Vec::len).sum();
            assert!((30..=120).contains(&words), "{words} words");
            let crawl_links = content.slots.len() - usize::from(content.elsewhere);
            assert!((3..=8).contains(&crawl_links));
            for (paragraph, anchor) in &content.slots {
                assert!(*paragraph < content.paragraphs.len());
                assert!((1..=3).contains(&anchor.len()));
            }
            let rendered = crawl.page(i, 0);
            let parsed = parse_page(&rendered.url, &rendered.html);
            assert_eq!(parsed.title, content.title.join(" "));
        }
    }

    #[test]
    fn vocabulary_is_distinct_pronounceable_and_skewed() {
        let words: Vec<String> = (0..VOCABULARY_SIZE).map(word).collect();
        let distinct: HashSet<&String> = words.iter().collect();
        assert_eq!(distinct.len(), VOCABULARY_SIZE);
        assert!(
            words
                .iter()
                .all(|w| (4..=6).contains(&w.len()) && w.bytes().all(|b| b.is_ascii_lowercase()))
        );

        let mut rng = StdRng::seed_from_u64(1);
        let mut counts = vec![0usize; VOCABULARY_SIZE];
        for _ in 0..100_000 {
            counts[zipf_rank(&mut rng, VOCABULARY_SIZE)] += 1;
        }
        assert!(counts[0] > 5_000, "top word drawn {} times", counts[0]);
        let tail: usize = counts[2500..].iter().sum();
        assert!(tail < 10_000, "tail drawn {tail} times");
        assert!(counts.iter().filter(|&&c| c > 0).count() > 3000);
    }

    #[test]
    fn tiny_crawls_work() {
        let empty = SyntheticCrawl::new(0, 1);
        assert_eq!(empty.initial().count(), 0);
        assert!(empty.recrawl(1, 1.0).is_empty());
        let page = empty.page(3, 0);
        assert!(
            parse_page(&page.url, &page.html)
                .links
                .iter()
                .all(|l| l.target.starts_with("http://elsewhere"))
        );

        let single = SyntheticCrawl::new(1, 1).with_duplicate_fraction(1.0);
        let page = single.page(0, 0);
        assert_eq!(page.url, "http://site0.example/p0");
        let parsed = parse_page(&page.url, &page.html);
        assert!(
            parsed
                .links
                .iter()
                .all(|l| l.target.starts_with("http://elsewhere"))
        );
    }

    #[test]
    fn escape_handles_markup() {
        assert_eq!(
            escape(r#"<a href="x">&'"#),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
    }

    #[test]
    fn realistic_pages_have_real_sizes_links_and_vocabulary() {
        let crawl = SyntheticCrawl::new(2000, 3).with_shape(Shape::Realistic);
        let mut sizes = Vec::new();
        let mut links = Vec::new();
        let mut vocabulary = HashSet::new();
        let mut hashes = HashMap::new();
        for i in 0..crawl.docs() {
            let page = crawl.page(i, 0);
            sizes.push(page.html.len());
            let parsed = parse_page(&page.url, &page.html);
            links.push(parsed.links.len());
            vocabulary.extend(parsed.terms.counts.into_keys());
            *hashes.entry(parsed.content_hash).or_insert(0usize) += 1;
        }
        sizes.sort_unstable();
        let median = sizes[sizes.len() / 2];
        assert!((10_000..=30_000).contains(&median), "median {median} bytes");
        let largest = sizes[sizes.len() - 1];
        assert!(
            (120_000..=520_000).contains(&largest),
            "largest {largest} bytes"
        );
        // The parser keeps at most 100 distinct targets; pages carry 20–200 links.
        let (fewest, most) = (links.iter().min().unwrap(), links.iter().max().unwrap());
        assert!(*fewest >= 10 && *most >= 90, "{fewest}..{most} links");
        // Every term of a page is kept, drawn from 60 000 words.
        assert!(vocabulary.len() > 15_000, "{} words", vocabulary.len());
        let duplicated: usize = hashes.values().filter(|&&n| n > 1).sum();
        assert!(
            (30..=200).contains(&duplicated),
            "{duplicated} duplicated pages"
        );
        // Nav links stay on the page's own site.
        let page = crawl.page(40, 0);
        let nav = String::from_utf8_lossy(&page.html);
        let nav = &nav[nav.find("<nav>").unwrap()..nav.find("</nav>").unwrap()];
        assert!(!nav.contains("http://"), "relative, same-site links: {nav}");
    }

    #[test]
    fn vocabulary_tables_hold_each_word_at_its_rank() {
        let small = vocabulary_table(VOCABULARY_SIZE);
        assert_eq!(small.len(), VOCABULARY_SIZE);
        assert!((0..VOCABULARY_SIZE).all(|k| small[k] == word(k)));
        let large = vocabulary_table(REALISTIC_VOCABULARY_SIZE);
        assert_eq!(large.len(), REALISTIC_VOCABULARY_SIZE);
        assert!((0..REALISTIC_VOCABULARY_SIZE).all(|k| large[k] == large_vocabulary_word(k)));
    }

    #[test]
    fn large_vocabulary_words_are_distinct() {
        let words: HashSet<String> = (0..REALISTIC_VOCABULARY_SIZE)
            .map(large_vocabulary_word)
            .collect();
        assert_eq!(words.len(), REALISTIC_VOCABULARY_SIZE);
    }
}
