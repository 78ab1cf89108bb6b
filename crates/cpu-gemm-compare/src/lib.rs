//! Nothing to build: see `benches/cpu_gemm.rs`.
