//! `percolator scan` and `percolator status`: looking at the raw cells.

use std::ops::Bound;
use std::process::ExitCode;
use std::sync::Arc;

use bytes::Bytes;
use clap::{Args, ValueEnum};
use percolator_core::records::{LockRecord, NotifyRecord, WriteRecord};
use percolator_core::tables::WORKERS_TABLE;
use percolator_core::{Family, FamilyRead, RowStore, Scan, TimestampOracle};
use percolator_webindex as webindex;

use crate::CliError;
use crate::output::{show, table};

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

fn describe(family: Family, value: &Bytes) -> String {
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
                    "notify writer primary={}/{}",
                    show(&p.table, 20),
                    show(&p.row, 40)
                ),
                None => "notify (direct)".into(),
            },
        ),
        _ => show(value, 60),
    }
}

/// Prints raw cells.
pub async fn scan<S: RowStore>(store: Arc<S>, args: &ScanArgs) -> Result<ExitCode, CliError> {
    let families: Vec<Family> = match args.family {
        Some(f) => vec![f.family()],
        None => Family::ALL.to_vec(),
    };
    let start = match &args.start {
        Some(s) => Bound::Included(Bytes::from(s.clone())),
        None => Bound::Unbounded,
    };
    println!("| family | row | column | ts | value |\n|---|---|---|---:|---|");
    for family in families {
        let rows = store
            .scan(Scan {
                snapshot_ts: None,
                table: Bytes::from(args.table.clone()),
                start: start.clone(),
                end: Bound::Unbounded,
                read: FamilyRead::all(family),
                row_limit: Some(args.limit),
            })
            .await?;
        for row in rows {
            for cell in row.cells {
                println!(
                    "| {} | {} | {} | {} | {} |",
                    family.name(),
                    show(&row.row, 50),
                    show(&cell.column, 30),
                    cell.ts,
                    describe(family, &cell.value)
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
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
    let workers = store
        .scan(Scan {
            snapshot_ts: None,
            table: Bytes::from_static(WORKERS_TABLE),
            start: Bound::Unbounded,
            end: Bound::Unbounded,
            read: FamilyRead::all(Family::Data),
            row_limit: None,
        })
        .await?
        .len();
    client.shutdown().await?;
    let parked = percolator_observers::parked(store.as_ref()).await?;
    let rows: Vec<(&str, String)> = rows
        .iter()
        .map(|(k, v)| (k.as_str(), v.clone()))
        .chain([
            ("registered workers (incl. this one)", workers.to_string()),
            ("parked changes", parked.len().to_string()),
        ])
        .collect();
    print!("{}", table("table", &rows));
    crate::observers_cmd::print_parked(&parked, 20);
    Ok(ExitCode::SUCCESS)
}
