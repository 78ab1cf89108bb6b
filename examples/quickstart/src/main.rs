//! tilemm as a dependency: `tilemm::matmul` on ndarray views, f32 and f64, checked against
//! ndarray's own product. `cargo run --release -p quickstart [-- wgpu]`: the default route, or
//! the wgpu device named.

use ndarray::Array2;

fn main() -> Result<(), tilemm::Error> {
    let a = Array2::from_shape_fn((64, 48), |(i, j)| ((i * 7 + j) % 9) as f32 - 4.0);
    let b = Array2::from_shape_fn((48, 30), |(i, j)| ((i + 3 * j) % 5) as f32 - 2.0);
    let named = std::env::args().nth(1);
    let gemm = match named.as_deref() {
        Some(backend) => tilemm::Gemm::new().device(
            backend
                .parse()
                .map_err(|e: String| tilemm::Error::NoDevice(e))?,
            None,
        ),
        None => tilemm::Gemm::new(),
    };

    let c = gemm.product(a.view(), b.view())?;
    assert_eq!(c, a.dot(&b), "small integers: the product is exact");
    let (a64, b64) = (a.mapv(f64::from), b.mapv(f64::from));
    // Aᵀ stored as a 48×64 array and used through a transposed view.
    let at = a64.t().to_owned();
    let c64 = gemm.product(at.t(), b64.view())?;
    assert_eq!(c64, a64.dot(&b64));
    println!(
        "64×48 · 48×30 in f32 and f64 (A also through a transposed view): exact, on {}",
        gemm.route()?
    );
    Ok(())
}
