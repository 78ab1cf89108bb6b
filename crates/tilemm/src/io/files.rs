//! Opening the files tilemm keeps (caches and their locks) as untrusted input: only regular
//! files, opened without blocking and without following a symbolic link, so that a FIFO, socket,
//! device or directory at a cache's path gives an error to report instead of a hang.

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

/// Opens `path` with `options` if it is a regular file: a FIFO is opened without blocking (or
/// refused, for writing without a reader), a symbolic link is refused, and anything that is not
/// a regular file is closed again with an error.
pub(crate) fn open_regular(path: &Path, options: &mut OpenOptions) -> io::Result<File> {
    let file = options
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => not_regular("a symbolic link"),
            Some(libc::ENXIO) => not_regular("a FIFO or socket"),
            Some(libc::EISDIR) => not_regular("a directory"),
            _ => e,
        })?;
    let kind = file.metadata()?.file_type();
    if kind.is_file() {
        return Ok(file);
    }
    Err(not_regular(if kind.is_dir() {
        "a directory"
    } else {
        "a FIFO, socket or device"
    }))
}

/// Whether `path` still names the open `file`.
fn same_file(file: &File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), std::fs::symlink_metadata(path)) {
        (Ok(a), Ok(b)) => (a.dev(), a.ino()) == (b.dev(), b.ino()),
        _ => false,
    }
}

fn not_regular(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("not a regular file but {what}"),
    )
}

/// What a JSON file tilemm keeps (the tuning cache, the route model) held: nothing yet, or a
/// value, or why it cannot be used. A file that cannot be used is ignored (and replaced at the
/// next save), never the run's failure.
pub enum Kept<T> {
    /// No such file.
    Absent,
    /// The file's value.
    Read(T),
    /// Why it cannot be used: "is unreadable (…)", "is corrupt (…)".
    Unusable(String),
}

/// `path` opened for appending lines (a log): a regular file (created if absent), a FIFO with a
/// reader, or a terminal or other character device (`/dev/stderr`). It is opened without
/// blocking, so that a FIFO with no reader is an error and not a hang; opened, it blocks like
/// any file, so that a line to a full pipe waits for its reader rather than being lost.
pub fn open_append(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .append(true)
        .create(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ENXIO) => io::Error::other("a FIFO with no reader"),
            _ => e,
        })?;
    if file.metadata()?.is_dir() {
        return Err(io::Error::other("a directory"));
    }
    use std::os::fd::AsRawFd;
    // SAFETY: fcntl on a descriptor this function owns.
    unsafe {
        let flags = libc::fcntl(file.as_raw_fd(), libc::F_GETFL);
        if flags >= 0 {
            libc::fcntl(file.as_raw_fd(), libc::F_SETFL, flags & !libc::O_NONBLOCK);
        }
    }
    Ok(file)
}

/// The JSON file at `path` as a `T`, read only as a regular file of at most `limit` bytes (a
/// FIFO there would block, a huge file would be read whole). The caller checks its format.
pub fn read_json<T: serde::de::DeserializeOwned>(path: &Path, limit: u64) -> Kept<T> {
    let bytes = match read_regular(path, limit) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Kept::Absent,
        Err(e) => return Kept::Unusable(format!("is unreadable ({e})")),
    };
    match serde_json::from_slice(&bytes) {
        Ok(value) => Kept::Read(value),
        Err(e) => Kept::Unusable(format!("is corrupt ({e})")),
    }
}

/// The whole of the regular file at `path`, refused past `limit` bytes.
pub fn read_regular(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    read_file(open_regular(path, OpenOptions::new().read(true))?, limit)
}

/// The whole of an open regular file, refused past `limit` bytes.
pub fn read_file(file: File, limit: u64) -> io::Result<Vec<u8>> {
    let len = file.metadata()?.len();
    if len > limit {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{len} bytes, over the {limit} expected at most"),
        ));
    }
    let mut bytes = Vec::with_capacity(len as usize);
    file.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("grew past the {limit} bytes expected at most"),
        ));
    }
    Ok(bytes)
}

