//! What comes in and goes out of the process: operands (seeded random data or `.npy` files)
//! and output files, and the files tilemm keeps, opened as untrusted input.

pub mod files;
pub mod inputs;
