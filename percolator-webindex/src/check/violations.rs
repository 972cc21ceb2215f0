//! Violations as the check reports them: grouped by what is wrong, counted, and with the first
//! rows they concern named, their bytes escaped, so that a stored key of any bytes can be
//! found (and cannot garble the report).

use std::fmt;

use serde::{Deserialize, Serialize};

/// How many rows a [`Violation`] names (it counts them all).
pub const NAMED_ROWS: usize = 10;

/// One way an invariant does not hold, and the rows it concerns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Violation {
    /// The invariant that does not hold (numbered as in [`crate::check`](mod@crate::check)).
    pub invariant: u8,
    /// What is wrong, the same words for every row it concerns.
    pub what: String,
    /// How many rows or index entries it concerns.
    pub count: u64,
    /// The first [`NAMED_ROWS`] rows, each `table:"row"` (bytes escaped as Rust escapes
    /// strings, invalid UTF-8 as `\xNN`) and what was found there.
    pub rows: Vec<String>,
    /// Whether more rows were found than [`Self::rows`] names.
    #[serde(default)]
    pub more_rows: bool,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invariant {}: {} ({}): {}",
            self.invariant,
            self.what,
            self.count,
            self.rows.join("; ")
        )?;
        if self.more_rows {
            write!(f, "; …")?;
        }
        Ok(())
    }
}

/// The violations a check collects, in the order first found.
#[derive(Debug, Default)]
pub(super) struct Violations(Vec<Violation>);

impl Violations {
    /// Records that `what` (of invariant `invariant`) holds for `count` rows or entries, at
    /// `row` (see [`row_name`]).
    pub(super) fn add_n(&mut self, invariant: u8, what: &str, count: u64, row: impl Into<String>) {
        let found = match self
            .0
            .iter_mut()
            .position(|v| v.invariant == invariant && v.what == what)
        {
            Some(i) => &mut self.0[i],
            None => {
                self.0.push(Violation {
                    invariant,
                    what: what.to_owned(),
                    count: 0,
                    rows: Vec::new(),
                    more_rows: false,
                });
                let last = self.0.len() - 1;
                &mut self.0[last]
            }
        };
        found.count += count;
        if found.rows.len() < NAMED_ROWS {
            found.rows.push(row.into());
        } else {
            found.more_rows = true;
        }
    }

    /// Records one row for which `what` (of invariant `invariant`) holds.
    pub(super) fn add(&mut self, invariant: u8, what: &str, row: impl Into<String>) {
        self.add_n(invariant, what, 1, row);
    }

    /// What was found.
    pub(super) fn into_vec(self) -> Vec<Violation> {
        self.0
    }
}

/// `bytes` quoted, with what could not be read as it is escaped: printable UTF-8 as it is,
/// quotes, backslashes and control characters as Rust escapes them (`\n`, `\u{1b}`), and
/// bytes that are not UTF-8 as `\xNN`.
pub fn escaped(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() + 2);
    out.push('"');
    for chunk in bytes.utf8_chunks() {
        out.extend(chunk.valid().escape_debug());
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out.push('"');
    out
}

/// How a violation names a row: `table:"row"`, the row [`escaped`].
pub fn row_name(table: &[u8], row: &[u8]) -> String {
    format!("{}:{}", String::from_utf8_lossy(table), escaped(row))
}

/// [`row_name`] followed by what was found there.
pub(super) fn at(table: &[u8], row: &[u8], found: impl fmt::Display) -> String {
    format!("{} ({found})", row_name(table, row))
}

/// An optional cell for a violation's details: [`escaped`], or `none`.
pub(super) fn cell(value: Option<&[u8]>) -> String {
    value.map_or_else(|| "none".to_owned(), escaped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_bytes_are_named_readably() {
        assert_eq!(escaped(b"http://a/"), r#""http://a/""#);
        assert_eq!(escaped(b"a\nb\t\"\\"), r#""a\nb\t\"\\""#);
        assert_eq!(
            escaped(b"\x1b[2J\xff\xfe\xc3\xa9"),
            r#""\u{1b}[2J\xff\xfeé""#
        );
        assert_eq!(row_name(b"documents", b"x\n"), r#"documents:"x\n""#);
        assert_eq!(cell(None), "none");
    }

    #[test]
    fn violations_count_every_row_and_name_the_first_ten() {
        let mut v = Violations::default();
        for i in 0..25 {
            v.add(4, "index entries missing", format!("row {i}"));
        }
        v.add_n(6, "corpus counts differ", 3, "corpus:\"shard-00\"");
        let found = v.into_vec();
        assert_eq!(found.len(), 2);
        assert_eq!((found[0].count, found[0].rows.len()), (25, NAMED_ROWS));
        assert_eq!(found[0].rows[9], "row 9");
        assert!(found[0].to_string().ends_with("row 9; …"), "{}", found[0]);
        assert_eq!(
            found[1].to_string(),
            r#"invariant 6: corpus counts differ (3): corpus:"shard-00""#
        );
    }
}
