//! Empty: cargo takes a crate's build-dependencies (and so their features) into the build only
//! where the crate has a build script.
fn main() {}
