//! What tilemm keeps across processes, under one directory: the tuner's choices
//! (`tuning.json`) and compiled kernels (`kernels/`).
//!
//! Compiled kernels are CubeCL's compilation cache (SPIR-V on Vulkan, PTX on CUDA, code objects
//! on HIP), switched on here because CubeCL leaves it off: without it every process generates
//! and compiles every kernel again, about 2 s for one register-tiled kernel on lavapipe, against
//! tens of milliseconds to load it. CubeCL keys a kernel by its name, configuration and the
//! device's properties, not by its code, so the kernels are kept per build of tilemm
//! (`kernels/<build>/`), at most 8 MiB of them, about 170 kernels (a process reads them all
//! when it opens a device, about 10 ms per MiB on lavapipe's host); directories of other builds
//! unused for 30 days are removed.
//!
//! Nothing here is ever fatal: a cache directory that is missing, unwritable, unreadable or on
//! a full disk turns the kernel cache off for the process, and says why.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};

/// The build's identity: a hash of tilemm's version and sources (see `build.rs`).
pub const BUILD: &str = env!("TILEMM_BUILD_ID");

/// Free space the kernel cache wants on its disk: CubeCL stops the process on a failed write.
const MIN_FREE_BYTES: u64 = 256 << 20;

/// Kernels kept per build at most: CubeCL reads all of them when a process opens a device, so
/// past this the directory starts again empty.
const MAX_KEPT_BYTES: u64 = 8 << 20;

/// How long another build's kernels are kept unused.
const STALE_AFTER: Duration = Duration::from_secs(30 * 24 * 3600);

/// tilemm's cache directory: `$TILEMM_CACHE_DIR`, else `tilemm` under the user's cache
/// directory (`$XDG_CACHE_HOME` or `~/.cache` on Linux).
pub fn dir() -> Option<PathBuf> {
    match std::env::var_os("TILEMM_CACHE_DIR") {
        Some(dir) if !dir.is_empty() => Some(PathBuf::from(dir)),
        _ => Some(dirs::cache_dir()?.join("tilemm")),
    }
}

/// Whether kernels compiled by this process are kept for the next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KernelCache {
    /// They are kept under this directory.
    On(PathBuf),
    /// A `cubecl.toml` in the working directory or above it sets CubeCL's compilation cache.
    ByCubeclToml,
    /// `TILEMM_KERNEL_CACHE=off` (or `0`) asked for none.
    Disabled,
    /// They cannot be kept, for this reason.
    Off(String),
}

/// The kernel cache of this process, set up on the first call: before the first device is
/// opened (CubeCL reads its configuration once). `TILEMM_KERNEL_CACHE=off` turns it off.
pub fn kernel_cache() -> &'static KernelCache {
    static CACHE: OnceLock<KernelCache> = OnceLock::new();
    CACHE.get_or_init(set_up)
}

fn set_up() -> KernelCache {
    use cubecl::config::cache::CacheConfig;
    use cubecl::config::{CubeClRuntimeConfig, RuntimeConfig};

    if std::env::var("TILEMM_KERNEL_CACHE").is_ok_and(|v| matches!(&*v, "off" | "0")) {
        return KernelCache::Disabled;
    }
    // What CubeCL would read itself: cubecl.toml above the working directory (CubeCL's reader
    // needs one), then its environment variables.
    let mut config = if std::env::current_dir().is_ok() {
        CubeClRuntimeConfig::from_current_dir().override_from_env()
    } else {
        CubeClRuntimeConfig::default()
    };
    if config.compilation.cache.is_some() {
        return KernelCache::ByCubeclToml;
    }
    let Some(base) = dir() else {
        return KernelCache::Off("no cache directory: set TILEMM_CACHE_DIR".into());
    };
    let kernels = base.join("kernels");
    let root = kernels.join(BUILD);
    if bytes_under(&root) > MAX_KEPT_BYTES {
        let _ = std::fs::remove_dir_all(&root);
    }
    if let Err(why) = usable(&root) {
        return KernelCache::Off(format!("{}: {why}", root.display()));
    }
    remove_stale(&kernels);
    config.compilation.cache = Some(CacheConfig::File(root.clone()));
    let mut state = CubeClRuntimeConfig::storage().lock();
    if state.is_some() {
        return KernelCache::Off("CubeCL's configuration was read before tilemm set it".into());
    }
    *state = Some(Arc::new(config));
    KernelCache::On(root)
}

/// Whether CubeCL can keep kernels under `root` without failing: CubeCL panics where it cannot
/// create, read or write its files.
fn usable(root: &Path) -> Result<(), String> {
    std::fs::create_dir_all(root).map_err(|e| format!("cannot create it: {e}"))?;
    let probe = root.join(format!(".probe-{}", std::process::id()));
    let written = std::fs::write(&probe, b"tilemm");
    let _ = std::fs::remove_file(&probe);
    written.map_err(|e| format!("cannot write in it: {e}"))?;
    let free = crate::host::free_disk_bytes(root).map_err(|e| format!("cannot stat it: {e}"))?;
    if free < MIN_FREE_BYTES {
        return Err(format!(
            "{} free on its disk, under the {} the cache wants",
            crate::plan::format_bytes(free),
            crate::plan::format_bytes(MIN_FREE_BYTES)
        ));
    }
    unreadable_file(root).map_or(Ok(()), |path| {
        Err(format!("cannot read {}", path.display()))
    })
}

/// The bytes of the files under `dir`.
fn bytes_under(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|entry| match entry.metadata() {
            Ok(m) if m.is_dir() => bytes_under(&entry.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

/// The first file under `dir` that cannot be opened for reading.
fn unreadable_file(dir: &Path) -> Option<PathBuf> {
    let entries = std::fs::read_dir(dir).ok()?;
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if let Some(bad) = unreadable_file(&path) {
                return Some(bad);
            }
        } else if std::fs::File::open(&path).is_err() {
            return Some(path);
        }
    }
    None
}

/// Removes other builds' kernel directories not written for [`STALE_AFTER`].
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
        if stale && entry.file_name() != BUILD && entry.path().is_dir() {
            let _ = std::fs::remove_dir_all(entry.path());
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
        let why = usable(&file.join("kernels")).unwrap_err();
        assert!(why.contains("cannot create"), "{why}");
        usable(&dir.path().join("kernels")).unwrap();
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
