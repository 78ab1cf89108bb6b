//! Where A and B come from (seeded random data or `.npy` files) and where C goes.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use ndarray::{Array2, ArrayView2};
use ndarray_npy::{ViewNpyError, ViewNpyExt, WriteNpyError};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::error::{Error, Result};
use crate::problem::Problem;

/// A and B for `problem`, uniform in [-1, 1) from `seed`.
///
/// Signed data, unlike the example's [0, 1): products cancel, so a check that only passes on
/// positive data (a bare rtol) would be caught out.
pub fn random_operands(problem: &Problem, seed: u64) -> (Vec<f32>, Vec<f32>) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut fill = |len: usize| (0..len).map(|_| rng.random_range(-1.0f32..1.0)).collect();
    let a = fill(problem.a_len());
    let b = fill(problem.b_len());
    (a, b)
}

/// Reads a 2-D f32 `.npy` file: its shape (rows, columns) and its elements in row-major order
/// (Fortran-ordered files are reordered).
///
/// The file is read whole into a buffer sized by the file, never by its header, so a header
/// that claims more data than the file holds is reported, not allocated.
pub fn read_matrix(path: &Path) -> Result<((usize, usize), Vec<f32>)> {
    let error = |reason: String| Error::ReadMatrix {
        path: path.to_path_buf(),
        reason,
    };
    let mut file = File::open(path).map_err(|e| error(e.to_string()))?;
    let len = file.metadata().map_err(|e| error(e.to_string()))?.len();
    let len =
        usize::try_from(len).map_err(|_| error("larger than this machine can address".into()))?;
    // f32 words keep the data (which .npy pads to a 16-byte boundary) aligned for a view.
    let mut words = vec![0f32; len.div_ceil(4)];
    // SAFETY: the byte view covers `len` ≤ 4·words.len() bytes of the vector's own allocation,
    // and every byte pattern is a valid f32.
    let bytes = unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr().cast::<u8>(), len) };
    file.read_exact(bytes).map_err(|e| error(e.to_string()))?;
    let view = ArrayView2::<f32>::view_npy(bytes).map_err(|e| {
        error(match e {
            ViewNpyError::Io(io) => io.to_string(),
            ViewNpyError::WrongNdim(_, ndim) => {
                format!("expected a 2-D array (a matrix), found {ndim} dimension(s)")
            }
            ViewNpyError::WrongDescriptor(descr) => format!(
                "expected dtype float32 ('<f4'), found {descr} (convert with `a.astype(np.float32)`)"
            ),
            ViewNpyError::NonNativeEndian => {
                "big-endian float32: save it in native byte order (`a.astype('<f4')`)".into()
            }
            ViewNpyError::MissingBytes(missing) => format!(
                "truncated: its header describes {missing} more bytes of data than the file holds"
            ),
            other => format!("not a valid .npy file: {other}"),
        })
    })?;
    let shape = view.dim();
    let data = view.as_standard_layout().iter().copied().collect();
    Ok((shape, data))
}

/// Reads A and B from `.npy` files and the problem their shapes make.
pub fn read_operands(a_path: &Path, b_path: &Path) -> Result<(Problem, Vec<f32>, Vec<f32>)> {
    let (a_shape, a) = read_matrix(a_path)?;
    let (b_shape, b) = read_matrix(b_path)?;
    let problem = Problem::from_shapes(a_shape, b_shape)?;
    Ok((problem, a, b))
}

/// Writes a rows×cols row-major f32 matrix as a `.npy` file.
pub fn write_matrix(path: &Path, rows: usize, cols: usize, data: &[f32]) -> Result<()> {
    let error = |reason: String| Error::WriteMatrix {
        path: path.to_path_buf(),
        reason,
    };
    let array =
        Array2::from_shape_vec((rows, cols), data.to_vec()).map_err(|e| error(e.to_string()))?;
    ndarray_npy::write_npy(path, &array).map_err(|e| {
        error(match e {
            WriteNpyError::Io(io) => io.to_string(),
            other => other.to_string(),
        })
    })
}

/// Writes C (row-major, `problem`'s m×n) as an f32 `.npy` file.
pub fn write_result(path: &Path, problem: &Problem, c: &[f32]) -> Result<()> {
    write_matrix(path, problem.m, problem.n, c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_operands_are_seeded_signed_and_sized() {
        let p = Problem::new(7, 5, 3).unwrap();
        let (a, b) = random_operands(&p, 42);
        assert_eq!((a.len(), b.len()), (35, 15));
        assert_eq!(random_operands(&p, 42), (a.clone(), b));
        assert_ne!(random_operands(&p, 43).0, a);
        assert!(a.iter().all(|x| (-1.0..1.0).contains(x)));
        assert!(a.iter().any(|&x| x < 0.0));
    }

    #[test]
    fn npy_round_trip_and_fortran_order() {
        let dir = tempfile::tempdir().unwrap();
        let p = Problem::new(2, 3, 3).unwrap();
        let path = dir.path().join("c.npy");
        write_result(&path, &p, &[1., 2., 3., 4., 5., 6.]).unwrap();
        let (shape, data) = read_matrix(&path).unwrap();
        assert_eq!(shape, (2, 3));
        assert_eq!(data, vec![1., 2., 3., 4., 5., 6.]);

        let fortran = Array2::from_shape_vec((2, 3), vec![1f32, 2., 3., 4., 5., 6.])
            .unwrap()
            .reversed_axes()
            .as_standard_layout()
            .to_owned()
            .reversed_axes();
        assert!(!fortran.is_standard_layout());
        let path = dir.path().join("f.npy");
        ndarray_npy::write_npy(&path, &fortran).unwrap();
        assert_eq!(
            read_matrix(&path).unwrap(),
            ((2, 3), vec![1., 2., 3., 4., 5., 6.])
        );
    }

    #[test]
    fn a_header_that_claims_more_than_the_file_holds_is_refused_without_allocating_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lying.npy");
        let header = "{'descr': '<f4', 'fortran_order': False, 'shape': (100000, 100000), }";
        let padded = format!("{header:<117}\n");
        let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
        bytes.extend_from_slice(&(padded.len() as u16).to_le_bytes());
        bytes.extend_from_slice(padded.as_bytes());
        bytes.extend_from_slice(&[0u8; 64]);
        std::fs::write(&path, bytes).unwrap();
        let err = read_matrix(&path).unwrap_err().to_string();
        assert!(err.contains("truncated"), "{err}");
    }

    #[test]
    fn wrong_dtype_and_rank_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f64.npy");
        ndarray_npy::write_npy(&path, &Array2::<f64>::zeros((2, 2))).unwrap();
        let err = read_matrix(&path).unwrap_err().to_string();
        assert!(err.contains("expected dtype float32"), "{err}");

        let path = dir.path().join("vec.npy");
        ndarray_npy::write_npy(&path, &ndarray::Array1::<f32>::zeros(4)).unwrap();
        let err = read_matrix(&path).unwrap_err().to_string();
        assert!(err.contains("expected a 2-D array"), "{err}");

        let err = read_matrix(&dir.path().join("missing.npy"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("missing.npy") && err.contains("No such file"),
            "{err}"
        );
    }
}
