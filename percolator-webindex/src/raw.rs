//! How a page's HTML is kept in `documents:raw`: whole up to a configurable size
//! ([`DEFAULT_MAX_PAGE_BYTES`], 16 MiB), LZ4-compressed, and cut only when it would not fit —
//! over that size, or over the store's largest value ([`StoreLimits::max_value_bytes`]: 1 MiB on
//! etcd) once compressed. A cut page says so in its cell, so that `webindex stats` and the check
//! count cut pages from what is stored, whichever path loaded them.
//!
//! **Why compress.** HTML shrinks 4–10× under LZ4, which is what lets a page of several
//! megabytes fit etcd's 1 MiB values whole; compressing and decompressing run at gigabytes per
//! second, against tens of megabytes per second for the HTML parser that reads the page anyway.
//!
//! **The cell.** [`MAGIC`], a flags byte ([`FLAG_LZ4`], [`FLAG_CUT`]), then either the HTML or,
//! compressed, its length (`u32`, little-endian) and an LZ4 block. A value without the magic is
//! HTML stored as it was before this format (plain, and not known to be cut): stores written by
//! earlier versions read on. A new page is always stored with the header, even one whose HTML
//! starts with the magic bytes, so that only such a legacy value could be misread.
//!
//! [`StoreLimits::max_value_bytes`]: percolator_core::StoreLimits::max_value_bytes

use bytes::{BufMut, Bytes, BytesMut};

/// The largest page kept whole by default, in bytes of HTML (16 MiB); see
/// [`crate::LoadConfig::max_page_bytes`].
pub const DEFAULT_MAX_PAGE_BYTES: usize = 16 * 1024 * 1024;

/// The first bytes of every cell in this format: a NUL (which no HTML document starts with)
/// and `PRC1`.
pub const MAGIC: &[u8; 5] = b"\0PRC1";
/// Flag: the HTML is an LZ4 block, after its length.
pub const FLAG_LZ4: u8 = 1;
/// Flag: the page was longer than what is kept.
pub const FLAG_CUT: u8 = 2;

/// Pages shorter than this are stored uncompressed (LZ4 saves too little on them to pay for the
/// length field).
const COMPRESS_FROM: usize = 256;
/// LZ4 expands at most this many times (a run of one byte): a stored length above the block's
/// size times this is corrupt, and is refused before anything is allocated for it.
const LZ4_MAX_RATIO: usize = 255;

/// A page as stored: its HTML and whether it was cut.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredPage {
    /// The HTML kept (all of it unless `cut`).
    pub html: Bytes,
    /// The page was longer than what is kept.
    pub cut: bool,
}

/// Why a stored cell does not decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RawError {
    /// The cell has the magic, but the rest is not a page in this format.
    #[error("stored page is corrupt: {0}")]
    Corrupt(&'static str),
}

/// The cell for `html`: compressed when that makes it smaller. `cut` says whether `html` is
/// only the first part of the page.
pub fn encode(html: &[u8], cut: bool) -> Bytes {
    let cut_flag = if cut { FLAG_CUT } else { 0 };
    if html.len() >= COMPRESS_FROM
        && let Ok(length) = u32::try_from(html.len())
    {
        let block = lz4_flex::block::compress(html);
        if block.len() + 4 < html.len() {
            let mut cell = BytesMut::with_capacity(MAGIC.len() + 5 + block.len());
            cell.put_slice(MAGIC);
            cell.put_u8(FLAG_LZ4 | cut_flag);
            cell.put_u32_le(length);
            cell.put_slice(&block);
            return cell.freeze();
        }
    }
    let mut cell = BytesMut::with_capacity(MAGIC.len() + 1 + html.len());
    cell.put_slice(MAGIC);
    cell.put_u8(cut_flag);
    cell.put_slice(html);
    cell.freeze()
}

/// Whether the page in `cell` was cut, read from the header alone (nothing is decompressed).
/// A legacy cell (no magic) and a corrupt one answer `false`.
pub fn is_cut(cell: &[u8]) -> bool {
    cell.strip_prefix(MAGIC.as_slice())
        .and_then(|rest| rest.first())
        .is_some_and(|flags| flags & FLAG_CUT != 0)
}

