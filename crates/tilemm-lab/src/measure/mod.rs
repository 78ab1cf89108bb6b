//! Measuring: the example's experiment and its report (`run`, `report`), the one runner behind
//! `tilemm bench` (`bench`) and the sweep of sizes × implementations it runs (`sweep`), and
//! what the ladder is measured against (`peers`, `vendor_blas`).

pub mod bench;
pub mod complex;
pub mod kernel_clock;
pub mod peers;
pub mod report;
pub mod run;
pub mod sweep;
pub mod vendor_blas;
