//! Crawled pages and the simplest source of them: a directory of HTML files.
//!
//! Every input of the web-indexing pipeline (a directory tree, a WARC file, the
//! synthetic crawl) produces [`CrawledPage`]s, whole: the loader decides how much of a page
//! to keep, and counts the pages it cuts ([`crate::load`]). A file is read only up to one byte
//! past [`HtmlFiles::with_max_page_bytes`], so that a huge file costs no more memory than the
//! loader would keep.

use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use bytes::Bytes;
use url::Url;

use crate::raw;
use crate::url::normalize;

/// One crawled page: its URL and raw HTML bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrawledPage {
    /// The URL the page was fetched from.
    pub url: String,
    /// The raw (undecoded) HTML bytes.
    pub html: Bytes,
}

/// The base URL of [`html_files`] when none is given: pages of a directory get URLs under it.
pub const DEFAULT_BASE_URL: &str = "http://localhost/";

/// Every `*.html` / `*.htm` file under `dir` (recursive, sorted by path), read one at a time
/// as the iterator is advanced: the walk keeps only the paths, so memory does not grow with the
/// size of the tree's contents.
///
/// The extension match is case-insensitive. Symbolic links to files are
/// followed; symbolic links to directories are not (so link cycles cannot loop).
///
/// The URL of a page is `base_url` — [`DEFAULT_BASE_URL`] (`http://localhost/`) when `None` —
/// joined with the file's path relative to `dir` (`/`-separated, each segment
/// percent-encoded): e.g. `http://example.org/` and `a/b.html` give
/// `http://example.org/a/b.html`, and without a base `http://localhost/a/b.html`. A base
/// without a trailing `/` is treated as a directory all the same. The URLs depend only on the
/// paths relative to `dir`, not on where the tree is, and pass
/// [`normalize`] unchanged (the base is normalized first: its fragment
/// is dropped).
///
/// A file is read up to one byte past [`raw::DEFAULT_MAX_PAGE_BYTES`] (16 MiB; see
/// [`HtmlFiles::with_max_page_bytes`]): the loader then cuts it, and counts it as cut.
///
/// # Errors
/// Any I/O error while walking the tree (naming the directory), and
/// [`io::ErrorKind::InvalidInput`] when `base_url` is not an absolute `http` or `https` URL
/// with a host (e.g. `file:///srv/site/` or `mailto:x`), naming it and why. A file that cannot
/// be read is an error item of the iterator, naming the file.
pub fn html_files(dir: &Path, base_url: Option<&str>) -> io::Result<HtmlFiles> {
    let base = parse_base(base_url.unwrap_or(DEFAULT_BASE_URL))?;
    let mut files = Vec::new();
    collect_html_files(dir, &mut files)?;
    files.sort();
    Ok(HtmlFiles {
        base,
        dir: dir.to_path_buf(),
        files: files.into_iter(),
        max_page_bytes: raw::DEFAULT_MAX_PAGE_BYTES,
    })
}

/// The pages of a directory tree, read lazily (see [`html_files`]).
#[derive(Debug)]
pub struct HtmlFiles {
    base: Url,
    dir: PathBuf,
    files: std::vec::IntoIter<PathBuf>,
    max_page_bytes: usize,
}

impl HtmlFiles {
    /// The URL prefix every page of this tree has: the base URL (normalized) as a directory,
    /// with a trailing `/`. Never fails (the `Result` is kept for callers written when it
    /// could).
    pub fn url_prefix(&self) -> io::Result<String> {
        let mut prefix = self.base.to_string();
        if !prefix.ends_with('/') {
            prefix.push('/');
        }
        Ok(prefix)
    }

    /// Reads files up to one byte past `max_page_bytes` (give the loader's
    /// [`LoadConfig::max_page_bytes`](crate::LoadConfig::max_page_bytes)): enough for the loader
    /// to see that a longer page is cut, and no more held in memory.
    #[must_use]
    pub fn with_max_page_bytes(mut self, max_page_bytes: usize) -> Self {
        self.max_page_bytes = max_page_bytes;
        self
    }

    fn read(&self, path: &Path) -> io::Result<CrawledPage> {
        let url = url_under_base(&self.base, &self.dir, path)?;
        let mut html = Vec::new();
        let limit = u64::try_from(self.max_page_bytes)
            .unwrap_or(u64::MAX)
            .saturating_add(1);
        fs::File::open(path)
            .and_then(|file| file.take(limit).read_to_end(&mut html))
            .map_err(|e| with_path(path, e))?;
        Ok(CrawledPage {
            url,
            html: Bytes::from(html),
        })
    }
}

