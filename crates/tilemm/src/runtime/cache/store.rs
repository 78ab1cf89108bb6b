//! The kernel store: compiled kernels kept across processes in one file that tilemm owns and
//! checks, handed to CubeCL through a folder of the process's own.
//!
//! CubeCL's compilation cache panics or waits on files it cannot use (a chunk that is a
//! directory or unreadable, a table of contents naming a missing chunk, a stale lock) and hands
//! the driver whatever bytes a chunk holds. So CubeCL never sees a shared file: each process
//! gets a fresh work folder (`work/<pid>-<nanos>/`) into which the checked store is written out
//! as CubeCL's chunk files, and the entries CubeCL appends there are copied back into the store
//! after each compilation and at exit. The store (`kernels.bin`) is a header and records of
//! (chunk path, entry, checksum); a record that does not check out, or a file that is not a
//! regular one, has the store moved aside (`kernels.bin.damaged`) with a note, and the kernels
//! are compiled again. Writers take turns through `flock` on `lock`, which the kernel releases
//! when its holder dies; a work folder whose owner has died is removed by the next process.

use std::collections::{HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::{self, Cursor, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use crate::io::files;

/// The store's first bytes: its format.
const MAGIC: &[u8] = b"tilemm kernel store 1\n";

/// How long a process waits for another's turn at the store (each takes milliseconds).
const LOCK_WAIT: Duration = Duration::from_secs(5);

/// The store's name in the build's folder.
const STORE: &str = "kernels.bin";

/// A compiled-kernel entry as CubeCL wrote it, and the chunk file (relative to the work
/// folder) it belongs to.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Record {
    chunk: String,
    entry: Vec<u8>,
}

impl Record {
    fn checksum(&self) -> u64 {
        let mut hash = xxhash_rust::xxh3::Xxh3::new();
        hash.update(&(self.chunk.len() as u16).to_le_bytes());
        hash.update(self.chunk.as_bytes());
        hash.update(&(self.entry.len() as u32).to_le_bytes());
        hash.update(&self.entry);
        hash.digest()
    }

    fn encode(&self, out: &mut Vec<u8>) {
        out.extend((self.chunk.len() as u16).to_le_bytes());
        out.extend(self.chunk.as_bytes());
        out.extend((self.entry.len() as u32).to_le_bytes());
        out.extend(&self.entry);
        out.extend(self.checksum().to_le_bytes());
    }
}

/// The chunk files CubeCL 0.10's compilation caches read (one per backend, relative to the cache
/// root; it never splits them): only these are written out or kept, so no record can put a
/// folder where CubeCL expects a file.
const CHUNKS: [&str; 3] = [
    "vulkan/0.10.0/spirv/chunk0.cbor",
    "cuda/0.10.0/ptx/chunk0.cbor",
    "hip/0.10.0/hip-kernel/chunk0.cbor",
];

fn is_chunk_path(path: &str) -> bool {
    CHUNKS.contains(&path)
}

/// The records of a store file, or where and why it does not check out.
fn decode(bytes: &[u8]) -> Result<Vec<Record>, String> {
    let mut rest = bytes
        .strip_prefix(MAGIC)
        .ok_or("its header is not a tilemm kernel store's")?;
    let mut records = Vec::new();
    while !rest.is_empty() {
        let at = bytes.len() - rest.len();
        let bad = |why: &str| format!("record {} at byte {at}: {why}", records.len());
        let mut take = |n: usize| -> Result<&[u8], String> {
            let (head, tail) = rest.split_at_checked(n).ok_or_else(|| bad("truncated"))?;
            rest = tail;
            Ok(head)
        };
        let len = u16::from_le_bytes(take(2)?.try_into().expect("2 bytes")) as usize;
        let chunk = String::from_utf8(take(len)?.to_vec()).map_err(|_| bad("a bad chunk path"))?;
        let len = u32::from_le_bytes(take(4)?.try_into().expect("4 bytes")) as usize;
        let entry = take(len)?.to_vec();
        let sum = u64::from_le_bytes(take(8)?.try_into().expect("8 bytes"));
        let record = Record { chunk, entry };
        if !is_chunk_path(&record.chunk) {
            return Err(bad("a bad chunk path"));
        }
        if record.checksum() != sum {
            return Err(bad("checksum mismatch"));
        }
        records.push(record);
    }
    Ok(records)
}

/// The complete CBOR items at the start of `bytes` (CubeCL's entries), and how many bytes they
/// take: an item still being written is left for later.
fn complete_entries(bytes: &[u8]) -> (Vec<Vec<u8>>, usize) {
    let mut cursor = Cursor::new(bytes);
    let mut entries = Vec::new();
    loop {
        let start = cursor.position() as usize;
        if start == bytes.len() {
            return (entries, start);
        }
        match ciborium::de::from_reader::<ciborium::Value, _>(&mut cursor) {
            Ok(_) => entries.push(bytes[start..cursor.position() as usize].to_vec()),
            Err(_) => return (entries, start),
        }
    }
}

/// What a process has taken from its work folder, and what is in the store.
#[derive(Default)]
struct Taken {
    /// Bytes of each chunk file already read.
    read: HashMap<String, u64>,
    /// Checksums of the records the store holds.
    stored: HashSet<u64>,
    /// Records read but not yet stored (the store was busy).
    pending: Vec<Record>,
}

/// The store of one build, opened by this process.
pub(crate) struct Store {
    path: PathBuf,
    lock: PathBuf,
    work: PathBuf,
    /// The lock that says this process owns `work`.
    _owner: File,
    pid: u32,
    /// The store's size past which new kernels are not kept.
    max_bytes: u64,
    taken: Mutex<Taken>,
}

impl Store {
    /// Opens the store of the build folder `root` (created if absent), repairing what it can,
    /// with a note for each repair; `Err` says why kernels cannot be kept.
    pub(crate) fn open(
        root: &Path,
        max_bytes: u64,
        notes: &mut Vec<String>,
    ) -> Result<Self, String> {
        let lock = root.join("lock");
        let turn = files::lock(&lock, LOCK_WAIT).map_err(|e| format!("{}: {e}", lock.display()))?;
        let work_root = root.join("work");
        remove_orphans(&work_root);
        let path = root.join(STORE);
        let records = match read_own(&path, max_bytes) {
            Ok(bytes) => decode(&bytes).unwrap_or_else(|why| {
                quarantine(&path, &why, notes);
                Vec::new()
            }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
            // Past its size the store starts again empty: every process reads it whole.
            Err(e) if e.kind() == io::ErrorKind::InvalidData => Vec::new(),
            Err(e) => {
                quarantine(&path, &e.to_string(), notes);
                Vec::new()
            }
        };
        // A store this process cannot append to (another user's) is written anew, as its own.
        let appendable = files::open_regular(&path, OpenOptions::new().append(true)).is_ok();
        if records.is_empty() || !appendable {
            rewrite(&path, &records).map_err(|e| format!("{}: {e}", path.display()))?;
        }
        let (work, owner) =
            make_work(&work_root).map_err(|e| format!("{}: {e}", work_root.display()))?;
        let mut taken = Taken::default();
        if let Err(e) = write_out(&work, &records, &mut taken) {
            // What cannot be written out is not used: the store starts again.
            quarantine(&path, &e, notes);
            rewrite(&path, &[]).map_err(|e| format!("{}: {e}", path.display()))?;
            let _ = std::fs::remove_dir_all(&work);
            std::fs::create_dir_all(&work).map_err(|e| format!("{}: {e}", work.display()))?;
            taken = Taken::default();
        }
        // Its age says it is in use (other builds' folders are removed when unused).
        let _ = std::fs::File::open(root).and_then(|d| d.set_modified(SystemTime::now()));
        drop(turn);
        Ok(Store {
            path,
            lock,
            work,
            _owner: owner,
            pid: std::process::id(),
            max_bytes,
            taken: Mutex::new(taken),
        })
    }

    /// The folder CubeCL is given as its cache root.
    pub(crate) fn work(&self) -> &Path {
        &self.work
    }

    /// Copies the entries CubeCL has added to the work folder into the store. Never fails: a
    /// busy or damaged store keeps them for a later call (or loses them, which costs one
    /// compilation in a later process).
    pub(crate) fn keep_new(&self) {
        self.keep_new_waiting(Duration::ZERO);
    }

    /// [`Store::keep_new`], waiting at most `wait` for another process's turn.
    fn keep_new_waiting(&self, wait: Duration) {
        // A forked child's folder and store are its parent's.
        if std::process::id() != self.pid {
            return;
        }
        let mut taken = self.taken.lock().unwrap_or_else(|e| e.into_inner());
        // The chunk files CubeCL writes (absent until a backend opens a device).
        for chunk in CHUNKS {
            let read = taken.read.get(chunk).copied().unwrap_or(0);
            let Ok(bytes) = read_from(&self.work.join(chunk), read) else {
                continue;
            };
            let (entries, used) = complete_entries(&bytes);
            taken.read.insert(chunk.to_string(), read + used as u64);
            for entry in entries {
                let record = Record {
                    chunk: chunk.to_string(),
                    entry,
                };
                if !taken.stored.contains(&record.checksum()) {
                    taken.pending.push(record);
                }
            }
        }
        if taken.pending.is_empty() {
            return;
        }
        let Ok(_turn) = files::lock(&self.lock, wait) else {
            return;
        };
        // What other processes stored meanwhile is not stored twice; a store damaged meanwhile
        // is left for the next process to move aside.
        let Ok(Ok(records)) = read_own(&self.path, self.max_bytes).map(|b| decode(&b)) else {
            return;
        };
        taken.stored.extend(records.iter().map(Record::checksum));
        let Ok(mut file) = files::open_regular(&self.path, OpenOptions::new().append(true)) else {
            return;
        };
        let Ok(len) = file.metadata().map(|m| m.len()) else {
            return;
        };
        let mut bytes = Vec::new();
        for record in std::mem::take(&mut taken.pending) {
            let mut encoded = Vec::new();
            record.encode(&mut encoded);
            // Past its size the store keeps what it has (starting again would have every
            // process compile everything again): a kernel that does not fit is not kept.
            let fits = len + (bytes.len() + encoded.len()) as u64 <= self.max_bytes;
            if fits && taken.stored.insert(record.checksum()) {
                bytes.extend(encoded);
            }
        }
        if file.write_all(&bytes).is_err() {
            // A record cut short (a full disk, a quota) would make the whole store fail its
            // check: it is cut back, and tried again later.
            let _ = file.set_len(len);
            let records = decode(&[MAGIC, &bytes].concat()).unwrap_or_default();
            for record in &records {
                taken.stored.remove(&record.checksum());
            }
            taken.pending = records;
        }
    }

    /// At the process's end: keeps what is new and removes the work folder (only in the
    /// process that made it, not in a forked child).
    pub(crate) fn close(&self) {
        if std::process::id() == self.pid {
            self.keep_new_waiting(LOCK_WAIT);
            let _ = std::fs::remove_dir_all(&self.work);
        }
    }
}

/// The store at `path` if this user owns it and no one else may write it: another user's
/// (even for root) could hold anything under valid checksums.
fn read_own(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    let file = files::open_regular(path, OpenOptions::new().read(true))?;
    let meta = file.metadata()?;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if meta.uid() != me || meta.mode() & 0o022 != 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "owned by user {} with mode {:o}: only this user's own store is trusted",
                meta.uid(),
                meta.mode() & 0o777
            ),
        ));
    }
    files::read_file(file, limit)
}

