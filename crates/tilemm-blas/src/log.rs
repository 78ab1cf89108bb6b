//! The call log (`TILEMM_BLAS_LOG`), one line a call, and whether this process is a forked
//! child of the one that started the library.
//!
//! A `write` a line costs a system call, about what a small product costs (LAPACK's test
//! programs make millions of calls of order 1–10). So to a regular file the lines go in
//! batches: each reaches the file within [`FLUSH_AFTER`] (a thread of this library writes
//! them), when [`BATCH`] bytes are waiting, and at exit; lines logged after that (by a host's
//! later `atexit` handlers) are written as they come. To anything else (a terminal, a pipe,
//! `/dev/stderr`) every line is written as it comes. A process killed by a signal loses at most
//! its last [`FLUSH_AFTER`] of lines.

use std::fs::File;
use std::io::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

/// The longest a line waits in the batch.
pub const FLUSH_AFTER: Duration = Duration::from_millis(100);

/// The batch written at once, whatever its age.
pub const BATCH: usize = 64 << 10;

/// Set in a child forked after [`Log::open`] or [`watch_forks`] ran in this process (or its
/// parent): tilemm's threads and device stay with the parent.
static FORKED: AtomicBool = AtomicBool::new(false);

/// Whether this process is a child forked after [`watch_forks`] ran in an ancestor.
pub fn forked() -> bool {
    FORKED.load(Ordering::Relaxed)
}

/// Makes [`forked`] true in every child forked from now on (a flag set by `pthread_atfork`'s
/// child handler: no system call a BLAS call, as comparing process ids took).
pub fn watch_forks() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    extern "C" fn in_child() {
        FORKED.store(true, Ordering::Relaxed);
    }
    // SAFETY: registers a handler that only stores to an atomic (async-signal-safe).
    ONCE.call_once(|| unsafe {
        libc::pthread_atfork(None, None, Some(in_child));
    });
}

/// The open log.
pub struct Log {
    state: Mutex<State>,
    /// Signalled when the batch gets its first line.
    waiting: Condvar,
}

struct State {
    file: File,
    batch: Vec<u8>,
    /// Lines written as they come: the log is not a regular file, no thread could be started to
    /// write the batches, or the process is exiting.
    direct: bool,
    writer_started: bool,
}

/// The process's log, once opened.
static LOG: OnceLock<Log> = OnceLock::new();

impl Log {
    /// The process's log on `file` (the first call's file; later calls get that one).
    pub fn open(file: File) -> &'static Log {
        watch_forks();
        LOG.get_or_init(|| {
            // SAFETY: registers a plain `extern "C"` function.
            let at_exit = unsafe { libc::atexit(flush_at_exit) } == 0;
            let regular = file.metadata().is_ok_and(|m| m.file_type().is_file());
            Log {
                state: Mutex::new(State {
                    file,
                    batch: Vec::new(),
                    direct: !(regular && at_exit),
                    writer_started: false,
                }),
                waiting: Condvar::new(),
            }
        })
    }

    /// Logs `line` (without its newline). A log that cannot take it (a full disk) costs the
    /// line, never the call.
    pub fn line(&'static self, line: &str) {
        if forked() {
            // Another thread of the parent may have held the lock at the fork.
            return;
        }
        let mut state = self.lock();
        if state.direct {
            let mut bytes = Vec::with_capacity(line.len() + 1);
            bytes.extend_from_slice(line.as_bytes());
            bytes.push(b'\n');
            let _ = state.file.write_all(&bytes);
            return;
        }
        let first = state.batch.is_empty();
        state.batch.extend_from_slice(line.as_bytes());
        state.batch.push(b'\n');
        if state.batch.len() >= BATCH {
            state.write_batch();
        } else if first {
            if !state.writer_started {
                state.writer_started = true;
                let started = std::thread::Builder::new()
                    .name("tilemm-blas-log".into())
                    .spawn(move || self.write_batches());
                if started.is_err() {
                    state.direct = true;
                    state.write_batch();
                    return;
                }
            }
            self.waiting.notify_one();
        }
    }

    /// The writer thread: each batch FLUSH_AFTER after its first line.
    fn write_batches(&'static self) {
        let mut state = self.lock();
        loop {
            state = self
                .waiting
                .wait_while(state, |s| s.batch.is_empty())
                .unwrap_or_else(|e| e.into_inner());
            drop(state);
            std::thread::sleep(FLUSH_AFTER);
            state = self.lock();
            state.write_batch();
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl State {
    fn write_batch(&mut self) {
        let _ = self.file.write_all(&self.batch);
        self.batch.clear();
    }
}

/// At exit: the batch written, and later lines as they come. Not in a forked child, whose
/// batch is a copy of its parent's.
extern "C" fn flush_at_exit() {
    if forked() {
        return;
    }
    if let Some(log) = LOG.get() {
        let mut state = log.lock();
        state.direct = true;
        state.write_batch();
    }
}
