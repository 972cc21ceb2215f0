//! [`StoreSpec`]: how a user names a store, and how a database directory's engine is found.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use crate::catalogue::{self, Backend, DEFAULT_EMBEDDED, Kind};

/// A store to open, as a user writes it: `mem`, `fjall:PATH`, `sled:PATH`,
/// `etcd:URL[,URL…]` or `tikv:HOST:PORT[,HOST:PORT…]`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreSpec {
    /// In memory.
    Mem,
    /// A fjall database directory.
    Fjall(PathBuf),
    /// A sled database directory.
    Sled(PathBuf),
    /// An etcd cluster's client URLs.
    Etcd(Vec<String>),
    /// A TiKV cluster's PD endpoints.
    Tikv(Vec<String>),
}

/// A store spec that cannot be used, with what was wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SpecError {
    /// The name before `:` is no backend.
    #[error("unknown backend {name:?} in store spec {spec:?}: expected one of {known}")]
    UnknownBackend {
        /// The spec as given.
        spec: String,
        /// The name in it.
        name: String,
        /// The backends there are.
        known: String,
    },
    /// The backend needs a path or addresses after `:`.
    #[error("store spec {spec:?} is missing {what} (e.g. {example})")]
    Missing {
        /// The spec as given.
        spec: String,
        /// What is missing.
        what: &'static str,
        /// A spec that would do.
        example: &'static str,
    },
    /// `--backend` names a cluster backend but its address flag is missing.
    #[error("--backend {backend} needs {flag} ({hint}), or --store {backend}:{example}")]
    MissingFlag {
        /// The backend.
        backend: &'static str,
        /// The flag that gives its address.
        flag: &'static str,
        /// Where else the address can come from.
        hint: &'static str,
        /// What an address looks like.
        example: &'static str,
    },
    /// The directory holds another embedded engine's database than the one asked for.
    #[error(
        "{} holds a {found} database, not a {asked} one: pass --backend {found} (or leave \
         --backend out), or choose another --db",
        path.display()
    )]
    EngineMismatch {
        /// The database directory.
        path: PathBuf,
        /// The engine asked for.
        asked: &'static str,
        /// The engine whose files are there.
        found: &'static str,
    },
    /// The directory holds the files of both embedded engines.
    #[error(
        "{} holds the files of both sled and fjall: pass --backend sled or --backend fjall",
        path.display()
    )]
    BothEngines {
        /// The database directory.
        path: PathBuf,
    },
}

impl StoreSpec {
    /// The backend the spec names.
    pub fn backend(&self) -> &'static Backend {
        let name = match self {
            StoreSpec::Mem => "mem",
            StoreSpec::Fjall(_) => "fjall",
            StoreSpec::Sled(_) => "sled",
            StoreSpec::Etcd(_) => "etcd",
            StoreSpec::Tikv(_) => "tikv",
        };
        catalogue::backend(name).unwrap_or(&catalogue::BACKENDS[0])
    }

    /// The database directory of an embedded store.
    pub fn dir(&self) -> Option<&Path> {
        match self {
            StoreSpec::Fjall(path) | StoreSpec::Sled(path) => Some(path),
            _ => None,
        }
    }

    /// The spec for the database directory `dir`: the embedded engine whose files are in it,
    /// else the default one ([`DEFAULT_EMBEDDED`]).
    pub fn embedded(dir: impl Into<PathBuf>) -> Result<Self, SpecError> {
        let dir = dir.into();
        match engines_in(&dir).as_slice() {
            [] => Ok(Self::with_dir(DEFAULT_EMBEDDED, dir)),
            [engine] => Ok(Self::with_dir(engine, dir)),
            _ => Err(SpecError::BothEngines { path: dir }),
        }
    }

    /// The spec that the command-line flags `--backend`, `--db`, `--endpoints` and `--pd`
    /// describe. Without `backend`, it is [`Self::embedded`] in `db`. An embedded backend asked
    /// to open the other engine's directory is refused, naming both, before anything is written
    /// there.
    pub fn from_flags(
        backend: Option<&str>,
        db: &Path,
        endpoints: &[String],
        pd: &[String],
    ) -> Result<Self, SpecError> {
        let Some(name) = backend else {
            return Self::embedded(db);
        };
        let Some(info) = catalogue::backend(name) else {
            return Err(SpecError::UnknownBackend {
                spec: format!("--backend {name}"),
                name: name.to_owned(),
                known: catalogue::names(),
            });
        };
        if info.kind == Kind::Embedded
            && let [found] = engines_in(db).as_slice()
            && *found != info.name
        {
            return Err(SpecError::EngineMismatch {
                path: db.to_path_buf(),
                asked: info.name,
                found,
            });
        }
        match info.kind {
            Kind::Memory => Ok(StoreSpec::Mem),
            // The path is taken as it is (a path's `Display` is lossy).
            Kind::Embedded => Ok(Self::with_dir(info.name, db.to_path_buf())),
            Kind::Cluster => {
                let (addresses, flag, hint, example) = if info.name == "tikv" {
                    (
                        pd,
                        "--pd HOST:PORT[,…]",
                        "or PERCOLATOR_TIKV_PD",
                        "HOST:PORT",
                    )
                } else {
                    (
                        endpoints,
                        "--endpoints URL[,URL…]",
                        "or PERCOLATOR_ETCD_ENDPOINTS; `cargo xtask cluster up` starts a local \
                         cluster and prints them",
                        "URL[,URL…]",
                    )
                };
                if addresses.iter().all(|a| a.trim().is_empty()) {
                    return Err(SpecError::MissingFlag {
                        backend: info.name,
                        flag,
                        hint,
                        example,
                    });
                }
                format!("{}:{}", info.name, addresses.join(",")).parse()
            }
        }
    }

    fn with_dir(engine: &str, dir: PathBuf) -> Self {
        match engine {
            "sled" => StoreSpec::Sled(dir),
            _ => StoreSpec::Fjall(dir),
        }
    }
}

