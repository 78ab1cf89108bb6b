//! The files tilemm keeps between processes — the tuning cache (`tuning.json`) and the route
//! model (`routes.json`) — in one format, read and written one way: entries by key under a
//! format number and the tilemm version that wrote them, read as untrusted input (a regular
//! file, at most a size cap: anything else is ignored with a note), and changed by merging into
//! what the file holds now, under an advisory lock, replaced at once by a rename.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::files::{read_json, replace_locked, Kept};

/// One kept file: what it is called in notes, where it is, and its rules.
#[derive(Clone, Debug)]
pub struct Store {
    /// Its name in notes: "tuning cache", "route model".
    pub what: &'static str,
    /// The file.
    pub path: PathBuf,
    /// Its format; a file of another is ignored (and replaced when an entry is saved).
    pub format: u32,
    /// Whether entries hold only for the tilemm version that wrote them (kernel choices: the
    /// kernels may differ; timings of routes do not).
    pub per_version: bool,
    /// A file larger than this is not read.
    pub max_bytes: u64,
    /// How long a saver waits for another to finish.
    pub lock_wait: Duration,
}

#[derive(Serialize, Deserialize)]
struct File<E> {
    format: u32,
    /// The version that wrote it (absent in route models before it was kept).
    #[serde(default)]
    tilemm: String,
    entries: BTreeMap<String, E>,
}

const VERSION: &str = env!("CARGO_PKG_VERSION");

impl Store {
    /// The file's entries: none where it is absent, and none with a note where it cannot be
    /// used (unreadable, too large, corrupt, of another format or version).
    pub fn load<E: DeserializeOwned>(&self, notes: &mut Vec<String>) -> BTreeMap<String, E> {
        let path = self.path.display();
        match read_json::<File<E>>(&self.path, self.max_bytes) {
            Kept::Absent => BTreeMap::new(),
            Kept::Read(file)
                if file.format == self.format && (!self.per_version || file.tilemm == VERSION) =>
            {
                file.entries
            }
            Kept::Read(file) => {
                notes.push(format!(
                    "{} {path} is from tilemm {} (format {}), not {VERSION} (format {}); \
                     ignored and replaced when an entry is saved",
                    self.what,
                    if file.tilemm.is_empty() {
                        "?"
                    } else {
                        &file.tilemm
                    },
                    file.format,
                    self.format
                ));
                BTreeMap::new()
            }
            Kept::Unusable(why) => {
                notes.push(format!(
                    "{} {path} {why}; ignored and replaced when an entry is saved",
                    self.what
                ));
                BTreeMap::new()
            }
        }
    }

    /// Applies `change` to the entries the file holds now (other processes may have saved
    /// since this one read it) and replaces the file; returns the entries saved.
    pub fn update<E: Serialize + DeserializeOwned>(
        &self,
        change: impl FnOnce(&mut BTreeMap<String, E>),
    ) -> io::Result<BTreeMap<String, E>> {
        let mut saved = None;
        replace_locked(&self.path, self.lock_wait, || {
            let mut entries = self.load(&mut Vec::new());
            change(&mut entries);
            let file = File {
                format: self.format,
                tilemm: VERSION.into(),
                entries,
            };
            let mut text = serde_json::to_vec_pretty(&file).map_err(io::Error::other)?;
            text.push(b'\n');
            saved = Some(file.entries);
            Ok(text)
        })?;
        Ok(saved.unwrap_or_default())
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}
