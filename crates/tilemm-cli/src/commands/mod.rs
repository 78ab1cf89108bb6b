//! One module per subcommand: each parses nothing, calls the library, and prints.

pub mod bench;
pub mod compile_check;
pub mod devices;
pub mod emit;
pub mod run;
pub mod tune;
