//! What tilemm keeps across processes, under one directory: the tuner's choices
//! (`tuning.json`) and compiled kernels (`kernels/`); and CubeCL's configuration, which tilemm
//! sets for the process.
//!
//! Compiled kernels are CubeCL's compilation cache (SPIR-V on Vulkan, PTX on CUDA, code objects
//! on HIP), switched on here because CubeCL leaves it off: without it every process generates
//! and compiles every kernel again, about 2 s for one register-tiled kernel on lavapipe, against
//! tens of milliseconds to load it. CubeCL keys a kernel by its name and configuration (and on
//! wgpu the device's properties), not by its code, so the kernels are kept per build of tilemm
//! (`kernels/<build>/`), at most 8 MiB of them, about 170 kernels (a process reads them all
//! when it opens a device, about 10 ms per MiB on lavapipe's host); directories of other builds
//! unused for 30 days are removed. tilemm keeps them in a store of its own that it checks
//! (`cache/store.rs`), and CubeCL works on a copy of the process's own.
//!
//! Nothing here is ever fatal: a damaged store is moved aside with a note and rebuilt, and a
//! cache directory that is missing, unwritable or on a full disk turns the kernel cache off for
//! the process, and says why.
//!
//! CubeCL would otherwise read its configuration from a `cubecl.toml` or `burn.toml` in the
//! working directory or any above it, and from `CUBECL_*` variables, and panic on a malformed
//! one. An installed tool must not change with the directory it runs in, so tilemm sets the
//! whole configuration itself before CubeCL reads it: logging off, the compilation cache and
//! CubeCL's own autotune cache in the process's work folder (or nowhere).

mod store;

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};

/// The build's identity: a hash of tilemm's version and sources (see `build.rs`).
pub const BUILD: &str = env!("TILEMM_BUILD_ID");

/// Free space the kernel cache wants on its disk: CubeCL stops the process on a failed write.
const MIN_FREE_BYTES: u64 = 256 << 20;

/// Kernels kept per build at most: CubeCL reads all of them when a process opens a device, so
/// past this the store keeps what it has.
const MAX_KEPT_BYTES: u64 = 8 << 20;

/// How long another build's kernels are kept unused.
const STALE_AFTER: Duration = Duration::from_secs(30 * 24 * 3600);

/// tilemm's cache directory: `$TILEMM_CACHE_DIR`, else `tilemm` under the user's cache
/// directory (`$XDG_CACHE_HOME` or `~/.cache` on Linux).
/// Made absolute, so that a library's caller changing directory does not move it.
pub fn dir() -> Option<PathBuf> {
    let dir = match std::env::var_os("TILEMM_CACHE_DIR") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => dirs::cache_dir()?.join("tilemm"),
    };
    std::path::absolute(dir).ok()
}

/// Whether kernels compiled by this process are kept for the next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KernelCache {
    /// They are kept under this directory.
    On(PathBuf),
    /// `TILEMM_KERNEL_CACHE=off` (or `0`) asked for none.
    Disabled,
    /// They cannot be kept, for this reason.
    Off(String),
}

/// What [`configure_cubecl`] decided for the process.
struct Setup {
    kernels: KernelCache,
    notes: Vec<String>,
}

/// The process's kernel store, once opened.
static STORE: OnceLock<store::Store> = OnceLock::new();

fn setup() -> &'static Setup {
    static SETUP: OnceLock<Setup> = OnceLock::new();
    SETUP.get_or_init(set_up)
}

/// Sets CubeCL's configuration for the process, once, before anything reads it: every entry
/// into CubeCL calls this first.
pub fn configure_cubecl() {
    setup();
}

/// The kernel cache of this process (setting CubeCL's configuration on the first call).
/// `TILEMM_KERNEL_CACHE=off` turns it off.
pub fn kernel_cache() -> &'static KernelCache {
    &setup().kernels
}

/// What setting up the kernel cache repaired (a damaged store moved aside), one line each.
pub fn kernel_cache_notes() -> &'static [String] {
    &setup().notes
}

