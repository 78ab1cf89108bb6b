//! The cost model that knows transfers: how fast a device's link moves bytes between the host
//! and the device (measured once per session), and whether a product from host memory is
//! worth moving there, as NVBLAS offloads a call only when the compute it saves outweighs the
//! bytes it moves.

use serde::Serialize;

use crate::problem::Problem;

/// A device's link as measured from this process: pageable host memory to the device and
/// back, through the same paths products take.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Link {
    /// Bytes measured with, each way.
    pub bytes: u64,
    /// Host to device, GB/s (10⁹ bytes per second), the best of a few copies.
    pub upload_gb_s: f64,
    /// Device to host, GB/s, the best of a few copies.
    pub download_gb_s: f64,
}

/// What the model expects of one product: where it runs faster, and the two estimates.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Offload {
    /// Whether the device, transfers included, is expected to be faster than the CPU.
    pub device: bool,
    /// The device's estimate, seconds: its latency, A and B (and C when read) up, C down, and
    /// the compute at the device's expected rate.
    pub device_s: f64,
    /// The CPU's estimate, seconds, at its measured rate.
    pub cpu_s: f64,
}

/// What starting a product on a device costs besides its bytes and flops, seconds: launches and
/// waits (tens of microseconds on CUDA).
pub const DEVICE_LATENCY_S: f64 = 20e-6;

/// The share of a device's datasheet peak a product is expected to reach (tilemm's kernels
/// reached about half of cuBLAS on an H200, and cuBLAS about 80% of the peak).
pub const DEVICE_EFFICIENCY: f64 = 0.4;

/// Whether `problem`, from host memory, is expected to run faster on a device with `link`
/// and a peak of `device_gflops` (`None`: not known, and the compute counted as free, so that
/// only the transfers decide) than on the CPU at `cpu_gflops`.
pub fn offload(
    problem: &Problem,
    link: &Link,
    device_gflops: Option<f64>,
    cpu_gflops: f64,
) -> Offload {
    let flops = problem.flops();
    let moved = problem.upload_bytes() as f64 / (link.upload_gb_s * 1e9)
        + problem.download_bytes() as f64 / (link.download_gb_s * 1e9);
    let compute = device_gflops.map_or(0.0, |peak| flops / (peak * DEVICE_EFFICIENCY * 1e9));
    let device_s = DEVICE_LATENCY_S + moved + compute;
    let cpu_s = flops / (cpu_gflops * 1e9);
    Offload {
        device: device_s < cpu_s,
        device_s,
        cpu_s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_product_goes_where_its_bytes_and_flops_finish_first() {
        // A PCIe-like link (25 GB/s each way), a device of 50 TFLOPS, a CPU of 1 TFLOPS.
        let link = Link {
            bytes: 1 << 24,
            upload_gb_s: 25.0,
            download_gb_s: 25.0,
        };
        let square = |n| Problem::new(n, n, n).unwrap();
        // 64³: 0.5 µs of CPU work against 2 µs of transfers.
        let small = offload(&square(64), &link, Some(50_000.0), 1_000.0);
        assert!(!small.device, "{small:?}");
        // 4096³: 137 ms of CPU work against 8 ms of transfers and 7 ms of compute.
        let large = offload(&square(4096), &link, Some(50_000.0), 1_000.0);
        assert!(large.device, "{large:?}");
        assert!(
            large.device_s > 0.010 && large.device_s < 0.020,
            "{large:?}"
        );
        // A slow link (lavapipe's 1 GB/s) keeps a mid-sized product home.
        let slow = Link {
            upload_gb_s: 1.0,
            download_gb_s: 1.0,
            ..link
        };
        assert!(!offload(&square(256), &slow, Some(50_000.0), 1_000.0).device);
        // β ≠ 0 moves C up too.
        let with_c = crate::problem::Shape {
            beta: 1.0,
            ..crate::problem::Shape::new(512, 512, 512)
        }
        .problem()
        .unwrap();
        let without = offload(&square(512), &slow, None, 1_000.0);
        let with = offload(&with_c, &slow, None, 1_000.0);
        assert!(with.device_s > without.device_s);
    }
}