impl Iterator for HtmlFiles {
    type Item = io::Result<CrawledPage>;

    fn next(&mut self) -> Option<Self::Item> {
        let path = self.files.next()?;
        Some(self.read(&path))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.files.size_hint()
    }
}

impl ExactSizeIterator for HtmlFiles {}

/// `e` with `path` in its message (the OS's own message names no file).
fn with_path(path: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

fn invalid_input(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

/// The base URL `base`, normalized and without query, if it is an absolute `http` or `https`
/// URL with a host.
fn parse_base(base: &str) -> io::Result<Url> {
    let normalized = normalize(base)
        .map_err(|e| invalid_input(format!("base URL (http or https only): {e}")))?;
    let mut url = Url::parse(&normalized)
        .map_err(|e| invalid_input(format!("base URL {normalized}: {e}")))?;
    if url.cannot_be_a_base() {
        return Err(invalid_input(format!(
            "base URL {normalized} cannot have a path"
        )));
    }
    // A directory: the pages' URLs get no query from it.
    url.set_query(None);
    Ok(url)
}

fn is_html_file(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("html") || e.eq_ignore_ascii_case("htm"))
}

fn collect_html_files(dir: &Path, out: &mut Vec<PathBuf>) -> io::Result<()> {
    // Explicit stack instead of recursion: deep trees cannot overflow it.
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in fs::read_dir(&dir).map_err(|e| with_path(&dir, e))? {
            let entry = entry.map_err(|e| with_path(&dir, e))?;
            let path = entry.path();
            let file_type = entry.file_type().map_err(|e| with_path(&path, e))?;
            if file_type.is_dir() {
                pending.push(path);
            } else if is_html_file(&path)
                && (file_type.is_file() || (file_type.is_symlink() && path.is_file()))
            {
                out.push(path);
            }
        }
    }
    Ok(())
}

