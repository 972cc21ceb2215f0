//! `percolator scan` and `percolator status`: looking at the raw cells.

use std::ops::Bound;
use std::process::ExitCode;
use std::sync::Arc;

use bytes::Bytes;
use clap::{Args, ValueEnum};
use percolator_core::backend::records::{LockRecord, NotifyRecord, WriteRecord};
use percolator_core::{Family, FamilyRead, RowStore, Scan, TimestampOracle};
use percolator_webindex as webindex;

use crate::CliError;
use crate::output::{out, outln, show, table, term_safe};

/// Arguments of `percolator scan`.
#[derive(Args, Debug)]
pub struct ScanArgs {
    /// Table to scan.
    table: String,
    /// Only this family.
    #[arg(long, value_enum)]
    family: Option<FamilyArg>,
    /// First row.
    #[arg(long)]
    start: Option<String>,
    /// Rows to show.
    #[arg(long, default_value_t = 20)]
    limit: usize,
    /// Show rows, columns and values whole instead of cut to a table-friendly width.
    #[arg(long)]
    full: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum FamilyArg {
    Data,
    Lock,
    Write,
    Notify,
}

impl FamilyArg {
    fn family(self) -> Family {
        match self {
            FamilyArg::Data => Family::Data,
            FamilyArg::Lock => Family::Lock,
            FamilyArg::Write => Family::Write,
            FamilyArg::Notify => Family::Notify,
        }
    }
}

/// `max`, or no limit with `--full`.
fn width(full: bool, max: usize) -> usize {
    if full { usize::MAX } else { max }
}

fn describe(family: Family, value: &Bytes, full: bool) -> String {
    let show = |bytes: &[u8], max: usize| show(bytes, width(full, max));
    match family {
        Family::Lock => LockRecord::decode(value).map_or_else(
            |e| format!("<{e}>"),
            |l| {
                format!(
                    "lock {:?} primary={}/{}/{} owner={:x}",
                    l.kind,
                    show(&l.primary.table, 20),
                    show(&l.primary.row, 40),
                    show(&l.primary.column, 20),
                    l.owner
                )
            },
        ),
        Family::Write => WriteRecord::decode_with_value(value).map_or_else(
            |e| format!("<{e}>"),
            |(w, inline)| match inline {
                Some(v) => format!(
                    "{:?} start_ts={} inline={}",
                    w.kind,
                    w.start_ts,
                    show(&v, 40)
                ),
                None => format!("{:?} start_ts={}", w.kind, w.start_ts),
            },
        ),
        Family::Notify => NotifyRecord::decode(value).map_or_else(
            |e| format!("<{e}>"),
            |n| match n.writer {
                Some(p) => format!(
                    "notify writer primary={}/{}{}",
                    show(&p.table, 20),
                    show(&p.row, 40),
                    n.committed_at
                        .map(|ts| format!(" committed_at={ts}"))
                        .unwrap_or_default()
                ),
                None => "notify (direct)".into(),
            },
        ),
        _ => show(value, 60),
    }
}

/// Prints raw cells.
pub async fn scan<S: RowStore>(store: Arc<S>, args: &ScanArgs) -> Result<ExitCode, CliError> {
    let tables = store.tables().await?;
    if !tables.iter().any(|t| t.as_ref() == args.table.as_bytes()) {
        let names: Vec<String> = tables
            .iter()
            .map(|t| term_safe(&String::from_utf8_lossy(t)).into_owned())
            .collect();
        return Err(format!(
            "no table {:?} in this store; its tables: {}",
            args.table,
            if names.is_empty() {
                "none (the store is empty)".to_owned()
            } else {
                names.join(", ")
            }
        )
        .into());
    }
    let families: Vec<Family> = match args.family {
        Some(f) => vec![f.family()],
        None => Family::ALL.to_vec(),
    };
    let start = match &args.start {
        Some(s) => Bound::Included(Bytes::from(s.clone())),
        None => Bound::Unbounded,
    };
    let full = args.full;
    outln!("| family | row | column | ts | value |\n|---|---|---|---:|---|");
    for family in families {
        // Short values ride inline in their write record: `--family data` shows them too.
        let read = if family == Family::Data && args.family.is_some() {
            Family::Write
        } else {
            family
        };
        let rows = store
            .scan(Scan {
                snapshot_ts: None,
                table: Bytes::from(args.table.clone()),
                start: start.clone(),
                end: Bound::Unbounded,
                read: FamilyRead::all(read),
                row_limit: Some(args.limit),
            })
            .await?;
        let data_rows = if read == family {
            Vec::new()
        } else {
            store
                .scan(Scan {
                    snapshot_ts: None,
                    table: Bytes::from(args.table.clone()),
                    start: start.clone(),
                    end: Bound::Unbounded,
                    read: FamilyRead::all(Family::Data),
                    row_limit: Some(args.limit),
                })
                .await?
        };
        for row in &data_rows {
            for cell in &row.cells {
                print_cell(
                    family,
                    &row.row,
                    &cell.column,
                    cell.ts,
                    &describe(family, &cell.value, full),
                    full,
                );
            }
        }
        for row in rows {
            for cell in row.cells {
                if read == family {
                    let value = describe(family, &cell.value, full);
                    print_cell(family, &row.row, &cell.column, cell.ts, &value, full);
                } else if let Ok((record, Some(inline))) =
                    WriteRecord::decode_with_value(&cell.value)
                {
                    let value = format!(
                        "{} (inline in the write record)",
                        show(&inline, width(full, 60))
                    );
                    print_cell(
                        family,
                        &row.row,
                        &cell.column,
                        record.start_ts,
                        &value,
                        full,
                    );
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn print_cell(family: Family, row: &[u8], column: &[u8], ts: u64, value: &str, full: bool) {
    // `show` escapes the bytes; `value` may also quote them in a decoding error.
    outln!(
        "| {} | {} | {} | {ts} | {} |",
        family.name(),
        show(row, width(full, 50)),
        show(column, width(full, 30)),
        term_safe(value),
    );
}

/// Prints pending notifications and locks of the web index's tables, and registered workers.
pub async fn status<S: RowStore>(
    store: Arc<S>,
    oracle: Option<Arc<dyn TimestampOracle>>,
) -> Result<ExitCode, CliError> {
    let client = crate::client_builder(&store, &oracle).build().await?;
    let mut rows = Vec::new();
    for t in webindex::schema::TABLES {
        let name = String::from_utf8_lossy(t).into_owned();
        let pending = client.pending_notifications(t).await?;
        let locks = client.locks(t).await?.len();
        rows.push((name, format!("{pending} pending, {locks} locks")));
    }
    // Lease expiry is judged against oracle time, as GC judges it.
    let now_ms = percolator_core::oracle::time::physical_ms(client.begin().await?.start_ts());
    let leases = percolator_core::internal::liveness::StoreLiveness::new(Arc::clone(&store))
        .leases()
        .await?;
    let live = leases.iter().filter(|l| l.until_ms >= now_ms).count();
    let dead = leases.len() - live;
    client.shutdown().await?;
    let parked = percolator_observers::parked(store.as_ref()).await?;
    let rows: Vec<(&str, String)> = rows
        .iter()
        .map(|(k, v)| (k.as_str(), v.clone()))
        .chain([
            (
                "registered workers: live (incl. this one) / lease lapsed",
                format!(
                    "{live} / {dead}{}",
                    if dead > 0 {
                        " (a running worker or `percolator gc` removes them)"
                    } else {
                        ""
                    }
                ),
            ),
            ("parked changes", parked.len().to_string()),
        ])
        .collect();
    out!("{}", table("table", &rows));
    crate::cmd::observers::print_parked(&parked, 20);
    Ok(ExitCode::SUCCESS)
}
