//! Reading and writing WARC files, the archive format of Common Crawl and most
//! web crawlers, so the web-indexing pipeline can index real crawls.
//!
//! [`WarcReader`] parses records from any [`BufRead`]; [`open`] adds
//! transparent gzip support (Common Crawl compresses each record as its own
//! gzip member). [`html_pages`] picks the successful HTML responses out of a
//! stream of records, and [`write_warc`] writes pages as a WARC file that
//! [`html_pages`] reads back unchanged. Malformed input yields errors, never
//! panics, and memory use per record is bounded.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::Path;

use bytes::Bytes;
use flate2::Compression;
use flate2::read::MultiGzDecoder;
use flate2::write::GzEncoder;
use xxhash_rust::xxh3::{xxh3_64, xxh3_128_with_seed};

use super::sources::CrawledPage;
use crate::url::normalize;

/// The largest record body accepted (a larger `Content-Length` is malformed).
const MAX_CONTENT_LENGTH: u64 = 64 * 1024 * 1024;
/// The longest header line accepted, in bytes.
const MAX_LINE_BYTES: usize = 64 * 1024;
/// The most header lines one record may have.
const MAX_HEADER_LINES: usize = 1024;
/// How much of a body is allocated before its bytes actually arrive.
const MAX_BODY_PREALLOCATION: usize = 1024 * 1024;
/// The two gzip magic bytes.
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
/// The `WARC-Date` of every record [`write_warc`] writes.
const WRITE_DATE: &str = "2024-01-01T00:00:00Z";

/// An error reading a WARC file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WarcError {
    /// Reading (or decompressing) the input failed.
    #[error("I/O error reading WARC input: {0}")]
    Io(#[from] io::Error),
    /// The input is not valid WARC.
    #[error("malformed WARC record at byte {offset}: {reason}")]
    Malformed {
        /// Byte offset, in the (decompressed) stream, of the start of the
        /// record in which the problem was found.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
}

/// One WARC record: the headers the pipeline uses, and the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WarcRecord {
    /// The `WARC-Type` header, e.g. `response` (empty if the header is missing).
    pub warc_type: String,
    /// The `WARC-Target-URI` header, without any surrounding `<` `>`.
    pub target_uri: Option<String>,
    /// The record's own `Content-Type` header (not the HTTP one inside a
    /// `response` body).
    pub content_type: Option<String>,
    /// Exactly `Content-Length` bytes of record body.
    pub body: Bytes,
}

/// An iterator over the records of a WARC stream.
///
/// Accepts `WARC/1.0` and `WARC/1.1` records (any `WARC/` version line, in
/// fact), CRLF or bare LF line endings, header names in any case, folded
/// header lines, and missing or extra blank lines between records. The end of
/// input between records ends the iteration; the first error is returned once
/// and ends it too.
#[derive(Debug)]
pub struct WarcReader<R> {
    reader: R,
    offset: u64,
    done: bool,
}

impl<R: BufRead> WarcReader<R> {
    /// Reads records from `reader`, which must already be decompressed (see
    /// [`open`] for files).
    pub fn new(reader: R) -> Self {
        Self {
            reader,
            offset: 0,
            done: false,
        }
    }

