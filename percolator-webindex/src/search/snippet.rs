//! Snippets: the stretch of a page's visible text that shows the most query terms, with the
//! matches marked, so a reader sees why the page was found.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

/// Tokens in a snippet window.
pub const WINDOW_TOKENS: usize = 28;

/// A stretch of a page's text with the query terms in it marked.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snippet {
    /// The text, with `…` where it cuts the page's text.
    pub text: String,
    /// Byte ranges `[start, end)` of `text` that match a query term, in order.
    pub highlights: Vec<(usize, usize)>,
}

impl Snippet {
    /// The text with the matches in `[` `]` (for terminals).
    pub fn marked(&self) -> String {
        let mut out = String::with_capacity(self.text.len() + 2 * self.highlights.len());
        let mut at = 0;
        for &(start, end) in &self.highlights {
            if let (Some(before), Some(word)) =
                (self.text.get(at..start), self.text.get(start..end))
            {
                out.push_str(before);
                out.push('[');
                out.push_str(word);
                out.push(']');
                at = end;
            }
        }
        out.push_str(self.text.get(at..).unwrap_or_default());
        out
    }
}

/// One word of the text: its byte range and lowercase form.
struct Word {
    start: usize,
    end: usize,
    lower: String,
}

/// The words of `text` as the index splits them (runs of 2 to 32 alphanumeric chars), with
/// their byte ranges in `text` itself.
fn words(text: &str) -> Vec<Word> {
    let mut words = Vec::new();
    let mut start = None;
    for (i, c) in text
        .char_indices()
        .chain(std::iter::once((text.len(), ' ')))
    {
        if c.is_alphanumeric() {
            start.get_or_insert(i);
        } else if let Some(s) = start.take() {
            let lower = text[s..i].to_lowercase();
            if (2..=32).contains(&lower.chars().count()) {
                words.push(Word {
                    start: s,
                    end: i,
                    lower,
                });
            }
        }
    }
    words
}

/// The window of [`WINDOW_TOKENS`] words of `text` holding the most distinct `terms` (then the
/// most matches, then the earliest); the start of the text when none occurs.
pub fn snippet(text: &str, terms: &[String]) -> Snippet {
    let words = words(text);
    if words.is_empty() {
        return Snippet::default();
    }
    let wanted: HashSet<&str> = terms.iter().map(String::as_str).collect();
    let hit: Vec<bool> = words
        .iter()
        .map(|w| wanted.contains(w.lower.as_str()))
        .collect();
    let mut best = (0usize, 0usize, 0usize); // (distinct, matches, first word)
    for first in (0..words.len()).filter(|&i| hit[i]) {
        let last = (first + WINDOW_TOKENS).min(words.len());
        let in_window: Vec<&str> = (first..last)
            .filter(|&i| hit[i])
            .map(|i| words[i].lower.as_str())
            .collect();
        let distinct = in_window.iter().collect::<HashSet<_>>().len();
        if (distinct, in_window.len()) > (best.0, best.1) {
            // Start a few words early, for context.
            best = (distinct, in_window.len(), first.saturating_sub(3));
        }
    }
    // A window ending early is moved back to fill it (a short text shows whole).
    let first = best.2.min(words.len().saturating_sub(WINDOW_TOKENS));
    let last = (first + WINDOW_TOKENS).min(words.len()) - 1;
    let (start, end) = (
        if first == 0 { 0 } else { words[first].start },
        if last + 1 == words.len() {
            text.len()
        } else {
            words[last].end
        },
    );
    let mut out = Snippet::default();
    if start > 0 {
        out.text.push_str("… ");
    }
    let offset = out.text.len();
    out.text.push_str(&text[start..end]);
    for i in first..=last {
        if hit[i] {
            out.highlights.push((
                offset + words[i].start - start,
                offset + words[i].end - start,
            ));
        }
    }
    if end < text.len() {
        out.text.push_str(" …");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn terms(t: &[&str]) -> Vec<String> {
        t.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn picks_the_window_with_the_most_distinct_terms() {
        let filler = "lorem ipsum dolor sit amet ".repeat(20);
        let text = format!("Rust appears here. {filler} Unsafe Rust is a superset. {filler}");
        let s = snippet(&text, &terms(&["unsafe", "rust"]));
        assert!(s.text.starts_with("… "), "{}", s.text);
        assert!(s.text.ends_with(" …"));
        assert_eq!(s.marked().matches('[').count(), 2, "{}", s.marked());
        assert!(s.marked().contains("[Unsafe] [Rust] is a superset"));
        for &(a, b) in &s.highlights {
            assert!(["Unsafe", "Rust"].contains(&&s.text[a..b]));
        }
    }

    #[test]
    fn short_texts_and_texts_without_matches() {
        let s = snippet("Tiny page about café crème", &terms(&["crème"]));
        assert_eq!(s.marked(), "Tiny page about café [crème]");
        let none = snippet("nothing to see here at all", &terms(&["absent"]));
        assert_eq!(none.text, "nothing to see here at all");
        assert!(none.highlights.is_empty());
        assert_eq!(snippet("", &terms(&["x"])), Snippet::default());
        // Lowercasing that changes byte lengths does not shift the marks.
        let s = snippet("İstanbul and KELVIN sign", &terms(&["and"]));
        assert_eq!(s.marked(), "İstanbul [and] KELVIN sign");
    }
}
