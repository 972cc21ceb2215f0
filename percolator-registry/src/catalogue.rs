//! Every backend of the workspace, compiled in or not: its name, crate, kind, the server it needs
//! and its conformance test targets.
//!
//! This is data, not code, so that tools can list backends without building them: `xtask`
//! runs each backend's conformance targets and benchmarks from this table.

/// Where a backend keeps its data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Kind {
    /// In the process's memory: gone when it ends.
    Memory,
    /// In a local directory that one process opens at a time.
    Embedded,
    /// On a cluster reached over the network, shared by many processes.
    Cluster,
}

/// A server a backend's tests or stores need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Server {
    /// Nothing: the backend runs in the process.
    None,
    /// An etcd cluster (tests start one on loopback when `etcd` is installed).
    Etcd,
    /// A TiKV cluster's PD address (`--pd` or `PERCOLATOR_TIKV_PD`).
    TikvPd,
}

/// A conformance test target of a backend crate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConformanceTarget {
    /// How reports name it (`mem`, `tikv-fake`, …).
    pub label: &'static str,
    /// The integration-test binary in the backend's crate.
    pub binary: &'static str,
    /// The server it runs against.
    pub needs: Server,
}

/// One backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Backend {
    /// The name in store specs, `--backend` and reports (`fjall`).
    pub name: &'static str,
    /// The crate that implements it.
    pub package: &'static str,
    /// Where it keeps data.
    pub kind: Kind,
    /// The server its stores need.
    pub needs: Server,
    /// One line for help texts.
    pub about: &'static str,
    /// The cargo feature of this crate (and of the binaries) that compiles it in.
    pub feature: &'static str,
    /// Whether that feature is on in this build.
    pub compiled: bool,
    /// Whether the binaries enable it by default.
    pub default: bool,
    /// Its conformance test targets, in report order.
    pub conformance: &'static [ConformanceTarget],
}

/// Every backend, in report order. The embedded default comes first among the embedded ones.
pub const BACKENDS: &[Backend] = &[
    Backend {
        name: "mem",
        package: "percolator-backend-mem",
        kind: Kind::Memory,
        needs: Server::None,
        about: "in memory: gone when the process ends",
        feature: "mem",
        compiled: cfg!(feature = "mem"),
        default: true,
        conformance: &[ConformanceTarget {
            label: "mem",
            binary: "conformance",
            needs: Server::None,
        }],
    },
    Backend {
        name: "fjall",
        package: "percolator-backend-fjall",
        kind: Kind::Embedded,
        needs: Server::None,
        about: "embedded, persistent (the fjall LSM engine; the default)",
        feature: "fjall",
        compiled: cfg!(feature = "fjall"),
        default: true,
        conformance: &[ConformanceTarget {
            label: "fjall",
            binary: "conformance",
            needs: Server::None,
        }],
    },
    Backend {
        name: "sled",
        package: "percolator-backend-sled",
        kind: Kind::Embedded,
        needs: Server::None,
        about: "embedded, persistent (sled 0.34; not a default feature: it can deadlock)",
        feature: "sled",
        compiled: cfg!(feature = "sled"),
        default: false,
        conformance: &[ConformanceTarget {
            label: "sled",
            binary: "conformance",
            needs: Server::None,
        }],
    },
    Backend {
        name: "etcd",
        package: "percolator-backend-etcd",
        kind: Kind::Cluster,
        needs: Server::Etcd,
        about: "an etcd v3 cluster (`etcd:URL[,URL…]`)",
        feature: "etcd",
        compiled: cfg!(feature = "etcd"),
        default: true,
        conformance: &[ConformanceTarget {
            label: "etcd",
            binary: "conformance",
            needs: Server::Etcd,
        }],
    },
    Backend {
        name: "tikv",
        package: "percolator-backend-tikv",
        kind: Kind::Cluster,
        needs: Server::TikvPd,
        about: "a TiKV cluster through its PD (`tikv:HOST:PORT[,…]`), with PD's TSO as the oracle",
        feature: "tikv",
        compiled: cfg!(feature = "tikv"),
        default: false,
        conformance: &[
            ConformanceTarget {
                label: "tikv-fake",
                binary: "conformance_fake",
                needs: Server::None,
            },
            ConformanceTarget {
                label: "tikv",
                binary: "conformance_cluster",
                needs: Server::TikvPd,
            },
        ],
    },
];

/// The backend called `name`, compiled in or not.
pub fn backend(name: &str) -> Option<&'static Backend> {
    BACKENDS.iter().find(|b| b.name == name)
}

/// The backends compiled into this build.
pub fn compiled() -> impl Iterator<Item = &'static Backend> {
    BACKENDS.iter().filter(|b| b.compiled)
}

/// Every backend's name, comma separated (for error messages and help).
pub fn names() -> String {
    BACKENDS
        .iter()
        .map(|b| b.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The embedded engine a new database directory gets.
pub const DEFAULT_EMBEDDED: &str = "fjall";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_every_backend_has_a_conformance_target() {
        let mut names: Vec<_> = BACKENDS.iter().map(|b| b.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), BACKENDS.len());
        for b in BACKENDS {
            assert!(
                !b.conformance.is_empty(),
                "{} has no conformance target",
                b.name
            );
            assert!(b.package.ends_with(b.name), "{}", b.package);
        }
        let default = backend(DEFAULT_EMBEDDED).unwrap();
        assert_eq!(default.kind, Kind::Embedded);
        assert!(default.default);
        assert!(!backend("sled").unwrap().default);
        assert!(backend("nosuch").is_none());
    }
}