    /// Reads one line (at most [`MAX_LINE_BYTES`]), without its `\n` or
    /// `\r\n`; `None` at the end of input.
    fn read_line(&mut self, record_start: u64) -> Result<Option<Vec<u8>>, WarcError> {
        let mut line = Vec::new();
        loop {
            let available = match self.reader.fill_buf() {
                Ok(buf) => buf,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e.into()),
            };
            if available.is_empty() {
                return Ok((!line.is_empty()).then_some(line));
            }
            let (used, complete) = match available.iter().position(|&b| b == b'\n') {
                Some(newline) => (newline + 1, true),
                None => (available.len(), false),
            };
            line.extend_from_slice(&available[..used]);
            self.reader.consume(used);
            self.offset += used as u64;
            if line.len() > MAX_LINE_BYTES {
                return Err(malformed(
                    record_start,
                    format!("header line longer than {MAX_LINE_BYTES} bytes"),
                ));
            }
            if complete {
                line.pop();
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                return Ok(Some(line));
            }
        }
    }

    fn read_record(&mut self) -> Result<Option<WarcRecord>, WarcError> {
        // Skip blank lines (record separators, stray or missing) up to the
        // version line; the end of input here is the regular end.
        let (start, version) = loop {
            let line_start = self.offset;
            match self.read_line(line_start)? {
                None => return Ok(None),
                Some(line) if line.trim_ascii().is_empty() => {}
                Some(line) => break (line_start, line),
            }
        };
        if !version.trim_ascii().starts_with(b"WARC/") {
            return Err(malformed(
                start,
                format!(
                    "expected a WARC/1.x version line, found {:?}",
                    preview(&version)
                ),
            ));
        }

        let headers = self.read_headers(start)?;
        let header = |name: &str| {
            headers
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.as_str())
        };
        let length = match header("Content-Length") {
            None => return Err(malformed(start, "missing Content-Length header".into())),
            Some(value) => value.parse::<u64>().map_err(|_| {
                malformed(
                    start,
                    format!("invalid Content-Length {:?}", preview(value.as_bytes())),
                )
            })?,
        };
        if length > MAX_CONTENT_LENGTH {
            return Err(malformed(
                start,
                format!("Content-Length {length} exceeds the limit of {MAX_CONTENT_LENGTH} bytes"),
            ));
        }
        let warc_type = header("WARC-Type").unwrap_or_default().to_owned();
        let target_uri = header("WARC-Target-URI").map(|uri| {
            let uri = uri
                .strip_prefix('<')
                .and_then(|u| u.strip_suffix('>'))
                .unwrap_or(uri);
            uri.to_owned()
        });
        let content_type = header("Content-Type").map(str::to_owned);

        // `length` is at most 64 MiB, so it fits a usize.
        let length = usize::try_from(length).unwrap_or(usize::MAX);
        let mut body = Vec::with_capacity(length.min(MAX_BODY_PREALLOCATION));
        let body_start = self.offset;
        let read = (&mut self.reader)
            .take(length as u64)
            .read_to_end(&mut body)?;
        self.offset += read as u64;
        if read < length {
            return Err(malformed(
                start,
                format!(
                    "truncated body: Content-Length is {length} but input ends after {read} \
                     body bytes (at byte {})",
                    body_start + read as u64
                ),
            ));
        }
        Ok(Some(WarcRecord {
            warc_type,
            target_uri,
            content_type,
            body: Bytes::from(body),
        }))
    }

    /// Reads `Name: value` lines up to the empty line ending the header.
    fn read_headers(&mut self, start: u64) -> Result<Vec<(String, String)>, WarcError> {
        let mut headers: Vec<(String, String)> = Vec::new();
        for _ in 0..MAX_HEADER_LINES {
            let Some(line) = self.read_line(start)? else {
                return Err(malformed(
                    start,
                    "input ends inside the record header".into(),
                ));
            };
            if line.is_empty() {
                return Ok(headers);
            }
            let line = String::from_utf8_lossy(&line);
            if line.starts_with([' ', '\t']) {
                // A folded continuation of the previous header's value.
                if let Some((_, value)) = headers.last_mut() {
                    value.push(' ');
                    value.push_str(line.trim());
                    continue;
                }
            }
            let Some((name, value)) = line.split_once(':') else {
                return Err(malformed(
                    start,
                    format!("header line without ':': {:?}", preview(line.as_bytes())),
                ));
            };
            headers.push((name.trim().to_owned(), value.trim().to_owned()));
        }
        Err(malformed(
            start,
            format!("more than {MAX_HEADER_LINES} header lines"),
        ))
    }
}

