//! The soak run: the web-indexing pipeline through many recrawl generations, measuring what the
//! store holds after each one — with garbage collection (a run below a safe point with no grace
//! after every generation) or without, to show that storage stays bounded only with it.
//!
//! Generation 0 loads the whole synthetic crawl; every later generation recrawls a fraction of
//! it with changed content. After the pipeline goes idle (and GC ran, if on), every table of the
//! store is scanned — all families, all versions — and the cells and their key and value bytes
//! are counted; the caller may add the bytes on disk (sled's directory).

use std::ops::Bound;
use std::time::{Duration, Instant};

use percolator_core::gc::GcConfig;
use percolator_core::store::scan_page;
use percolator_core::{ClientBuilder, FamilyRead, RowStore};
use percolator_observers::{Runtime, RuntimeConfig, RuntimeError};
use serde::Serialize;

use percolator_webindex::load::{LoadError, load_pages};
use percolator_webindex::pipeline::{PipelineConfig, observers_with};
use percolator_webindex::synthetic::SyntheticCrawl;

/// Parameters of a soak run.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SoakConfig {
    /// Pages in the synthetic crawl.
    pub docs: usize,
    /// Generations, the initial crawl included.
    pub generations: u32,
    /// Fraction of the crawl each recrawl generation visits (with changed content).
    pub recrawl_fraction: f64,
    /// Seed of the synthetic crawl.
    pub seed: u64,
    /// Collect garbage after every generation.
    pub gc: bool,
    /// Loader transactions in flight.
    pub load_concurrency: usize,
    /// The pipeline's runtime.
    pub runtime: RuntimeConfig,
    /// The pipeline's observers.
    pub pipeline: PipelineConfig,
    /// Longest wait for the pipeline to go idle after a generation.
    pub timeout: Duration,
}

impl Default for SoakConfig {
    fn default() -> Self {
        Self {
            docs: 300,
            generations: 200,
            recrawl_fraction: 0.3,
            seed: 11,
            gc: true,
            load_concurrency: 8,
            runtime: RuntimeConfig::default()
                .with_stages(percolator_webindex::pipeline::SCAN_STAGES),
            pipeline: PipelineConfig::default(),
            timeout: Duration::from_secs(600),
        }
    }
}

/// What the store held after one generation.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct SoakGeneration {
    /// 0 for the initial crawl.
    pub generation: u32,
    /// Pages loaded with new content.
    pub pages_loaded: usize,
    /// Cells stored (every family, every version, every table).
    pub cells: u64,
    /// Their key (row, column) and value bytes.
    pub stored_bytes: u64,
    /// Bytes on disk, where the backend has a directory.
    pub disk_bytes: Option<u64>,
    /// Cells the GC run after this generation deleted.
    pub gc_cells_deleted: u64,
    /// Seconds for the generation (load, pipeline, GC).
    pub seconds: f64,
}

/// A whole soak run.
#[derive(Debug, Clone, Serialize)]
pub struct SoakReport {
    /// Backend name.
    pub backend: String,
    /// Pages in the crawl.
    pub docs: usize,
    /// Fraction recrawled per generation.
    pub recrawl_fraction: f64,
    /// Whether GC ran after each generation.
    pub gc: bool,
    /// One entry per generation.
    pub generations: Vec<SoakGeneration>,
    /// Where the cells were after the first generation, by table and family.
    pub first: StoredCells,
    /// And after the last.
    pub last: StoredCells,
}

impl SoakReport {
    /// Stored cells after the last generation divided by those after the first.
    pub fn growth(&self) -> f64 {
        match (self.generations.first(), self.generations.last()) {
            (Some(first), Some(last)) if first.cells > 0 => last.cells as f64 / first.cells as f64,
            _ => 0.0,
        }
    }

    /// A markdown table: every `every`-th generation and the last.
    pub fn table(&self, every: usize) -> String {
        let mut out = String::from(
            "| generation | pages loaded | cells | stored MB | disk MB | GC deleted | seconds |\n|---:|---:|---:|---:|---:|---:|---:|\n",
        );
        let last = self.generations.len().saturating_sub(1);
        for (i, g) in self.generations.iter().enumerate() {
            if i % every.max(1) != 0 && i != last {
                continue;
            }
            out.push_str(&format!(
                "| {} | {} | {} | {:.2} | {} | {} | {:.2} |\n",
                g.generation,
                g.pages_loaded,
                g.cells,
                g.stored_bytes as f64 / 1e6,
                g.disk_bytes
                    .map_or_else(|| "-".to_owned(), |b| format!("{:.2}", b as f64 / 1e6)),
                g.gc_cells_deleted,
                g.seconds
            ));
        }
        out
    }
}

