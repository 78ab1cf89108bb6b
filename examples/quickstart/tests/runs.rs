//! The quickstart binary as a user runs it: the default route, then the wgpu device named. Built
//! with the workspace's tests (a default member), so that CI does not build CubeCL and wgpu a
//! second time under the features a crate of its own alone would resolve; `cargo run --release
//! -p quickstart` is that crate on its own.

use std::process::Command;

fn run(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_quickstart"))
        .args(args)
        .output()
        .expect("the quickstart binary runs");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success(),
        "quickstart {args:?} failed ({}): {stdout}{stderr}",
        out.status
    );
    stdout.into_owned()
}

#[test]
fn the_default_route_gives_the_exact_products() {
    let said = run(&[]);
    assert!(said.contains("exact, on "), "{said}");
}

#[test]
fn the_wgpu_device_named_gives_the_exact_products() {
    let said = run(&["wgpu"]);
    assert!(said.trim_end().ends_with("through wgpu"), "{said}");
}
