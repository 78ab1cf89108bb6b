//! Gives the build an identity that changes whenever tilemm's sources do: compiled kernels
//! cached on disk are kept per build, because CubeCL's cache key (a kernel's type name and
//! configuration) does not change when a kernel's body does.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::Path;

fn hash_dir(dir: &Path, hasher: &mut DefaultHasher) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("the crate's src directory is readable")
        .map(|e| e.expect("a readable directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            hash_dir(&path, hasher);
        } else {
            path.file_name().hash(hasher);
            std::fs::read(&path)
                .expect("the crate's sources are readable")
                .hash(hasher);
        }
    }
}

fn main() {
    println!("cargo:rerun-if-changed=src");
    let mut hasher = DefaultHasher::new();
    env!("CARGO_PKG_VERSION").hash(&mut hasher);
    hash_dir(Path::new("src"), &mut hasher);
    println!("cargo:rustc-env=TILEMM_BUILD_ID={:016x}", hasher.finish());
}