impl FromStr for StoreSpec {
    type Err = SpecError;

    fn from_str(spec: &str) -> Result<Self, SpecError> {
        let (name, rest) = match spec.split_once(':') {
            Some((name, rest)) => (name, Some(rest)),
            None => (spec, None),
        };
        let missing = |what, example| SpecError::Missing {
            spec: spec.to_owned(),
            what,
            example,
        };
        let list = |rest: Option<&str>| -> Vec<String> {
            rest.unwrap_or_default()
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect()
        };
        let path = rest.filter(|p| !p.is_empty()).map(PathBuf::from);
        match name {
            "mem" => Ok(StoreSpec::Mem),
            "fjall" => path
                .map(StoreSpec::Fjall)
                .ok_or_else(|| missing("a database directory", "fjall:target/wi")),
            "sled" => path
                .map(StoreSpec::Sled)
                .ok_or_else(|| missing("a database directory", "sled:target/wi")),
            "etcd" => Some(list(rest))
                .filter(|l| !l.is_empty())
                .map(StoreSpec::Etcd)
                .ok_or_else(|| missing("etcd client URLs", "etcd:http://127.0.0.1:2379")),
            "tikv" => Some(list(rest))
                .filter(|l| !l.is_empty())
                .map(StoreSpec::Tikv)
                .ok_or_else(|| missing("PD endpoints", "tikv:127.0.0.1:2379")),
            other => Err(SpecError::UnknownBackend {
                spec: spec.to_owned(),
                name: other.to_owned(),
                known: catalogue::names(),
            }),
        }
    }
}

impl fmt::Display for StoreSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreSpec::Mem => f.write_str("mem"),
            StoreSpec::Fjall(path) => write!(f, "fjall:{}", path.display()),
            StoreSpec::Sled(path) => write!(f, "sled:{}", path.display()),
            StoreSpec::Etcd(urls) => write!(f, "etcd:{}", urls.join(",")),
            StoreSpec::Tikv(pd) => write!(f, "tikv:{}", pd.join(",")),
        }
    }
}