/// Writes the store's records out as CubeCL's chunk files in `work`, noting what was taken.
fn write_out(work: &Path, records: &[Record], taken: &mut Taken) -> Result<(), String> {
    for chunk in CHUNKS {
        let ours = || records.iter().filter(|r| r.chunk == chunk);
        taken.stored.extend(ours().map(Record::checksum));
        let bytes: Vec<u8> = ours().flat_map(|r| r.entry.iter().copied()).collect();
        if bytes.is_empty() {
            continue;
        }
        let file = work.join(chunk);
        file.parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::write(&file, &bytes))
            .map_err(|e| format!("cannot write it out: {}: {e}", file.display()))?;
        taken.read.insert(chunk.to_string(), bytes.len() as u64);
    }
    Ok(())
}

/// Moves a damaged store aside, replacing what was moved aside before, and says so.
fn quarantine(path: &Path, why: &str, notes: &mut Vec<String>) {
    let mut aside = path.as_os_str().to_owned();
    aside.push(".damaged");
    let aside = PathBuf::from(aside);
    let _ = files::remove_any(&aside);
    let done = match std::fs::rename(path, &aside) {
        Ok(()) => format!("moved it to {}", aside.display()),
        Err(_) if files::remove_any(path).is_ok() => "removed it".into(),
        Err(e) => format!("cannot move it aside ({e})"),
    };
    notes.push(format!(
        "kernel cache {} was damaged ({why}); {done}, and its kernels are compiled again",
        path.display(),
    ));
}

