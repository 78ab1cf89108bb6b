//! The lab's errors: the library's ([`tilemm::Error`]), and what only the lab does — reading
//! and writing operand files, the peers it measures against, generating and compiling code.

use std::path::PathBuf;

/// Everything the lab can fail at.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The library refused or failed.
    #[error(transparent)]
    Tilemm(#[from] tilemm::Error),

    /// A matrix file could not be read or is not a 2-D array of a type tilemm computes.
    #[error("cannot read {}: {reason}", path.display())]
    ReadMatrix {
        /// The file.
        path: PathBuf,
        /// What went wrong, in the words of the npy reader or the OS.
        reason: String,
    },

    /// The result could not be written.
    #[error("cannot write {}: {reason}", path.display())]
    WriteMatrix {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },

    /// A baseline (cubek-matmul, the vendor's BLAS) does not cover this problem or failed.
    #[error("{name}: {reason}")]
    Baseline {
        /// The baseline.
        name: String,
        /// What it does not cover, or its own message.
        reason: String,
    },

    /// A kernel could not be generated for a target.
    #[error("cannot generate {target} source: {reason}")]
    Emit {
        /// The target language.
        target: &'static str,
        /// The generator's message.
        reason: String,
    },

    /// The kernel clock (CUPTI) failed on a run: `bench` times on without it.
    #[error("the kernel clock: {0}")]
    Clock(String),

    /// A compiler the compile check needs is missing or failed.
    #[error("{tool}: {reason}")]
    Toolchain {
        /// The tool (NVRTC, clang).
        tool: String,
        /// What went wrong and what to install.
        reason: String,
    },
}

/// Result with the lab's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
