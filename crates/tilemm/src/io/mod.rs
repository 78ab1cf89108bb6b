//! What tilemm reads and writes on its own: the files it keeps, opened as untrusted input, and
//! its seeded random operands.

pub mod files;
pub mod inputs;
