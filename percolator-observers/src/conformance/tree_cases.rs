//! A pipeline of observers: a counting tree whose root must equal the number of distinct leaves.

use async_trait::async_trait;
use bytes::Bytes;
use futures::future::BoxFuture;
use percolator_core::backend::key::prefix_successor;
use percolator_core::conformance::StoreFactory;
use percolator_core::{Columns, ObservedColumn, Result, RowStore, Transaction};
use rand::Rng as _;

use super::{idle, start, writer};
use crate::{Change, Observer, Observers};

const TREE: &str = "tree";
const CHILDREN: &str = "tree_children";
const FANOUT: usize = 6;
const LEVELS: usize = 4; // leaves, two inner levels, root
const LEAVES: usize = 200;

fn node(level: usize, id: usize) -> String {
    format!("L{level}/{id:05}")
}

fn parse_node(row: &[u8]) -> (usize, usize) {
    let s = std::str::from_utf8(row).unwrap();
    let (level, id) = s[1..].split_once('/').unwrap();
    (level.parse().unwrap(), id.parse().unwrap())
}

/// Propagates a node's count to its parent: the parent's count is the sum of its children's.
struct Propagate;

#[async_trait]
impl<S: RowStore> Observer<S> for Propagate {
    fn name(&self) -> &str {
        "propagate"
    }
    fn observed(&self) -> ObservedColumn {
        ObservedColumn::strong(TREE, "count")
    }
    async fn observe(&self, txn: &mut Transaction<S>, change: &Change) -> Result<()> {
        let (level, id) = parse_node(&change.row);
        if level + 1 == LEVELS {
            return Ok(()); // the root
        }
        let parent = node(level + 1, id / FANOUT);
        let me = change.value.clone().unwrap_or_default();
        txn.set(
            CHILDREN,
            format!("{parent}/{}", node(level, id)),
            "count",
            me,
        )?;
        let prefix = format!("{parent}/");
        let end = Bytes::from(prefix_successor(prefix.as_bytes()).unwrap());
        let items = txn
            .scan(CHILDREN, Bytes::from(prefix)..end, Columns::one("count"))
            .await?;
        let sum: u64 = items
            .iter()
            .map(|i| {
                std::str::from_utf8(&i.value)
                    .unwrap()
                    .parse::<u64>()
                    .unwrap()
            })
            .sum();

        txn.set(TREE, &parent, "count", sum.to_string())?;
        Ok(())
    }
}

/// Observers propagate counts up a tree while leaves are written concurrently (many of them
/// more than once): the root ends up counting the distinct leaves.
pub async fn counting_tree<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    let observers = || {
        let mut o = Observers::<F::Store>::new();
        o.register(Propagate).unwrap();
        o
    };
    let runtime = start(&store, observers()).await;
    let w = writer(&store, &observers().observed_columns()).await;
    let mut tasks = Vec::new();
    for t in 0..4 {
        let w = w.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..LEAVES / 4 {
                // Every leaf once, plus random re-writes of others (duplicates).
                let mut leaves = vec![t * (LEAVES / 4) + i];
                if rand::rng().random_bool(0.3) {
                    leaves.push(rand::rng().random_range(0..LEAVES));
                }
                for leaf in leaves {
                    w.run(|txn| -> BoxFuture<'_, Result<()>> {
                        Box::pin(async move { txn.set(TREE, node(0, leaf), "count", "1") })
                    })
                    .await
                    .unwrap();
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    idle(&runtime).await;
    let stats = runtime.shutdown().await.unwrap();
    let reader = w.begin().await.unwrap();
    let root = reader
        .get(TREE, node(LEVELS - 1, 0), "count")
        .await
        .unwrap();
    if root.as_deref() != Some(LEAVES.to_string().as_bytes()) {
        panic!(
            "root count {:?}, expected {LEAVES}; stats {stats:?}; inconsistent nodes: {:#?}",
            root,
            tree_inconsistencies(&w, &reader).await
        );
    }
}

/// Nodes whose count differs from the sum of their children's counts (diagnostics).
async fn tree_inconsistencies<S: RowStore>(
    client: &percolator_core::Client<S>,
    txn: &Transaction<S>,
) -> Vec<String> {
    let count = |b: &Bytes| std::str::from_utf8(b).unwrap().parse::<u64>().unwrap();
    let nodes = txn
        .scan::<Bytes>(TREE, .., Columns::one("count"))
        .await
        .unwrap();
    let children = txn
        .scan::<Bytes>(CHILDREN, .., Columns::one("count"))
        .await
        .unwrap();
    let mut out = Vec::new();
    for n in &nodes {
        let (level, id) = parse_node(&n.row);
        if level == 0 {
            continue;
        }
        let below: Vec<_> = nodes
            .iter()
            .filter(|c| {
                let (l, i) = parse_node(&c.row);
                l + 1 == level && i / FANOUT == id
            })
            .collect();
        let sum: u64 = below.iter().map(|c| count(&c.value)).sum();
        let recorded: u64 = children
            .iter()
            .filter(|c| {
                c.row
                    .starts_with(format!("{}/", node(level, id)).as_bytes())
            })
            .map(|c| count(&c.value))
            .sum();
        if sum != count(&n.value) || recorded != count(&n.value) {
            out.extend(history(client, TREE, &n.row).await);
            for c in children.iter().filter(|c| {
                c.row
                    .starts_with(format!("{}/", node(level, id)).as_bytes())
            }) {
                out.extend(history(client, CHILDREN, &c.row).await);
            }
            out.push(format!(
                "{}: count {} but children sum {sum} (recorded {recorded}, {} children)",
                node(level, id),
                count(&n.value),
                below.len()
            ));
        }
    }
    out
}

/// The write and lock records of a row's `count` column (diagnostics).
async fn history<S: RowStore>(
    client: &percolator_core::Client<S>,
    table: &str,
    row: &[u8],
) -> Vec<String> {
    use percolator_core::backend::records::WriteRecord;
    use percolator_core::{Family, FamilyRead, ReadRow};
    let read = client
        .store()
        .read_row(ReadRow {
            snapshot_ts: None,
            table: Bytes::copy_from_slice(table.as_bytes()),
            row: Bytes::copy_from_slice(row),
            reads: vec![
                FamilyRead::all(Family::Write),
                FamilyRead::all(Family::Lock),
            ],
        })
        .await
        .unwrap();
    let mut out = vec![format!("  {table}/{}:", String::from_utf8_lossy(row))];
    for cell in &read[0] {
        let w = WriteRecord::decode(&cell.value).unwrap();
        out.push(format!(
            "    write {:?} at {} start {}",
            w.kind, cell.ts, w.start_ts
        ));
    }
    for cell in &read[1] {
        out.push(format!("    LOCK at {}", cell.ts));
    }
    out
}
