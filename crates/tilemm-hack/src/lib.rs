//! No code. This crate's manifest enables, in every build of the workspace, the features of
//! shared dependencies that only some builds would enable (cargo-hakari's workspace-hack), so
//! that the tests, the drop-in BLAS and the Python package share one compiled CubeCL, wgpu and
//! tilemm. `scripts/one-stack` checks that they do.
