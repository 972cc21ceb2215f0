//! Real process death: a child process (the `fjall-kill9-writer` binary) writes multi-family, multi-row batches to a `FjallStore` — without
//! `sync` — and prints an acknowledgement after each returns; it is killed with SIGKILL
//! mid-workload. The database is reopened and
//! - every acknowledged batch is there (fjall hands each write to the OS before returning),
//! - every batch that is there at all is there whole: all of its rows and families (one fjall
//!   write batch is crash-atomic).
//!
//! Two rounds on the same directory, so the second child also recovers and writes on.

#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead as _, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use percolator_backend_fjall::FjallStore;
use percolator_backend_fjall::kill9::{cells as rows, data_value};
use percolator_core::{Family, FamilyRead, RowStore as _};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_batches_survive_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    for round in 0..2u64 {
        let mut child = Command::new(env!("CARGO_BIN_EXE_fjall-kill9-writer"))
            .arg(dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn the writer child");
        let stdout = child.stdout.take().unwrap();
        let wanted = 300 + round * 200;
        let acked = tokio::task::spawn_blocking(move || {
            let mut last = None;
            let mut count = 0;
            let started = Instant::now();
            let mut lines = BufReader::new(stdout).lines();
            while count < wanted && started.elapsed() < Duration::from_secs(120) {
                match lines.next() {
                    Some(Ok(line)) => {
                        if let Some(n) = line.strip_prefix("ACK ") {
                            last = Some(n.parse::<u64>().unwrap());
                            count += 1;
                        }
                    }
                    _ => break,
                }
            }
            // The pipe stays open until after the kill: a child that could not print would
            // panic and close the store cleanly instead of dying mid-write.
            (last, count, lines)
        })
        .await
        .unwrap();
        child.kill().unwrap(); // SIGKILL
        let status = child.wait().unwrap();
        drop(acked.2);
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(9),
            "round {round}: the child must die of SIGKILL, not exit: {status:?}"
        );
        let (Some(last_acked), count, _) = acked else {
            panic!("round {round}: the child acknowledged nothing");
        };
        assert_eq!(count, wanted, "round {round}: the child stopped early");

        let store = FjallStore::open(dir.path()).unwrap();
        let counter: Vec<u64> = rows(&store, Family::Lock)
            .await
            .into_iter()
            .map(|(_, ts)| ts)
            .collect();
        let max = counter.iter().copied().max().unwrap();
        assert!(
            max >= last_acked,
            "round {round}: acked {last_acked}, found {max}"
        );
        // No gaps: batches are applied in order, so what survived is a prefix.
        assert_eq!(counter.len() as u64, max + 1, "round {round}");
        let data = rows(&store, Family::Data).await;
        let write = rows(&store, Family::Write).await;
        let notify = rows(&store, Family::Notify).await;
        assert_eq!(data.len() as u64, max + 1, "round {round}: data rows");
        assert_eq!(write.len() as u64, max + 1, "round {round}: write rows");
        assert_eq!(notify.len() as u64, max + 1, "round {round}: notify rows");
        for (i, (row, ts)) in data.iter().enumerate() {
            let n = i as u64;
            assert_eq!(row.as_ref(), format!("r{n:08}").as_bytes());
            assert_eq!(*ts, n);
            assert_eq!(write[i], (row.clone(), n + 1));
        }
        let cells = store
            .read_row(percolator_core::ReadRow {
                table: Bytes::from("t"),
                row: Bytes::from(format!("r{:08}", max - max % 3)),
                reads: vec![FamilyRead::all(Family::Data)],
                snapshot_ts: None,
            })
            .await
            .unwrap();
        assert_eq!(cells[0][0].value, data_value(max - max % 3));
        drop(store);
    }
}