fn url_under_base(base: &Url, dir: &Path, path: &Path) -> io::Result<String> {
    let relative = path.strip_prefix(dir).map_err(|e| {
        invalid_input(format!(
            "{} not under {}: {e}",
            path.display(),
            dir.display()
        ))
    })?;
    let mut url = base.clone();
    {
        let mut segments = url
            .path_segments_mut()
            .map_err(|()| invalid_input(format!("base URL {base} cannot have a path")))?;
        // Drop the empty segment a trailing '/' leaves, then append ours.
        segments.pop_if_empty();
        segments.extend(
            relative
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned()),
        );
    }
    Ok(url.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, contents: &str) {
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).unwrap();
        }
        fs::write(path, contents).unwrap();
    }

    fn sample_tree() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(&root.join("index.html"), "<title>root</title>");
        write(&root.join("notes.txt"), "not html");
        write(&root.join("b/deep/page.htm"), "<title>deep</title>");
        write(&root.join("a/one.html"), "<title>one</title>");
        write(&root.join("a/UPPER.HTML"), "<title>upper</title>");
        write(&root.join("a/with space.html"), "<title>space</title>");
        write(&root.join("a/image.png"), "\u{89}PNG");
        fs::create_dir_all(root.join("empty")).unwrap();
        dir
    }

    #[test]
    fn html_files_with_base_url() {
        let dir = sample_tree();
        let pages: Vec<CrawledPage> = html_files(dir.path(), Some("http://example.org/"))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let urls: Vec<&str> = pages.iter().map(|p| p.url.as_str()).collect();
        assert_eq!(
            urls,
            [
                "http://example.org/a/UPPER.HTML",
                "http://example.org/a/one.html",
                "http://example.org/a/with%20space.html",
                "http://example.org/b/deep/page.htm",
                "http://example.org/index.html",
            ]
        );
        assert_eq!(pages[1].html, Bytes::from_static(b"<title>one</title>"));
        assert_eq!(pages[3].html, Bytes::from_static(b"<title>deep</title>"));
    }

    #[test]
    fn base_url_without_trailing_slash_is_a_directory() {
        let dir = sample_tree();
        let pages: Vec<CrawledPage> = html_files(dir.path(), Some("http://example.org/site"))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(pages[0].url, "http://example.org/site/a/UPPER.HTML");
    }

    /// Without a base URL, pages get URLs under `http://localhost/` from their paths relative
    /// to the directory (percent-encoded), whatever path names the directory.
    #[test]
    fn html_files_without_base_url_are_under_localhost() {
        let dir = sample_tree();
        let read = |root: &Path| -> Vec<(String, Bytes)> {
            html_files(root, None)
                .unwrap()
                .map(|page| {
                    let page = page.unwrap();
                    (page.url, page.html)
                })
                .collect()
        };
        let pages = read(dir.path());
        let urls: Vec<&str> = pages.iter().map(|(url, _)| url.as_str()).collect();
        assert_eq!(
            urls,
            [
                "http://localhost/a/UPPER.HTML",
                "http://localhost/a/one.html",
                "http://localhost/a/with%20space.html",
                "http://localhost/b/deep/page.htm",
                "http://localhost/index.html",
            ]
        );
        let files = [
            "a/UPPER.HTML",
            "a/one.html",
            "a/with space.html",
            "b/deep/page.htm",
            "index.html",
        ];
        for ((url, html), file) in pages.iter().zip(files) {
            assert_eq!(normalize(url).as_deref(), Ok(url.as_str()));
            assert_eq!(fs::read(dir.path().join(file)).unwrap(), *html);
        }
        // Another path to the same tree (not the canonical one) gives the same URLs.
        let roundabout = dir.path().join("a").join("..");
        assert_eq!(read(roundabout.as_path()), pages);
        let files = html_files(dir.path(), None).unwrap();
        assert_eq!(files.url_prefix().unwrap(), DEFAULT_BASE_URL);
    }

    #[test]
    fn base_url_is_normalized() {
        let dir = sample_tree();
        let files = html_files(dir.path(), Some("HTTP://Example.ORG:80/site/?q=1#top")).unwrap();
        assert_eq!(files.url_prefix().unwrap(), "http://example.org/site/");
        let first = files.map(Result::unwrap).next().unwrap();
        assert_eq!(first.url, "http://example.org/site/a/UPPER.HTML");
    }

    #[test]
    fn bad_base_url_is_invalid_input() {
        let dir = sample_tree();
        for base in [
            "not a url",
            "mailto:someone@example.org",
            "file:///srv/site/",
            "javascript:alert(1)//",
            "ftp://example.org/",
            "http:///nohost",
        ] {
            let err = html_files(dir.path(), Some(base)).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{base}");
            assert!(err.to_string().contains(base), "names {base}: {err}");
        }
    }

    #[test]
    fn missing_dir_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let err = html_files(&dir.path().join("nope"), None).unwrap_err();
        assert!(err.to_string().contains("nope"), "{err}");
    }

    #[test]
    fn files_are_read_whole_up_to_one_byte_past_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let big = "x".repeat(raw::DEFAULT_MAX_PAGE_BYTES / 8 + 10);
        write(&dir.path().join("big.html"), &big);
        let read = |max: Option<usize>| -> Vec<CrawledPage> {
            let files = html_files(dir.path(), None).unwrap();
            let files = match max {
                Some(max) => files.with_max_page_bytes(max),
                None => files,
            };
            files.map(Result::unwrap).collect()
        };
        // By default, a 2 MiB page is read whole.
        assert_eq!(read(None)[0].html, big.as_bytes());
        // Under a smaller limit, one byte past it: the loader sees the page is longer.
        assert_eq!(read(Some(1000))[0].html.len(), 1001);
        assert_eq!(read(Some(0))[0].html.len(), 1);
    }

    #[test]
    fn files_are_read_one_at_a_time_and_errors_name_the_file() {
        let dir = sample_tree();
        let mut pages = html_files(dir.path(), None).unwrap();
        let total = pages.len();
        assert!(total >= 2);
        let first = pages.next().unwrap().unwrap();
        // Files not yet reached are not read: one removed now is an error item naming it.
        let second = pages.files.as_slice()[0].clone();
        std::fs::remove_file(&second).unwrap();
        let err = pages.next().unwrap().unwrap_err();
        assert!(
            err.to_string().contains(&*second.to_string_lossy()),
            "{err}"
        );
        assert_eq!(pages.len(), total - 2);
        assert!(first.url.starts_with("http://localhost/"));
    }
}