/// The embedded engines whose files are in `dir` (`sled`, `fjall`), from the files each creates
/// when it opens a directory: none for a missing or empty directory or anything else, both for a
/// directory each engine was opened in.
pub(crate) fn engines_in(dir: &Path) -> Vec<&'static str> {
    let sled = dir.join("conf").is_file() && dir.join("db").is_file();
    let fjall = dir.join("version").is_file() && dir.join("keyspaces").is_dir();
    [(sled, "sled"), (fjall, "fjall")]
        .into_iter()
        .filter_map(|(found, engine)| found.then_some(engine))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_print_back() {
        for text in [
            "mem",
            "fjall:target/wi",
            "sled:/tmp/x y",
            "etcd:http://127.0.0.1:2379,http://127.0.0.1:2380",
            "tikv:127.0.0.1:2379",
        ] {
            let spec: StoreSpec = text.parse().unwrap();
            assert_eq!(spec.to_string(), text);
        }
        assert_eq!(
            "etcd: http://a:1 , http://b:2 "
                .parse::<StoreSpec>()
                .unwrap(),
            StoreSpec::Etcd(vec!["http://a:1".into(), "http://b:2".into()])
        );
        assert_eq!(
            "fjall:d".parse::<StoreSpec>().unwrap().dir(),
            Some(Path::new("d"))
        );
        assert_eq!("mem".parse::<StoreSpec>().unwrap().backend().name, "mem");
    }

    #[test]
    fn bad_specs_say_what_is_wrong() {
        let err = "rocks:/x".parse::<StoreSpec>().unwrap_err().to_string();
        assert!(
            err.contains("unknown backend \"rocks\"") && err.contains("fjall"),
            "{err}"
        );
        let err = "fjall:".parse::<StoreSpec>().unwrap_err().to_string();
        assert!(err.contains("missing a database directory"), "{err}");
        let err = "etcd".parse::<StoreSpec>().unwrap_err().to_string();
        assert!(err.contains("missing etcd client URLs"), "{err}");
        let err = "tikv:,".parse::<StoreSpec>().unwrap_err().to_string();
        assert!(err.contains("missing PD endpoints"), "{err}");
        let err = StoreSpec::from_flags(Some("nosuch"), Path::new("d"), &[], &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown backend"), "{err}");
        let err = StoreSpec::from_flags(Some("etcd"), Path::new("d"), &[], &[])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--backend etcd needs --endpoints") && err.contains("cluster up"),
            "{err}"
        );
        let err = StoreSpec::from_flags(Some("tikv"), Path::new("d"), &[], &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("--backend tikv needs --pd"), "{err}");
    }

    /// Each engine's directory is found from the files the engine itself writes, so a sled
    /// database keeps opening as sled while new ones get fjall.
    #[test]
    fn the_engine_follows_the_files_already_in_the_directory() {
        let dir = tempfile::tempdir().unwrap();
        let (sled_dir, fjall_dir) = (dir.path().join("s"), dir.path().join("f"));
        for (path, files) in [(&sled_dir, ["conf", "db"]), (&fjall_dir, ["version", "x"])] {
            std::fs::create_dir_all(path).unwrap();
            for f in files {
                std::fs::write(path.join(f), b"").unwrap();
            }
        }
        std::fs::create_dir(fjall_dir.join("keyspaces")).unwrap();
        let flags = |backend: Option<&str>, db: &Path| StoreSpec::from_flags(backend, db, &[], &[]);

        let missing = dir.path().join("none");
        assert_eq!(
            flags(None, &missing).unwrap(),
            StoreSpec::Fjall(missing.clone())
        );
        assert_eq!(
            flags(None, &sled_dir).unwrap(),
            StoreSpec::Sled(sled_dir.clone())
        );
        assert_eq!(
            flags(None, &fjall_dir).unwrap(),
            StoreSpec::Fjall(fjall_dir.clone())
        );
        assert_eq!(
            flags(Some("sled"), &missing).unwrap(),
            StoreSpec::Sled(missing)
        );
        assert_eq!(
            flags(Some("mem"), &sled_dir).unwrap(),
            StoreSpec::Mem,
            "a backend without a directory ignores --db"
        );
        let refused = flags(Some("fjall"), &sled_dir).unwrap_err().to_string();
        assert!(
            refused.contains(&sled_dir.display().to_string())
                && refused.contains("holds a sled database, not a fjall one"),
            "{refused}"
        );
        let refused = flags(Some("sled"), &fjall_dir).unwrap_err().to_string();
        assert!(
            refused.contains("holds a fjall database, not a sled one"),
            "{refused}"
        );

        // A directory both engines were opened in: either by name, neither by guess.
        std::fs::write(sled_dir.join("version"), b"").unwrap();
        std::fs::create_dir(sled_dir.join("keyspaces")).unwrap();
        assert_eq!(
            flags(Some("fjall"), &sled_dir).unwrap(),
            StoreSpec::Fjall(sled_dir.clone())
        );
        assert_eq!(
            flags(Some("sled"), &sled_dir).unwrap(),
            StoreSpec::Sled(sled_dir.clone())
        );
        let refused = flags(None, &sled_dir).unwrap_err().to_string();
        assert!(
            refused.contains("holds the files of both sled and fjall"),
            "{refused}"
        );
    }
}