/// The page in `cell`.
///
/// # Errors
/// [`RawError::Corrupt`] when `cell` has the magic but its flags, length or LZ4 block are not
/// valid. Nothing is allocated for a length the block could not hold.
pub fn decode(cell: &Bytes) -> Result<StoredPage, RawError> {
    let Some(rest) = cell.strip_prefix(MAGIC.as_slice()) else {
        return Ok(StoredPage {
            html: cell.clone(),
            cut: false,
        });
    };
    let (&flags, body) = rest
        .split_first()
        .ok_or(RawError::Corrupt("no flags byte"))?;
    if flags & !(FLAG_LZ4 | FLAG_CUT) != 0 {
        return Err(RawError::Corrupt("unknown flags"));
    }
    let cut = flags & FLAG_CUT != 0;
    if flags & FLAG_LZ4 == 0 {
        let start = MAGIC.len() + 1;
        return Ok(StoredPage {
            html: cell.slice(start..),
            cut,
        });
    }
    let (length, block) = body
        .split_first_chunk::<4>()
        .ok_or(RawError::Corrupt("no length"))?;
    let length = usize::try_from(u32::from_le_bytes(*length))
        .map_err(|_| RawError::Corrupt("length does not fit in memory"))?;
    if length > block.len().saturating_mul(LZ4_MAX_RATIO) {
        return Err(RawError::Corrupt("length larger than the block can hold"));
    }
    let mut html = vec![0; length];
    match lz4_flex::block::decompress_into(block, &mut html) {
        Ok(n) if n == length => Ok(StoredPage {
            html: Bytes::from(html),
            cut,
        }),
        Ok(_) => Err(RawError::Corrupt("the block is shorter than its length")),
        Err(_) => Err(RawError::Corrupt("the LZ4 block does not decode")),
    }
}

/// The HTML to index from `cell`: its page, or for a corrupt cell the stored bytes as they are
/// (so that a damaged page is still indexed by what it holds, never refused forever).
pub fn html_or_stored(cell: &Bytes) -> Bytes {
    decode(cell).map_or_else(|_| cell.clone(), |page| page.html)
}

/// A page made to fit: the cell to store and what it keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fitted {
    /// The cell ([`encode`]d).
    pub cell: Bytes,
    /// Bytes of HTML kept.
    pub kept: usize,
    /// Less than the whole page was kept.
    pub cut: bool,
}

/// Keeps as much of `html` as fits: at most `max_page_bytes` of it, and a cell of at most
/// `max_value_bytes`. Cuts fall on a UTF-8 character boundary when the HTML is UTF-8 there
/// (see [`cut_at`]).
pub fn fit(html: &Bytes, max_page_bytes: usize, max_value_bytes: usize) -> Fitted {
    let mut keep = cut_at(html, max_page_bytes);
    // Each round shrinks what is kept in proportion to how far the cell is over, with a margin:
    // compression ratios vary little along a page, so one or two rounds do.
    for _ in 0..16 {
        let cut = keep < html.len();
        let cell = encode(&html[..keep], cut);
        if cell.len() <= max_value_bytes {
            return Fitted {
                cell,
                kept: keep,
                cut,
            };
        }
        if keep == 0 {
            break;
        }
        let scaled = (keep as u128 * max_value_bytes as u128 / cell.len() as u128) * 15 / 16;
        keep = cut_at(html, usize::try_from(scaled).unwrap_or(0).min(keep - 1));
    }
    // Only for a cell limit below the header's size, or ratios no real page has.
    Fitted {
        cell: encode(&[], !html.is_empty()),
        kept: 0,
        cut: !html.is_empty(),
    }
}