/// An exclusive advisory lock (`flock`) on the regular file at `path`, created if absent, held
/// until the returned file is closed. The kernel releases it when its holder dies, so a lock
/// never outlives its holder. Waits at most `wait`: holders keep it for milliseconds, and one
/// that keeps it longer (a stopped process) costs a note, not a hang.
/// Anything else at `path` (a FIFO, a link, a directory) is removed first: it is a path in
/// tilemm's cache directory, and a lock file's content means nothing.
pub fn lock(path: &Path, wait: Duration) -> io::Result<File> {
    // Read-only where it is another user's: flock needs no write access.
    let open = || {
        open_regular(
            path,
            OpenOptions::new().create(true).truncate(false).write(true),
        )
        .or_else(|e| match e.kind() {
            io::ErrorKind::PermissionDenied => open_regular(path, OpenOptions::new().read(true)),
            _ => Err(e),
        })
    };
    let file = match open() {
        Err(e) if e.kind() == io::ErrorKind::InvalidInput => {
            remove_any(path)
                .map_err(|r| io::Error::other(format!("{e}, and cannot be removed: {r}")))?;
            open()?
        }
        opened => opened?,
    };
    let start = Instant::now();
    loop {
        match file.try_lock() {
            // Another process may have replaced the path meanwhile (taking it back from a
            // FIFO, say): a lock counts only on the file the path names.
            Ok(()) if !same_file(&file, path) => {
                return lock(path, wait.saturating_sub(start.elapsed()))
            }
            Ok(()) => return Ok(file),
            Err(std::fs::TryLockError::WouldBlock) if start.elapsed() < wait => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "{} is locked by another process for over {} s",
                        path.display(),
                        wait.as_secs_f64()
                    ),
                ))
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(e),
        }
    }
}

/// Replaces the file at `path` at once, by a rename, with what `contents` returns, so that a
/// reader never sees half. Writers take turns through [`lock`] on `<path>.lock` (waiting at
/// most `wait`), and `contents` runs inside that turn: it can read the file as it is now,
/// another process may have written it since it was last read, and add to it.
pub fn replace_locked(
    path: &Path,
    wait: Duration,
    contents: impl FnOnce() -> io::Result<Vec<u8>>,
) -> io::Result<()> {
    use std::io::Write;
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let mut lock_path = path.as_os_str().to_owned();
    lock_path.push(".lock");
    let lock = lock(Path::new(&lock_path), wait)?;
    let bytes = contents()?;
    let mut temp = tempfile::NamedTempFile::new_in(dir)?;
    temp.write_all(&bytes)?;
    temp.as_file().sync_all()?;
    temp.persist(path).map_err(|e| e.error)?;
    drop(lock);
    Ok(())
}

/// Removes what is at `path`, a folder with what it holds.
pub(crate) fn remove_any(path: &Path) -> io::Result<()> {
    match std::fs::symlink_metadata(path)? {
        m if m.is_dir() => std::fs::remove_dir_all(path),
        _ => std::fs::remove_file(path),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A FIFO at `path` (the tests' hostile cache file).
    pub(crate) fn mkfifo(path: &Path) {
        use std::os::unix::ffi::OsStrExt;
        let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    }

    #[test]
    fn only_regular_files_are_opened_and_a_fifo_does_not_block() {
        let dir = tempfile::tempdir().unwrap();
        let (file, fifo, sub, link) = (
            dir.path().join("file"),
            dir.path().join("fifo"),
            dir.path().join("sub"),
            dir.path().join("link"),
        );
        std::fs::write(&file, b"tilemm").unwrap();
        mkfifo(&fifo);
        std::fs::create_dir(&sub).unwrap();
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert_eq!(read_regular(&file, 6).unwrap(), b"tilemm");
        assert!(read_regular(&file, 5).is_err());
        for (path, what) in [
            (&fifo, "FIFO"),
            (&sub, "directory"),
            (&link, "symbolic link"),
        ] {
            let why = read_regular(path, 100).unwrap_err().to_string();
            assert!(why.contains(what), "{}: {why}", path.display());
        }
        // A lock's path is taken back from whatever is there.
        std::fs::write(sub.join("x"), b"").unwrap();
        for path in [&fifo, &sub, &link] {
            drop(lock(path, Duration::ZERO).unwrap());
            assert!(std::fs::symlink_metadata(path).unwrap().is_file());
        }
        assert_eq!(std::fs::read(&file).unwrap(), b"tilemm");
    }

    #[test]
    fn a_lock_is_exclusive_until_its_holder_lets_go() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lock");
        let held = lock(&path, Duration::ZERO).unwrap();
        let why = lock(&path, Duration::from_millis(30)).unwrap_err();
        assert_eq!(why.kind(), io::ErrorKind::TimedOut);
        drop(held);
        lock(&path, Duration::ZERO).unwrap();
    }
}