/// Copies the kernels compiled since the last call into the store, for later processes; cheap
/// when there are none (a few file-system calls).
pub fn keep_new_kernels() {
    if let Some(store) = STORE.get() {
        store.keep_new();
    }
}

fn set_up() -> Setup {
    use cubecl::config::cache::CacheConfig;
    use cubecl::config::{CubeClRuntimeConfig, RuntimeConfig};

    let mut notes = Vec::new();
    if CubeClRuntimeConfig::storage().lock().is_some() {
        return Setup {
            kernels: KernelCache::Off(
                "CubeCL's configuration was read before tilemm set it".into(),
            ),
            notes,
        };
    }
    let kernels = if std::env::var_os("TILEMM_KERNEL_CACHE").is_some_and(|v| v == "off" || v == "0")
    {
        KernelCache::Disabled
    } else {
        match open_store(&mut notes) {
            Ok((root, store)) => {
                let _ = STORE.set(store);
                // SAFETY: registers a function without arguments that catches its own panics.
                unsafe { libc::atexit(close_store) };
                KernelCache::On(root)
            }
            Err(why) => KernelCache::Off(why),
        }
    };
    let mut config = quiet(CubeClRuntimeConfig::default());
    let work = STORE.get().map(|s| s.work().to_path_buf());
    config.compilation.cache = work.clone().map(CacheConfig::File);
    // CubeCL's autotune (the peers') keeps its choices in the work folder, or nowhere: a path
    // under a file, which CubeCL cannot create and so leaves alone.
    config.autotune.cache = CacheConfig::File(work.unwrap_or_else(|| "/dev/null/tilemm".into()));
    let mut state = CubeClRuntimeConfig::storage().lock();
    if state.is_some() {
        return Setup {
            kernels: KernelCache::Off(
                "CubeCL's configuration was read before tilemm set it".into(),
            ),
            notes,
        };
    }
    *state = Some(Arc::new(config));
    Setup { kernels, notes }
}

/// CubeCL's loggers off: its log files and levels are not tilemm's settings.
fn quiet(mut config: cubecl::config::CubeClRuntimeConfig) -> cubecl::config::CubeClRuntimeConfig {
    use cubecl::config::{autotune, compilation, memory, profiling, streaming};
    config.compilation.logger.level = compilation::CompilationLogLevel::Disabled;
    config.profiling.logger.level = profiling::ProfilingLogLevel::Disabled;
    config.autotune.logger.level = autotune::AutotuneLogLevel::Disabled;
    config.streaming.logger.level = streaming::StreamingLogLevel::Disabled;
    config.memory.logger.level = memory::MemoryLogLevel::Disabled;
    config
}

extern "C" fn close_store() {
    let _ = std::panic::catch_unwind(|| {
        if let Some(store) = STORE.get() {
            store.close();
        }
    });
}

/// The kernel store of this build (and its folder), checked and repaired, or why there is none.
fn open_store(notes: &mut Vec<String>) -> Result<(PathBuf, store::Store), String> {
    let Some(base) = dir() else {
        return Err("no cache directory: set TILEMM_CACHE_DIR".into());
    };
    let kernels = base.join("kernels");
    let root = kernels.join(BUILD);
    usable(&root, notes).map_err(|why| format!("{}: {why}", root.display()))?;
    remove_stale(&kernels);
    let store = store::Store::open(&root, MAX_KEPT_BYTES, notes)?;
    Ok((root, store))
}