/// Where to cut `html` to keep at most `max` bytes: `max` itself, or moved back to the start of
/// a UTF-8 sequence it would split (valid UTF-8 stays valid). `html.len()` when it is no longer.
pub fn cut_at(html: &[u8], max: usize) -> usize {
    if html.len() <= max {
        return html.len();
    }
    let mut cut = max;
    // Back off over at most 3 continuation bytes (0b10xx_xxxx).
    for _ in 0..3 {
        match html.get(cut) {
            Some(&b) if b & 0xC0 == 0x80 && cut > 0 => cut -= 1,
            _ => break,
        }
    }
    cut
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn page(len: usize) -> Bytes {
        let mut html = String::from("<html><body>");
        let mut i = 0u64;
        while html.len() < len {
            html.push_str(&format!("<p>paragraph {i} of the page, é</p>"));
            i += 1;
        }
        Bytes::from(html)
    }

    #[test]
    fn pages_round_trip_compressed_or_not() {
        for len in [0, 10, 255, 256, 4096, 1 << 20] {
            let html = page(len);
            for cut in [false, true] {
                let cell = encode(&html, cut);
                assert_eq!(is_cut(&cell), cut);
                assert_eq!(
                    decode(&cell).unwrap(),
                    StoredPage {
                        html: html.clone(),
                        cut
                    }
                );
            }
        }
        // HTML compresses: a megabyte is stored in a fraction of it.
        let html = page(1 << 20);
        assert!(encode(&html, false).len() < html.len() / 3);
        // Incompressible bytes are stored as they are, after the header.
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let noise: Vec<u8> = (0..10_000)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state.to_le_bytes()[3]
            })
            .collect();
        let cell = encode(&noise, false);
        assert_eq!(cell.len(), MAGIC.len() + 1 + noise.len());
    }

    #[test]
    fn cells_from_before_the_format_are_plain_html() {
        let legacy = Bytes::from_static(b"<html>old</html>");
        assert_eq!(
            decode(&legacy).unwrap(),
            StoredPage {
                html: legacy.clone(),
                cut: false
            }
        );
        assert!(!is_cut(&legacy));
        // A new page that happens to start with the magic is stored with a header all the same.
        let tricky = Bytes::from([MAGIC.as_slice(), &[FLAG_CUT], b"x"].concat());
        assert_eq!(decode(&encode(&tricky, false)).unwrap().html, tricky);
    }

    #[test]
    fn corrupt_cells_are_errors_not_panics_or_huge_allocations() {
        let good = encode(&page(10_000), true);
        let flags_at = MAGIC.len();
        let mut cases: Vec<Vec<u8>> = vec![
            MAGIC.to_vec(),
            [MAGIC.as_slice(), &[0x80]].concat(),
            [MAGIC.as_slice(), &[FLAG_LZ4, 1, 2]].concat(),
            // A length of 4 GiB for a block of 8 bytes.
            [
                MAGIC.as_slice(),
                &[FLAG_LZ4],
                &u32::MAX.to_le_bytes(),
                &[0; 8],
            ]
            .concat(),
        ];
        for cut in [flags_at + 6, good.len() - 1, good.len() / 2] {
            cases.push(good[..cut].to_vec());
        }
        let mut wrong_length = good.to_vec();
        wrong_length[flags_at + 1] ^= 1;
        cases.push(wrong_length);
        for case in cases {
            let cell = Bytes::from(case);
            assert!(decode(&cell).is_err(), "{cell:?}");
            // Indexed by what it holds.
            assert_eq!(html_or_stored(&cell), cell);
        }
    }

    #[test]
    fn fit_keeps_whole_pages_and_cuts_the_rest_to_the_limits() {
        let html = page(3 << 20);
        // Fits: kept whole.
        let whole = fit(&html, DEFAULT_MAX_PAGE_BYTES, 16 << 20);
        assert_eq!((whole.kept, whole.cut), (html.len(), false));
        // Over the page limit: cut to it.
        let limited = fit(&html, 1 << 20, 16 << 20);
        assert!(limited.cut && limited.kept <= 1 << 20 && limited.kept > (1 << 20) - 4);
        assert_eq!(
            decode(&limited.cell).unwrap().html,
            html.slice(..limited.kept)
        );
        // Over the store's value limit once compressed: cut until the cell fits, keeping most
        // of what does.
        let max_value = 64 * 1024;
        let squeezed = fit(&html, DEFAULT_MAX_PAGE_BYTES, max_value);
        assert!(squeezed.cut && squeezed.cell.len() <= max_value);
        assert!(squeezed.kept > 2 * max_value, "{}", squeezed.kept);
        let stored = decode(&squeezed.cell).unwrap();
        assert_eq!(stored.html, html.slice(..squeezed.kept));
        assert!(std::str::from_utf8(&stored.html).is_ok());
        // A limit smaller than the header keeps nothing, and says so.
        assert!(fit(&html, DEFAULT_MAX_PAGE_BYTES, 3).cut);
    }

    #[test]
    fn cuts_never_split_a_character() {
        let text = "é".repeat(100);
        for max in 0..text.len() {
            let at = cut_at(text.as_bytes(), max);
            assert!(at <= max && max - at <= 1 && text.is_char_boundary(at));
        }
        assert_eq!(cut_at(b"abc", 10), 3);
        // Not UTF-8 at the cut: cut there.
        assert_eq!(cut_at(&[0x80; 10], 5), 2);
    }
}