/// Writes a store holding `records`, replacing `path` at once (by a rename).
fn rewrite(path: &Path, records: &[Record]) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut bytes = MAGIC.to_vec();
    for record in records {
        record.encode(&mut bytes);
    }
    let mut temp = tempfile::NamedTempFile::new_in(dir)?;
    temp.write_all(&bytes)?;
    temp.as_file().sync_all()?;
    temp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// A new work folder under `work_root`, with the held lock that marks it as this process's.
fn make_work(work_root: &Path) -> io::Result<(PathBuf, File)> {
    if !std::fs::symlink_metadata(work_root).is_ok_and(|m| m.is_dir()) {
        let _ = std::fs::remove_file(work_root);
    }
    std::fs::create_dir_all(work_root)?;
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .subsec_nanos();
    let work = work_root.join(format!("{}-{nanos}", std::process::id()));
    std::fs::create_dir(&work)?;
    let owner = files::lock(&work.join("owner"), Duration::ZERO)?;
    Ok((work, owner))
}

/// Whether a process is using the build folder `root` (one of its work folders is owned).
pub(crate) fn in_use(root: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(root.join("work")) else {
        return false;
    };
    entries.flatten().any(|entry| {
        files::open_regular(&entry.path().join("owner"), OpenOptions::new().read(true))
            .is_ok_and(|owner| owner.try_lock().is_err())
    })
}

