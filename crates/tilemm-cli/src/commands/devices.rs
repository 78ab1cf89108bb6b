//! `tilemm devices`: what tilemm can run on.

use std::process::ExitCode;

use tilemm::host::format_bytes;
use tilemm::runtime::backend::{default_device, install_hint, list_devices};
use tilemm::Backend;

use crate::CommandResult;

pub fn devices_command(json: bool) -> CommandResult {
    let backends: Vec<Backend> = Backend::GPU.into_iter().filter(|b| b.is_built()).collect();
    let found: Vec<_> = backends.iter().map(|&b| (b, list_devices(b))).collect();
    if json {
        let object = serde_json::json!({
            "backends": found.iter().map(|(b, devices)| serde_json::json!({
                "backend": b,
                "devices": devices,
            })).collect::<Vec<_>>(),
            "cpu": { "implementation": tilemm::host::cpu::CPU_GEMM, "threads": tilemm::host::cpu::threads() },
            "default": found
                .iter()
                .find_map(|(b, devices)| default_device(*b, devices).map(|i| serde_json::json!({
                    "backend": b, "index": i,
                }))),
        });
        say!(
            "{}",
            serde_json::to_string_pretty(&object).expect("devices serialize")
        );
        return Ok(ExitCode::SUCCESS);
    }
    // Without --backend/--device, `run` takes the first backend with a device, and its default.
    let chosen = found
        .iter()
        .find_map(|(b, devices)| default_device(*b, devices).map(|i| (*b, i)));
    for (backend, devices) in &found {
        if devices.is_empty() {
            say!("{backend}: no device found");
            continue;
        }
        for d in devices {
            let l = &d.limits;
            let mark = if chosen == Some((*backend, d.index)) {
                "  [default]"
            } else {
                ""
            };
            say!(
                "{backend} #{}: {} ({}, {}){mark}",
                d.index,
                d.name,
                d.kind.name(),
                d.api
            );
            if !d.driver.is_empty() {
                say!("    driver               {}", d.driver);
            }
            say!(
                "    shared per block     {}",
                format_bytes(l.max_shared_bytes as u64)
            );
            say!(
                "    threads per block    {} (x ≤ {}, y ≤ {}, z ≤ {})",
                l.max_units_per_cube,
                l.max_cube_dim[0],
                l.max_cube_dim[1],
                l.max_cube_dim[2]
            );
            say!("    blocks per dimension {}", l.max_cube_count[0]);
            say!(
                "    largest binding      {}",
                format_bytes(l.max_binding_bytes)
            );
            say!(
                "    largest buffer       {}",
                format_bytes(l.max_buffer_bytes)
            );
            say!(
                "    timestamp queries    {}",
                if d.timestamps { "yes" } else { "no" }
            );
        }
    }
    if found.iter().all(|(_, d)| d.is_empty()) {
        say!("no GPU device found: {}", install_hint());
    }
    say!(
        "cpu: {} on {} threads",
        tilemm::host::cpu::CPU_GEMM,
        tilemm::host::cpu::threads()
    );
    Ok(ExitCode::SUCCESS)
}