impl SoakReport {
    /// A markdown table of the cells per table and family after the first and the last
    /// generation: where growth, if any, comes from.
    pub fn breakdown(&self) -> String {
        let mut out = String::from(
            "| table | family | cells after the first | cells after the last | MB after the last |\n|---|---|---:|---:|---:|\n",
        );
        let mut keys: Vec<(&str, &str)> = self
            .first
            .by_family
            .iter()
            .chain(&self.last.by_family)
            .map(|f| (f.table.as_str(), f.family))
            .collect();
        keys.sort_unstable();
        keys.dedup();
        let find = |cells: &StoredCells, key: (&str, &str)| {
            cells
                .by_family
                .iter()
                .find(|f| (f.table.as_str(), f.family) == key)
                .map_or((0, 0), |f| (f.cells, f.bytes))
        };
        for key in keys {
            let (first, _) = find(&self.first, key);
            let (last, bytes) = find(&self.last, key);
            out.push_str(&format!(
                "| {} | {} | {first} | {last} | {:.2} |\n",
                key.0,
                key.1,
                bytes as f64 / 1e6
            ));
        }
        out
    }
}

/// Cells and their key and value bytes in one family of one table.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FamilyCells {
    /// The table.
    pub table: String,
    /// The family (`data`, `lock`, `write`, `notify`).
    pub family: &'static str,
    /// Cells (every version).
    pub cells: u64,
    /// Their key (row, column, timestamp) and value bytes.
    pub bytes: u64,
}

/// What a store holds: totals, and per table and family where there is anything.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct StoredCells {
    /// Cells in every table and family.
    pub cells: u64,
    /// Their key and value bytes.
    pub bytes: u64,
    /// The non-empty families of every table.
    pub by_family: Vec<FamilyCells>,
}

/// Counts every cell of every table of `store`, all families, all versions.
pub async fn stored_cells<S: RowStore + ?Sized>(store: &S) -> percolator_core::Result<StoredCells> {
    let mut out = StoredCells::default();
    for table in store.tables().await? {
        for family in percolator_core::Family::ALL {
            let mut part = FamilyCells {
                table: String::from_utf8_lossy(&table).into_owned(),
                family: family.name(),
                cells: 0,
                bytes: 0,
            };
            let mut start = Bound::Unbounded;
            loop {
                let rows = scan_page(store, &table, &start, FamilyRead::all(family), 256).await?;
                for row in &rows {
                    for cell in &row.cells {
                        part.cells += 1;
                        part.bytes +=
                            (row.row.len() + cell.column.len() + 8 + cell.value.len()) as u64;
                    }
                }
                match rows.last() {
                    Some(last) if rows.len() >= 256 => start = Bound::Excluded(last.row.clone()),
                    _ => break,
                }
            }
            if part.cells > 0 {
                out.cells += part.cells;
                out.bytes += part.bytes;
                out.by_family.push(part);
            }
        }
    }
    Ok(out)
}

/// Runs the soak with a worker built from `client` on an empty store; `disk_bytes` measures the
/// store's directory (or gives `None`); `progress` hears of each generation as it ends.
pub async fn run<S: RowStore>(
    client: ClientBuilder<S>,
    config: &SoakConfig,
    disk_bytes: impl Fn() -> Option<u64>,
    mut progress: impl FnMut(&SoakGeneration),
) -> std::result::Result<SoakReport, RuntimeError> {
    let runtime = Runtime::start(
        client,
        observers_with(None, &config.pipeline),
        config.runtime.clone(),
    )
    .await?;
    let client = runtime.client().clone();
    let crawl = SyntheticCrawl::new(config.docs, config.seed);
    let gc = GcConfig::default().with_grace(Duration::ZERO);
    let mut report = SoakReport {
        backend: client.store().name().to_owned(),
        docs: config.docs,
        recrawl_fraction: config.recrawl_fraction,
        gc: config.gc,
        generations: Vec::new(),
        first: StoredCells::default(),
        last: StoredCells::default(),
    };
    for generation in 0..config.generations {
        let began = Instant::now();
        let pages: Vec<_> = if generation == 0 {
            crawl.initial().collect()
        } else {
            crawl.recrawl(generation, config.recrawl_fraction)
        };
        let loaded = load_pages(
            &client,
            pages.into_iter().map(Ok::<_, std::convert::Infallible>),
            config.load_concurrency,
            |_, _| {},
        )
        .await
        .map_err(|e| match e {
            LoadError::Txn(e) => RuntimeError::Txn(e),
            other => RuntimeError::Txn(percolator_core::Error::Application(other.to_string())),
        })?;
        runtime.wait_idle(config.timeout).await?;
        let gc_cells_deleted = if config.gc {
            client.gc(&gc, |_| {}).await?.total().cells_deleted()
        } else {
            0
        };
        let stored = stored_cells(client.store().as_ref()).await?;
        let entry = SoakGeneration {
            generation,
            pages_loaded: loaded.loaded,
            cells: stored.cells,
            stored_bytes: stored.bytes,
            disk_bytes: disk_bytes(),
            gc_cells_deleted,
            seconds: began.elapsed().as_secs_f64(),
        };
        progress(&entry);
        report.generations.push(entry);
        if generation == 0 {
            report.first = stored;
        } else if generation + 1 == config.generations {
            report.last = stored;
        }
    }
    runtime.shutdown().await?;
    Ok(report)
}