/// Whether kernels can be kept under `root`: a directory (what else is there is moved aside)
/// that can be created and written, on a disk with room.
fn usable(root: &Path, notes: &mut Vec<String>) -> Result<(), String> {
    if std::fs::symlink_metadata(root).is_ok_and(|m| !m.is_dir()) {
        let mut aside = root.as_os_str().to_owned();
        aside.push(".damaged");
        let _ = crate::io::files::remove_any(Path::new(&aside));
        std::fs::rename(root, &aside)
            .map_err(|e| format!("not a directory, and cannot be moved aside: {e}"))?;
        notes.push(format!(
            "kernel cache {} was not a directory; moved it to {}",
            root.display(),
            Path::new(&aside).display()
        ));
    }
    // Made, and written through an unnamed file: nothing at a fixed name (a FIFO) can get in
    // the way.
    let make = || {
        std::fs::create_dir_all(root)?;
        let mut probe = tempfile::tempfile_in(root)?;
        std::io::Write::write_all(&mut probe, b"tilemm")
    };
    // What another user left inside (one `sudo tilemm`) is neither writable nor trusted.
    let foreign = || {
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        ["kernels.bin", "lock", "work"].iter().find_map(|name| {
            let meta = std::fs::symlink_metadata(root.join(name)).ok()?;
            (meta.uid() != me).then(|| {
                std::io::Error::new(
                    std::io::ErrorKind::PermissionDenied,
                    format!("its {name} belongs to user {}", meta.uid()),
                )
            })
        })
    };
    if let Err(e) = make().and_then(|()| foreign().map_or(Ok(()), Err)) {
        let why = format!("cannot create it or write in it: {e}");
        if e.kind() != std::io::ErrorKind::PermissionDenied {
            return Err(why);
        }
        // Another user's (after one `sudo tilemm`): the build's folder, or `kernels/` above
        // it, is moved aside where its parent allows, and made again.
        let aside =
            |dir: &Path| PathBuf::from(format!("{}.other-{}", dir.display(), std::process::id()));
        let moved = [root, root.parent().unwrap_or(root)]
            .into_iter()
            .filter(|dir| dir.exists())
            .find_map(|dir| std::fs::rename(dir, aside(dir)).ok().map(|()| aside(dir)))
            .ok_or_else(|| why.clone())?;
        make().map_err(|_| why)?;
        notes.push(format!(
            "kernel cache {} belongs to another user ({e}); moved it to {}",
            root.display(),
            moved.display()
        ));
    }
    let free = crate::host::free_disk_bytes(root).map_err(|e| format!("cannot stat it: {e}"))?;
    if free < MIN_FREE_BYTES {
        return Err(format!(
            "{} free on its disk, under the {} the cache wants",
            crate::host::format_bytes(free),
            crate::host::format_bytes(MIN_FREE_BYTES)
        ));
    }
    Ok(())
}

/// Removes other builds' kernel directories (and what was moved aside) not written for
/// [`STALE_AFTER`].
fn remove_stale(kernels: &Path) {
    let Ok(entries) = std::fs::read_dir(kernels) else {
        return;
    };
    let now = SystemTime::now();
    for entry in entries.flatten() {
        let stale = entry
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|t| now.duration_since(t).unwrap_or_default() > STALE_AFTER);
        if stale && entry.file_name() != BUILD && !store::in_use(&entry.path()) {
            let _ = crate::io::files::remove_any(&entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_build_has_an_identity() {
        assert_eq!(BUILD.len(), 16);
        assert!(BUILD.chars().all(|c| c.is_ascii_hexdigit()));
    }

    #[test]
    fn a_directory_that_cannot_be_made_is_not_usable() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file");
        std::fs::write(&file, b"x").unwrap();
        let mut notes = Vec::new();
        let why = usable(&file.join("kernels"), &mut notes).unwrap_err();
        assert!(why.contains("cannot create"), "{why}");
        usable(&dir.path().join("kernels"), &mut notes).unwrap();
        // A file where the build's directory should be is moved aside, with a note.
        usable(&file, &mut notes).unwrap();
        assert!(file.is_dir() && dir.path().join("file.damaged").is_file());
        assert!(notes[0].contains("not a directory"), "{notes:?}");
    }

    #[test]
    fn only_other_builds_unused_for_long_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let (old, fresh, ours) = (
            dir.path().join("0000000000000000"),
            dir.path().join("1111111111111111"),
            dir.path().join(BUILD),
        );
        let long_ago = SystemTime::now() - STALE_AFTER - Duration::from_secs(60);
        for d in [&old, &fresh, &ours] {
            std::fs::create_dir(d).unwrap();
        }
        for d in [&old, &ours] {
            std::fs::File::open(d)
                .unwrap()
                .set_modified(long_ago)
                .unwrap();
        }
        remove_stale(dir.path());
        assert!(!old.exists() && fresh.exists() && ours.exists());
    }
}
