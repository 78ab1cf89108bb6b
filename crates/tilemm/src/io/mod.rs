//! What tilemm reads and writes on its own: the files it keeps (opened as untrusted input, in
//! one store format), and its seeded random operands.

pub mod files;
pub mod inputs;
pub mod store;