/// Removes the work folders whose process has died (their owner lock is free), and anything
/// else found there.
fn remove_orphans(work_root: &Path) {
    let Ok(entries) = std::fs::read_dir(work_root) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if !entry.file_type().is_ok_and(|t| t.is_dir()) {
            let _ = std::fs::remove_file(&path);
            continue;
        }
        let alive = files::open_regular(&path.join("owner"), OpenOptions::new().read(true))
            .is_ok_and(|owner| owner.try_lock().is_err());
        if !alive {
            let _ = std::fs::remove_dir_all(&path);
        }
    }
}

/// The bytes of the regular file `path` from `offset` on.
fn read_from(path: &Path, offset: u64) -> io::Result<Vec<u8>> {
    let mut file = files::open_regular(path, OpenOptions::new().read(true))?;
    file.seek(SeekFrom::Start(offset))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(n: u8) -> Vec<u8> {
        let mut bytes = Vec::new();
        ciborium::ser::into_writer(&(n, vec![n; 3]), &mut bytes).unwrap();
        bytes
    }

    #[test]
    fn records_round_trip_and_any_damage_is_found() {
        let records: Vec<Record> = (0..3)
            .map(|n| Record {
                chunk: "vulkan/0.10.0/spirv/chunk0.cbor".into(),
                entry: entry(n),
            })
            .collect();
        let mut bytes = MAGIC.to_vec();
        records.iter().for_each(|r| r.encode(&mut bytes));
        assert_eq!(decode(&bytes).unwrap(), records);
        for at in 0..bytes.len() {
            let mut flipped = bytes.clone();
            flipped[at] ^= 0x10;
            assert!(decode(&flipped).is_err(), "a flip at byte {at} went unseen");
            // A cut between records leaves fewer kernels, never a wrong one.
            if let Ok(kept) = decode(&bytes[..at]) {
                assert_eq!(kept, records[..kept.len()], "a cut at {at}");
            }
        }
        // Valid checksums are not enough: only CubeCL's chunk files are written out.
        for chunk in [
            "../escape.cbor",
            "vulkan/0.10.0/spirv/chunk0.cbor/x.cbor",
            "toc.json.log",
        ] {
            let bad = Record {
                chunk: chunk.into(),
                entry: entry(0),
            };
            let mut bytes = MAGIC.to_vec();
            bad.encode(&mut bytes);
            assert!(
                decode(&bytes).unwrap_err().contains("chunk path"),
                "{chunk}"
            );
        }
    }

    #[test]
    fn a_store_others_may_write_is_not_trusted_and_a_full_one_stops_growing() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let chunk = CHUNKS[0];
        let record_len = |n: u8| 2 + chunk.len() + 4 + entry(n).len() + 8;
        // Room for the header and one record.
        let max = (MAGIC.len() + record_len(1)) as u64;
        let mut notes = Vec::new();
        let store = Store::open(dir.path(), max, &mut notes).unwrap();
        let file = store.work().join(chunk);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, [entry(1), entry(2)].concat()).unwrap();
        store.close();
        let path = dir.path().join(STORE);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), max);
        let store = Store::open(dir.path(), max, &mut notes).unwrap();
        assert_eq!(std::fs::read(store.work().join(chunk)).unwrap(), entry(1));
        store.close();
        assert!(notes.is_empty(), "{notes:?}");

        // Writable by others: anything could be in it, checksums included.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
        let store = Store::open(dir.path(), max, &mut notes).unwrap();
        assert!(
            notes[0].contains("only this user's own store is trusted"),
            "{notes:?}"
        );
        assert!(!store.work().join(chunk).exists());
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o022, 0, "{mode:o}");
    }

    #[test]
    fn only_complete_entries_are_taken() {
        let bytes = [entry(1), entry(2)].concat();
        let (entries, used) = complete_entries(&bytes[..bytes.len() - 1]);
        assert_eq!((entries, used), (vec![entry(1)], entry(1).len()));
        assert_eq!(complete_entries(&bytes).0.len(), 2);
    }

    #[test]
    fn kernels_written_in_one_process_are_read_in_the_next() {
        let dir = tempfile::tempdir().unwrap();
        let mut notes = Vec::new();
        let chunk = "vulkan/0.10.0/spirv/chunk0.cbor";
        let first = Store::open(dir.path(), 1 << 20, &mut notes).unwrap();
        let file = first.work().join(chunk);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, [entry(1), entry(2)].concat()).unwrap();
        first.keep_new();
        first.keep_new();
        // Another "process" while the first runs: its own folder, the first's kernels.
        let second = Store::open(dir.path(), 1 << 20, &mut notes).unwrap();
        assert_ne!(second.work(), first.work());
        assert_eq!(
            std::fs::read(second.work().join(chunk)).unwrap(),
            [entry(1), entry(2)].concat()
        );
        first.close();
        assert!(!first.work().exists());
        assert!(notes.is_empty(), "{notes:?}");

        // Damage: moved aside with a note, and the next store is empty and usable.
        let store = dir.path().join(STORE);
        let mut bytes = std::fs::read(&store).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&store, bytes).unwrap();
        drop(second);
        let third = Store::open(dir.path(), 1 << 20, &mut notes).unwrap();
        assert!(notes[0].contains("checksum mismatch"), "{notes:?}");
        assert!(dir.path().join("kernels.bin.damaged").is_file());
        assert!(!third.work().join(chunk).exists());
        // The second's folder was left by a "dead" process: its owner lock is free now.
        assert_eq!(
            std::fs::read_dir(dir.path().join("work")).unwrap().count(),
            1
        );
    }
}