impl<R: BufRead> Iterator for WarcReader<R> {
    type Item = Result<WarcRecord, WarcError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.read_record() {
            Ok(Some(record)) => Some(Ok(record)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

fn malformed(offset: u64, reason: String) -> WarcError {
    WarcError::Malformed { offset, reason }
}

/// The start of `bytes`, for error messages.
fn preview(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).chars().take(60).collect()
}

/// Opens the WARC file at `path`, gzip-compressed (detected by the magic bytes
/// `1f 8b`, any number of concatenated members) or plain.
///
/// # Errors
/// [`WarcError::Io`] if the file cannot be opened or read.
pub fn open(path: &Path) -> Result<WarcReader<Box<dyn BufRead + Send>>, WarcError> {
    from_reader(File::open(path)?)
}

/// A WARC file read from `raw` as it arrives (a streamed upload), gzip-compressed or plain as
/// [`open`] detects it.
///
/// # Errors
/// [`WarcError::Io`] if the first bytes cannot be read.
pub fn from_reader(
    raw: impl Read + Send + 'static,
) -> Result<WarcReader<Box<dyn BufRead + Send>>, WarcError> {
    let mut raw = raw;
    let mut magic = Vec::with_capacity(GZIP_MAGIC.len());
    (&mut raw)
        .take(GZIP_MAGIC.len() as u64)
        .read_to_end(&mut magic)?;
    let is_gzip = magic == GZIP_MAGIC;
    Ok(reader_of(io::Cursor::new(magic).chain(raw), is_gzip))
}

/// A WARC file held in memory (an upload), gzip-compressed or plain as [`open`] detects it.
pub fn from_bytes(bytes: bytes::Bytes) -> WarcReader<Box<dyn BufRead + Send>> {
    let is_gzip = bytes.starts_with(&GZIP_MAGIC);
    reader_of(io::Cursor::new(bytes), is_gzip)
}

fn reader_of(
    raw: impl Read + Send + 'static,
    is_gzip: bool,
) -> WarcReader<Box<dyn BufRead + Send>> {
    let reader: Box<dyn BufRead + Send> = if is_gzip {
        Box::new(BufReader::new(MultiGzDecoder::new(raw)))
    } else {
        Box::new(BufReader::new(raw))
    };
    WarcReader::new(reader)
}

/// The HTML pages among the records of `reader`, whole (the loader cuts what it does not
/// keep).
///
/// Kept are `response` records whose body is an HTTP response with a 2xx
/// status and a `Content-Type` containing `html` (or none at all), and
/// `resource` records whose own `Content-Type` contains `html`; the page is
/// the HTTP body, resp. the record body, and its URL the `WARC-Target-URI`.
/// Skipped are records without a target URI, all other record types
/// (`warcinfo`, `request`, `metadata`, ...), and responses whose body is
/// chunked (`Transfer-Encoding: chunked`) or compressed (`Content-Encoding`
/// other than `identity`), as those bodies are not decoded here. So are pages
/// whose target URI [`normalize`] refuses (not an absolute `http` or `https`
/// URL, control characters, too long): the others get the normalized URL.
/// Errors of the reader are passed on.
pub fn html_pages<R: BufRead>(
    reader: WarcReader<R>,
) -> impl Iterator<Item = Result<CrawledPage, WarcError>> {
    html_pages_counted(reader, std::sync::Arc::default())
}

/// What [`html_pages_counted`] saw: records read, HTML pages kept, and HTML pages skipped for
/// their URL. The other records (`records - pages - bad_urls`) were not HTML pages. (Pages cut
/// are counted by the loader: [`LoadReport::cut`](crate::LoadReport::cut).)
#[derive(Debug, Default)]
pub struct WarcCounts {
    /// Records read.
    pub records: std::sync::atomic::AtomicUsize,
    /// HTML pages kept.
    pub pages: std::sync::atomic::AtomicUsize,
    /// HTML pages skipped because [`normalize`] refused their target URI (not counted in
    /// `pages`).
    pub bad_urls: std::sync::atomic::AtomicUsize,
}

/// [`html_pages`], counting into `counts` as it goes.
pub fn html_pages_counted<R: BufRead>(
    reader: WarcReader<R>,
    counts: std::sync::Arc<WarcCounts>,
) -> impl Iterator<Item = Result<CrawledPage, WarcError>> {
    use std::sync::atomic::Ordering::Relaxed;
    reader.filter_map(move |record| match record {
        Ok(record) => {
            counts.records.fetch_add(1, Relaxed);
            let page = page_of(record)?;
            let Ok(url) = normalize(&page.url) else {
                counts.bad_urls.fetch_add(1, Relaxed);
                return None;
            };
            counts.pages.fetch_add(1, Relaxed);
            Some(Ok(CrawledPage {
                url,
                html: page.html,
            }))
        }
        Err(e) => Some(Err(e)),
    })
}

/// The page of a record, uncut.
fn page_of(record: WarcRecord) -> Option<CrawledPage> {
    let html = if record.warc_type.eq_ignore_ascii_case("response") {
        http_html_body(&record.body)?
    } else if record.warc_type.eq_ignore_ascii_case("resource")
        && record
            .content_type
            .as_deref()
            .is_some_and(|t| t.to_ascii_lowercase().contains("html"))
    {
        record.body
    } else {
        return None;
    };
    Some(CrawledPage {
        url: record.target_uri?,
        html,
    })
}

/// The body of an HTTP response if it is a successful, uncompressed,
/// unchunked HTML response.
fn http_html_body(response: &Bytes) -> Option<Bytes> {
    let (head_len, separator_len) = header_end(response)?;
    let head = String::from_utf8_lossy(response.get(..head_len)?);
    let mut lines = head.lines();
    let mut status_line = lines.next()?.split_whitespace();
    if !status_line.next()?.starts_with("HTTP/") {
        return None;
    }
    let status: u16 = status_line.next()?.parse().ok()?;
    if !(200..300).contains(&status) {
        return None;
    }
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let (name, value) = (name.trim(), value.trim().to_ascii_lowercase());
        let rejected = (name.eq_ignore_ascii_case("Content-Type") && !value.contains("html"))
            || (name.eq_ignore_ascii_case("Transfer-Encoding") && value.contains("chunked"))
            || (name.eq_ignore_ascii_case("Content-Encoding")
                && !value.is_empty()
                && value != "identity");
        if rejected {
            return None;
        }
    }
    Some(response.slice(head_len + separator_len..))
}

/// Where the HTTP header ends: the first `\r\n\r\n` or `\n\n`, as
/// (offset, separator length).
fn header_end(response: &[u8]) -> Option<(usize, usize)> {
    let crlf = response.windows(4).position(|w| w == b"\r\n\r\n");
    let lf = response.windows(2).position(|w| w == b"\n\n");
    match (crlf, lf) {
        (Some(c), Some(l)) if l < c => Some((l, 2)),
        (Some(c), _) => Some((c, 4)),
        (None, Some(l)) => Some((l, 2)),
        (None, None) => None,
    }
}

/// Writes `pages` as a WARC/1.1 file: a `warcinfo` record, then one
/// `response` record per page holding a `200 OK` HTTP response with the page
/// as `text/html` body.
///
/// With `gzip` every record is its own gzip member, as in Common Crawl's
/// files. The output is reproducible: every record has the same fixed
/// `WARC-Date`, and record IDs are derived from the record's position and
/// contents. [`html_pages`] reads the pages back unchanged (if every URL is one
/// [`normalize`] gives back as it is).
///
/// # Errors
/// Errors of `out`, and [`io::ErrorKind::InvalidInput`] for a page URL with
/// control characters (which would break the record header).
pub fn write_warc<W: Write>(mut out: W, pages: &[CrawledPage], gzip: bool) -> io::Result<()> {
    let info = b"software: percolator-rs webindex\r\nformat: WARC File Format 1.1\r\n";
    let info_header = format!(
        "WARC/1.1\r\nWARC-Type: warcinfo\r\nWARC-Date: {WRITE_DATE}\r\n\
         WARC-Record-ID: <urn:uuid:{}>\r\nContent-Type: application/warc-fields\r\n\
         Content-Length: {}\r\n\r\n",
        record_id(0, "warcinfo", &(pages.len() as u64).to_le_bytes()),
        info.len()
    );
    write_record(&mut out, gzip, &[info_header.as_bytes(), info])?;

    for (index, page) in pages.iter().enumerate() {
        if page.url.chars().any(char::is_control) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("page URL {:?} contains control characters", page.url),
            ));
        }
        let http = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n\
             Content-Length: {}\r\n\r\n",
            page.html.len()
        );
        let header = format!(
            "WARC/1.1\r\nWARC-Type: response\r\nWARC-Target-URI: {}\r\n\
             WARC-Date: {WRITE_DATE}\r\nWARC-Record-ID: <urn:uuid:{}>\r\n\
             Content-Type: application/http; msgtype=response\r\nContent-Length: {}\r\n\r\n",
            page.url,
            record_id(index as u64 + 1, &page.url, &page.html),
            http.len() + page.html.len()
        );
        write_record(
            &mut out,
            gzip,
            &[header.as_bytes(), http.as_bytes(), &page.html],
        )?;
    }
    out.flush()
}

