//! A device's peak arithmetic rate, where it is known, so that a measurement can say how far it
//! is from what the silicon can do, not only from another program.
//!
//! The figures are the vendors' datasheet peaks at boost clock, dense (no structured sparsity),
//! for the fastest units that compute the precision: tensor cores or matrix cores for f16,
//! bf16 and tf32 inputs (accumulated in f32), the larger of the vector and matrix rates for f32
//! and f64 (tf32 is not f32: an f32 figure never counts tf32 units).
//! They are ceilings: sustained clocks under a GEMM load sit below boost, so even vendor BLAS
//! stays under 100%. A device not in the table (lavapipe and other CPU adapters among them) has
//! no known peak; `tilemm bench --peak` supplies one.

use serde::Serialize;

use crate::problem::{DType, Precision};

/// A peak rate and where it comes from.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Peak {
    /// Billions of floating-point operations per second (a multiply-add counts two).
    pub gflops: f64,
    /// What the figure is: the datasheet entry's device and units, or "given with --peak".
    pub source: String,
}

impl Peak {
    /// `gflops` as a percentage of this peak.
    pub fn percent(&self, gflops: f64) -> f64 {
        100.0 * gflops / self.gflops
    }
}

/// One datasheet entry: TFLOPS for f32, f64, 16-bit inputs with f32 accumulation, and tf32
/// (where the device has tf32 matrix units).
struct Datasheet {
    /// Every word must occur in the device's name (case-insensitive).
    words: &'static [&'static str],
    /// The device as its datasheet names it.
    name: &'static str,
    f32: f64,
    f64: f64,
    half: f64,
    tf32: Option<f64>,
}

/// The first entry whose words match wins: more specific names come first.
const DATASHEETS: &[Datasheet] = &[
    Datasheet {
        words: &["h100", "pcie"],
        name: "NVIDIA H100 PCIe",
        f32: 51.2,
        f64: 51.2,
        half: 756.0,
        tf32: Some(378.0),
    },
    Datasheet {
        words: &["h100", "nvl"],
        name: "NVIDIA H100 NVL",
        f32: 60.0,
        f64: 60.0,
        half: 835.0,
        tf32: Some(417.5),
    },
    Datasheet {
        words: &["h200", "nvl"],
        name: "NVIDIA H200 NVL",
        f32: 60.0,
        f64: 60.0,
        half: 835.0,
        tf32: Some(417.5),
    },
    // "NVIDIA H100 80GB HBM3" is the SXM5 board; the H200 SXM has the same compute.
    Datasheet {
        words: &["h100"],
        name: "NVIDIA H100 SXM5",
        f32: 66.9,
        f64: 66.9,
        half: 989.4,
        tf32: Some(494.7),
    },
    Datasheet {
        words: &["h200"],
        name: "NVIDIA H200 SXM",
        f32: 66.9,
        f64: 66.9,
        half: 989.4,
        tf32: Some(494.7),
    },
    Datasheet {
        words: &["a100"],
        name: "NVIDIA A100",
        f32: 19.5,
        f64: 19.5,
        half: 312.0,
        tf32: Some(156.0),
    },
    Datasheet {
        words: &["mi300x"],
        name: "AMD Instinct MI300X",
        f32: 163.4,
        f64: 163.4,
        half: 1307.4,
        tf32: Some(653.7),
    },
    Datasheet {
        words: &["mi250x"],
        name: "AMD Instinct MI250X",
        f32: 95.7,
        f64: 95.7,
        half: 383.0,
        tf32: None,
    },
];

/// The datasheet peak of the device named `device` for `precision`, where tilemm knows it.
pub fn datasheet(device: &str, precision: Precision) -> Option<Peak> {
    let name = device.to_lowercase();
    let entry = DATASHEETS
        .iter()
        .find(|d| d.words.iter().all(|w| name.contains(w)))?;
    let (tflops, units) = match (precision.input, precision.accumulate) {
        (DType::F32, DType::F32) => (entry.f32, "f32"),
        (DType::F64, DType::F64) => (entry.f64, "f64"),
        (DType::F16 | DType::BF16, DType::F32) => (entry.half, "16-bit inputs, f32 accumulation"),
        (DType::TF32, DType::F32) => (entry.tf32?, "tf32 inputs, f32 accumulation"),
        _ => return None,
    };
    Some(Peak {
        gflops: tflops * 1e3,
        source: format!("{} datasheet, {units}, dense", entry.name),
    })
}

/// A peak the user gives, in GFLOPS: finite and positive.
pub fn given(gflops: f64) -> Option<Peak> {
    (gflops.is_finite() && gflops > 0.0).then(|| Peak {
        gflops,
        source: "given with --peak".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_as_drivers_report_them_find_their_entries() {
        let f32 = Precision::F32;
        let sxm = datasheet("NVIDIA H100 80GB HBM3", f32).unwrap();
        assert_eq!(sxm.gflops, 66_900.0);
        assert!(sxm.source.contains("SXM5"), "{}", sxm.source);
        assert_eq!(datasheet("NVIDIA H100 PCIe", f32).unwrap().gflops, 51_200.0);
        assert_eq!(datasheet("NVIDIA H200 NVL", f32).unwrap().gflops, 60_000.0);
        assert_eq!(
            datasheet("NVIDIA A100-SXM4-80GB", f32).unwrap().gflops,
            19_500.0
        );
        assert_eq!(
            datasheet("AMD Instinct MI300X", f32).unwrap().gflops,
            163_400.0
        );
    }

    #[test]
    fn the_peak_follows_the_precision() {
        let h100 = "NVIDIA H100 80GB HBM3";
        let half = datasheet(h100, Precision::of(DType::F16)).unwrap();
        assert_eq!(half.gflops, 989_400.0);
        assert_eq!(datasheet(h100, Precision::of(DType::BF16)), Some(half));
        assert_eq!(
            datasheet(h100, Precision::of(DType::F64)).unwrap().gflops,
            66_900.0
        );
        // tf32 is its own column: half the 16-bit rate on NVIDIA, none where there is no unit.
        let tf32 = Precision::of(DType::TF32);
        assert_eq!(datasheet(h100, tf32).unwrap().gflops, 494_700.0);
        assert_eq!(datasheet("AMD Instinct MI250X", tf32), None);
    }

    #[test]
    fn unknown_devices_have_no_peak() {
        assert_eq!(
            datasheet("llvmpipe (LLVM 15.0.6, 256 bits)", Precision::F32),
            None
        );
        assert_eq!(datasheet("NVIDIA GeForce RTX 4090", Precision::F32), None);
    }

    #[test]
    fn a_given_peak_must_be_positive_and_finite() {
        assert_eq!(given(1000.0).unwrap().percent(250.0), 25.0);
        assert!(given(0.0).is_none() && given(-1.0).is_none() && given(f64::NAN).is_none());
    }
}