/// Writes the concatenation of `parts` and the record separator, as one gzip
/// member if `gzip`.
fn write_record<W: Write>(out: &mut W, gzip: bool, parts: &[&[u8]]) -> io::Result<()> {
    fn write_parts(out: &mut impl Write, parts: &[&[u8]]) -> io::Result<()> {
        for part in parts {
            out.write_all(part)?;
        }
        out.write_all(b"\r\n\r\n")
    }
    if gzip {
        let mut encoder = GzEncoder::new(&mut *out, Compression::default());
        write_parts(&mut encoder, parts)?;
        encoder.finish()?;
        Ok(())
    } else {
        write_parts(out, parts)
    }
}

/// A deterministic UUID (version 8, "custom") for the record at `index` with
/// the given target and body.
fn record_id(index: u64, target: &str, body: &[u8]) -> String {
    let hash = xxh3_128_with_seed(body, xxh3_64(target.as_bytes()) ^ index);
    let hash = (hash & !(0xF << 76)) | (0x8 << 76); // version 8
    let hash = (hash & !(0b11 << 62)) | (0b10 << 62); // RFC 9562 variant
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        hash >> 96,
        (hash >> 80) & 0xFFFF,
        (hash >> 64) & 0xFFFF,
        (hash >> 48) & 0xFFFF,
        hash & 0xFFFF_FFFF_FFFF
    )
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::super::synthetic::SyntheticCrawl;
    use super::*;

    fn sample_pages() -> Vec<CrawledPage> {
        let mut pages: Vec<CrawledPage> = SyntheticCrawl::new(25, 9).initial().collect();
        pages.push(CrawledPage {
            url: "http://odd.example/bytes?q=1".into(),
            html: Bytes::from_static(b"<p>caf\xe9 \r\n\r\nWARC/1.0\r\n</p>"),
        });
        pages.push(CrawledPage {
            url: "http://odd.example/empty".into(),
            html: Bytes::new(),
        });
        pages
    }

    fn read_pages(data: &[u8]) -> Vec<Result<CrawledPage, WarcError>> {
        html_pages(WarcReader::new(data)).collect()
    }

    fn ok_pages(data: &[u8]) -> Vec<CrawledPage> {
        read_pages(data)
            .into_iter()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    fn round_trip(gzip: bool) {
        let pages = sample_pages();
        let file = tempfile::NamedTempFile::new().unwrap();
        write_warc(file.as_file(), &pages, gzip).unwrap();
        let raw = std::fs::read(file.path()).unwrap();
        assert_eq!(raw.starts_with(&GZIP_MAGIC), gzip);

        let read: Vec<CrawledPage> = html_pages(open(file.path()).unwrap())
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(read, pages);

        let records: Vec<WarcRecord> = open(file.path())
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(records.len(), pages.len() + 1);
        assert_eq!(records[0].warc_type, "warcinfo");
        assert!(records[1..].iter().all(|r| r.warc_type == "response"
            && r.content_type.as_deref() == Some("application/http; msgtype=response")));
    }

    #[test]
    fn round_trip_plain() {
        round_trip(false);
    }

    #[test]
    fn round_trip_gzip() {
        round_trip(true);
    }

    #[test]
    fn gzip_output_has_one_member_per_record() {
        let pages = sample_pages();
        let mut out = Vec::new();
        write_warc(&mut out, &pages, true).unwrap();
        // A single-member decoder stops after the first member: the warcinfo.
        let mut first = String::new();
        flate2::read::GzDecoder::new(out.as_slice())
            .read_to_string(&mut first)
            .unwrap();
        assert!(first.starts_with("WARC/1.1\r\nWARC-Type: warcinfo\r\n"));
        assert!(first.ends_with("\r\n\r\n"));
        assert!(!first.contains("response"));
    }

    #[test]
    fn written_records_are_well_formed() {
        let pages = sample_pages();
        let mut out = Vec::new();
        write_warc(&mut out, &pages, false).unwrap();
        let text = String::from_utf8_lossy(&out);
        let ids: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("WARC-Record-ID: <urn:uuid:"))
            .collect();
        assert_eq!(ids.len(), pages.len() + 1);
        assert_eq!(ids.iter().collect::<HashSet<_>>().len(), ids.len());
        assert!(
            ids.iter()
                .all(|id| id.len() == 37 && id.as_bytes()[14] == b'8')
        );
        assert_eq!(
            text.matches("WARC-Date: 2024-01-01T00:00:00Z\r\n").count(),
            ids.len()
        );

        let mut again = Vec::new();
        write_warc(&mut again, &pages, false).unwrap();
        assert_eq!(out, again, "output is reproducible");
    }

    #[test]
    fn write_rejects_urls_that_would_break_headers() {
        let page = CrawledPage {
            url: "http://x.example/\r\nWARC-Type: evil".into(),
            html: Bytes::new(),
        };
        let err = write_warc(Vec::new(), &[page], false).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    }

    /// A CRLF record with the given headers and body.
    fn record(headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
        let mut out = b"WARC/1.0\r\n".to_vec();
        for (name, value) in headers {
            out.extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
        }
        out.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
        out.extend_from_slice(body);
        out.extend_from_slice(b"\r\n\r\n");
        out
    }

    fn response(url: &str, http: &str) -> Vec<u8> {
        record(
            &[("WARC-Type", "response"), ("WARC-Target-URI", url)],
            http.as_bytes(),
        )
    }

    #[test]
    fn only_html_responses_and_resources_become_pages() {
        let mut data = Vec::new();
        data.extend(record(&[("WARC-Type", "warcinfo")], b"software: test\r\n"));
        data.extend(record(
            &[
                ("WARC-Type", "request"),
                ("WARC-Target-URI", "http://a.example/"),
            ],
            b"GET / HTTP/1.1\r\nHost: a.example\r\n\r\n",
        ));
        data.extend(response(
            "http://a.example/",
            "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n<p>kept</p>",
        ));
        data.extend(record(
            &[
                ("WARC-Type", "metadata"),
                ("WARC-Target-URI", "http://a.example/"),
            ],
            b"fetchTimeMs: 12\r\n",
        ));
        data.extend(response(
            "http://a.example/missing",
            "HTTP/1.1 404 Not Found\r\nContent-Type: text/html\r\n\r\n<p>gone</p>",
        ));
        data.extend(response(
            "http://a.example/moved",
            "HTTP/1.1 301 Moved\r\nLocation: /\r\n\r\n",
        ));
        data.extend(response(
            "http://a.example/data.json",
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{}",
        ));
        data.extend(response(
            "http://a.example/chunked",
            "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        ));
        data.extend(response(
            "http://a.example/gz",
            "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Encoding: gzip\r\n\r\n\x1f",
        ));
        data.extend(response(
            "http://a.example/untyped",
            "HTTP/1.0 204\r\nServer: x\r\n\r\n<p>no type</p>",
        ));
        data.extend(response(
            "http://a.example/xhtml",
            "HTTP/1.1 200 OK\r\ncontent-type: Application/XHTML+XML\r\n\r\n<p>x</p>",
        ));
        data.extend(record(
            &[("WARC-Type", "response")],
            b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n<p>no uri</p>",
        ));
        data.extend(record(
            &[
                ("WARC-Type", "resource"),
                ("WARC-Target-URI", "<file:///crawl/page.html>"),
                ("Content-Type", "text/html"),
            ],
            b"<p>resource</p>",
        ));
        data.extend(record(
            &[
                ("WARC-Type", "resource"),
                ("WARC-Target-URI", "http://a.example/page.html"),
                ("Content-Type", "text/html"),
            ],
            b"<p>http resource</p>",
        ));
        data.extend(record(
            &[
                ("WARC-Type", "resource"),
                ("WARC-Target-URI", "file:///crawl/notes.txt"),
                ("Content-Type", "text/plain"),
            ],
            b"plain",
        ));
        // HTML pages with URLs the pipeline refuses are skipped and counted; the others get
        // the normalized URL.
        data.extend(response(
            "javascript:alert(document.domain)//x",
            "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n<p>script</p>",
        ));
        data.extend(response(
            "/relative/page.html",
            "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n<p>relative</p>",
        ));
        data.extend(response(
            "HTTP://A.Example:80/z/../norm#frag",
            "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n<p>normalized</p>",
        ));
        let counts = std::sync::Arc::new(WarcCounts::default());
        let pages: Vec<CrawledPage> =
            html_pages_counted(WarcReader::new(&data[..]), std::sync::Arc::clone(&counts))
                .collect::<Result<_, _>>()
                .unwrap();
        let got: Vec<(&str, &[u8])> = pages
            .iter()
            .map(|p| (p.url.as_str(), &p.html[..]))
            .collect();
        assert_eq!(
            got,
            [
                ("http://a.example/", &b"<p>kept</p>"[..]),
                ("http://a.example/untyped", b"<p>no type</p>"),
                ("http://a.example/xhtml", b"<p>x</p>"),
                ("http://a.example/page.html", b"<p>http resource</p>"),
                ("http://a.example/norm", b"<p>normalized</p>"),
            ]
        );
        let count =
            |c: &std::sync::atomic::AtomicUsize| c.load(std::sync::atomic::Ordering::Relaxed);
        // The `file:` resource is an HTML page with a bad URL too; the text one is no page.
        assert_eq!(
            (
                count(&counts.records),
                count(&counts.pages),
                count(&counts.bad_urls)
            ),
            (18, 5, 3)
        );
        assert_eq!(ok_pages(&data), pages);
    }

    #[test]
    fn lf_only_records_and_loose_separators_are_accepted() {
        let data = b"\n\nWARC/1.1\nwarc-type: response\nWARC-TARGET-URI: http://lf.example/\n\
            content-length: 50\n\nHTTP/1.1 200 OK\ncontent-type: text/html\n\n<p>lf</p>\
            WARC/1.0\r\nWARC-Type: resource\r\nWARC-Target-URI: http://b.example/\r\n\
            Content-Type: text/html\r\nX-Folded: first\r\n  second\r\nContent-Length: 4\r\n\r\n\
            <b/>\r\n\r\n\r\n\r\n\n";
        let records: Vec<WarcRecord> = WarcReader::new(&data[..])
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(records.len(), 2);
        assert_eq!(records[0].target_uri.as_deref(), Some("http://lf.example/"));
        assert_eq!(records[0].body.len(), 50);
        assert_eq!(records[1].content_type.as_deref(), Some("text/html"));
        assert_eq!(
            ok_pages(data),
            [
                CrawledPage {
                    url: "http://lf.example/".into(),
                    html: Bytes::from_static(b"<p>lf</p>"),
                },
                CrawledPage {
                    url: "http://b.example/".into(),
                    html: Bytes::from_static(b"<b/>"),
                },
            ]
        );
    }

    #[test]
    fn truncated_file_is_malformed_after_the_complete_records() {
        let pages = sample_pages();
        let mut out = Vec::new();
        write_warc(&mut out, &pages[..3], false).unwrap();
        let last_record_start = out.windows(9).rposition(|w| w == b"WARC/1.1\r").unwrap();
        out.truncate(out.len() - 30);

        let read = read_pages(&out);
        assert_eq!(read.len(), 3);
        assert_eq!(read[0].as_ref().unwrap(), &pages[0]);
        assert_eq!(read[1].as_ref().unwrap(), &pages[1]);
        match &read[2] {
            Err(WarcError::Malformed { offset, reason }) => {
                assert_eq!(*offset, last_record_start as u64);
                assert!(reason.contains("truncated"), "{reason}");
            }
            other => panic!("expected Malformed, got {other:?}"),
        }

        // Cut inside a header: malformed too. The iterator ends after an error.
        let mut reader = WarcReader::new(&b"WARC/1.0\r\nWARC-Type: response\r\nContent-Len"[..]);
        assert!(matches!(
            reader.next(),
            Some(Err(WarcError::Malformed { offset: 0, .. }))
        ));
        assert!(reader.next().is_none());
    }

    #[test]
    fn truncated_gzip_file_is_an_error() {
        let mut out = Vec::new();
        write_warc(&mut out, &sample_pages(), true).unwrap();
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), &out[..out.len() - 10]).unwrap();
        let pages = sample_pages();
        let results: Vec<_> = html_pages(open(file.path()).unwrap()).collect();
        let (last, complete) = results.split_last().unwrap();
        assert!(matches!(last, Err(WarcError::Io(_))), "{last:?}");
        assert!(complete.len() <= pages.len());
        for (result, page) in complete.iter().zip(&pages) {
            assert_eq!(result.as_ref().unwrap(), page);
        }
    }

    #[test]
    fn bad_content_length_is_malformed() {
        let cases: [&[u8]; 4] = [
            b"WARC/1.0\r\nWARC-Type: warcinfo\r\n\r\nbody\r\n\r\n",
            b"WARC/1.0\r\nContent-Length: twelve\r\n\r\nbody\r\n\r\n",
            b"WARC/1.0\r\nContent-Length: -4\r\n\r\nbody\r\n\r\n",
            b"WARC/1.0\r\nContent-Length: 67108865\r\n\r\nbody\r\n\r\n",
        ];
        for data in cases {
            let mut reader = WarcReader::new(data);
            match reader.next() {
                Some(Err(WarcError::Malformed { offset: 0, reason })) => {
                    assert!(reason.contains("Content-Length"), "{reason}");
                }
                other => panic!("expected Malformed, got {other:?}"),
            }
            assert!(reader.next().is_none());
        }
        // The offset is that of the bad record, not of the file start.
        let mut data = record(&[("WARC-Type", "warcinfo")], b"x");
        let second = data.len() as u64 + 2;
        data.extend_from_slice(b"\r\nWARC/1.0\r\nWARC-Type: resource\r\n\r\n");
        let results: Vec<_> = WarcReader::new(&data[..]).collect();
        assert_eq!(results.len(), 2);
        assert!(matches!(results[1], Err(WarcError::Malformed { offset, .. }) if offset == second));
    }

    #[test]
    fn other_garbage_is_malformed() {
        for data in [
            &b"<html>not a warc</html>"[..],
            b"WARC/1.0\r\nno colon here\r\n\r\n",
            &[
                b"WARC/1.0\r\nX: ".as_slice(),
                &[b'y'; MAX_LINE_BYTES + 1],
                b"\r\n",
            ]
            .concat(),
        ] {
            let results: Vec<_> = WarcReader::new(data).collect();
            assert_eq!(results.len(), 1);
            assert!(
                matches!(results[0], Err(WarcError::Malformed { .. })),
                "{results:?}"
            );
        }
        assert!(WarcReader::new(&b""[..]).next().is_none());
        assert!(WarcReader::new(&b"\r\n\n \r\n"[..]).next().is_none());
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut rng = StdRng::seed_from_u64(77);
        let valid = record(
            &[
                ("WARC-Type", "response"),
                ("WARC-Target-URI", "http://r.example/"),
            ],
            b"HTTP/1.1 200 OK\r\n\r\n<p>x</p>",
        );
        for round in 0..300 {
            let mut data = if round % 2 == 0 {
                valid.clone()
            } else {
                Vec::new()
            };
            for _ in 0..rng.random_range(0..200) {
                if data.is_empty() || rng.random_bool(0.5) {
                    data.push(rng.random());
                } else {
                    let at = rng.random_range(0..data.len());
                    data[at] = rng.random();
                }
            }
            // Terminates, and nothing follows an error.
            let results: Vec<_> = html_pages(WarcReader::new(&data[..])).collect();
            if let Some(position) = results.iter().position(Result::is_err) {
                assert_eq!(position, results.len() - 1);
            }
        }
    }

    #[test]
    fn open_reads_short_and_missing_files() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.warc");
        std::fs::write(&empty, b"").unwrap();
        assert!(open(&empty).unwrap().next().is_none());
        let one = dir.path().join("one.warc");
        std::fs::write(&one, b"W").unwrap();
        assert!(matches!(
            open(&one).unwrap().next(),
            Some(Err(WarcError::Malformed { .. }))
        ));
        assert!(matches!(
            open(&dir.path().join("missing.warc.gz")),
            Err(WarcError::Io(_))
        ));
    }
}
