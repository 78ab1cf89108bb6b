//! Where A and B come from (seeded random data or `.npy` files) and where C goes.
//!
//! A `.npy` file is read in two steps: [`NpyMatrix::open`] reads and checks its header alone
//! (shape, dtype, order, and, for a regular file, that its length matches), so that the problem
//! it makes can be checked against the device and the host's memory before any data is read;
//! [`NpyMatrix::read`] then reads the data once, straight into its final buffer, in the file's
//! order: a Fortran-order file is a column-major view, not a reordered copy.
//! Pipes, `/dev/stdin` and process substitution (`--a <(…)`) are read as streams.

use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::{Error, Result};
use tilemm::host;
pub use tilemm::io::inputs::{
    lossy_optional_path, lossy_path, random_initial_c, random_operands, Operands,
};
use tilemm::problem::{DType, Layout, MatrixDesc, Precision, Problem};
use tilemm::types::element::HostData;

/// The .npy format's magic string.
const MAGIC: &[u8] = b"\x93NUMPY";

/// numpy refuses headers over 10000 bytes by default (`max_header_size`); so does tilemm.
const MAX_HEADER_BYTES: usize = 10_000;

/// A float32 matrix's header nests two deep (the dict, the shape tuple). The Python-literal
/// parser backtracks exponentially with depth (0.2 s at 16, 4 s at 20, no end at 1000), so
/// deeper headers are refused before it sees them.
const MAX_HEADER_NESTING: usize = 4;

/// A 2-D float16, float32 or float64 `.npy` file whose header has been read and checked; its
/// data comes next.
pub struct NpyMatrix {
    path: PathBuf,
    rows: usize,
    cols: usize,
    dtype: DType,
    fortran_order: bool,
    swap_bytes: bool,
    /// Whether the source is a regular file (then its length was checked against the header).
    regular: bool,
    reader: io::BufReader<File>,
}

impl NpyMatrix {
    /// Opens `path` and reads its header. Refuses, in one line naming the file, anything that
    /// is not a 2-D float16, float32 or float64 array (either byte order, C or Fortran order),
    /// and a regular file whose length does not match what the header describes.
    pub fn open(path: &Path) -> Result<Self> {
        let error = |reason: String| Error::ReadMatrix {
            path: path.to_path_buf(),
            reason,
        };
        let file = File::open(path).map_err(|e| error(e.to_string()))?;
        let meta = file.metadata().map_err(|e| error(e.to_string()))?;
        if meta.is_dir() {
            return Err(error("it is a directory".into()));
        }
        let regular = meta.is_file();
        if regular && meta.len() == 0 {
            return Err(error("the file is empty (0 bytes)".into()));
        }
        let mut reader = io::BufReader::new(file);
        let header = read_header(&mut reader).map_err(error)?;
        let (rows, cols, dtype, fortran_order, swap_bytes) = header.matrix().map_err(error)?;
        let data_bytes = (rows as u64)
            .checked_mul(cols as u64)
            .and_then(|n| n.checked_mul(dtype.size_bytes() as u64))
            .filter(|&b| usize::try_from(b).is_ok() && b <= isize::MAX as u64)
            .ok_or_else(|| error(format!("its shape ({rows}, {cols}) is too large")))?;
        if regular {
            let expected = header.length + data_bytes;
            if meta.len() < expected {
                return Err(error(format!(
                    "truncated: its header describes {data_bytes} bytes of data but the file \
                     holds {}",
                    meta.len() - header.length.min(meta.len())
                )));
            }
            if meta.len() > expected {
                return Err(error(format!(
                    "{} bytes follow the data its header describes (a .npy file holds one array)",
                    meta.len() - expected
                )));
            }
        }
        Ok(NpyMatrix {
            path: path.to_path_buf(),
            rows,
            cols,
            dtype,
            fortran_order,
            swap_bytes,
            regular,
            reader,
        })
    }

    /// (rows, columns).
    pub fn shape(&self) -> (usize, usize) {
        (self.rows, self.cols)
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Its element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// How its elements lie in the data: row-major (C order) or column-major (Fortran order,
    /// a view of the file's own order, not a reordered copy).
    pub fn desc(&self) -> MatrixDesc {
        if self.fortran_order {
            MatrixDesc::col_major(self.rows, self.cols)
        } else {
            MatrixDesc::row_major(self.rows, self.cols)
        }
    }

    /// Reads the data in the file's own order (see [`NpyMatrix::desc`]), the byte order made
    /// native, into a buffer allocated once with the exact size and filled as it arrives.
    pub fn read(mut self) -> Result<HostData> {
        let path = self.path.clone();
        let error = |reason: String| Error::ReadMatrix {
            path: path.clone(),
            reason,
        };
        let len = self.rows * self.cols;
        let size = self.dtype.size_bytes();
        let what = format!("the data of {}", self.path.display());
        let mut data = host::zeros_of(self.dtype, len, &what)?;
        let bytes: &mut [u8] =
            tilemm::with_data!(&mut data, v => bytemuck::cast_slice_mut(v.as_mut_slice()));
        let got = fill(&mut self.reader, bytes).map_err(|e| error(e.to_string()))?;
        if got < len * size {
            return Err(error(format!(
                "truncated: its header describes {} bytes of data but only {got} arrived",
                len * size
            )));
        }
        if self.swap_bytes {
            bytes.chunks_exact_mut(size).for_each(<[u8]>::reverse);
        }
        if !self.regular {
            let mut extra = [0u8; 1];
            if self
                .reader
                .read(&mut extra)
                .map_err(|e| error(e.to_string()))?
                > 0
            {
                return Err(error(
                    "more bytes follow the data its header describes (a .npy stream holds one \
                     array)"
                        .into(),
                ));
            }
        }
        Ok(data)
    }
}

/// Reads until `buf` is full or the stream ends; returns the bytes read.
fn fill(reader: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match reader.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// What a .npy header says.
struct Header {
    descr: py_literal::Value,
    fortran_order: bool,
    shape: Vec<usize>,
    /// Bytes from the start of the file to the data.
    length: u64,
}

/// Reads the magic string, version, header length and header dict; each failure is one line.
fn read_header(reader: &mut impl Read) -> std::result::Result<Header, String> {
    let mut start = [0u8; 10];
    let got = fill(reader, &mut start).map_err(|e| e.to_string())?;
    if got == 0 {
        return Err("it is empty: no .npy header".into());
    }
    if got < MAGIC.len() || &start[..MAGIC.len()] != MAGIC {
        return Err("not a .npy file (it does not start with numpy's magic string)".into());
    }
    let ends_in_header = || "truncated: it ends inside its .npy header".to_string();
    if got < 10 {
        return Err(ends_in_header());
    }
    let (major, minor) = (start[6], start[7]);
    let (header_len, prefix) = match major {
        1 => (usize::from(u16::from_le_bytes([start[8], start[9]])), 10),
        2 | 3 => {
            let mut rest = [0u8; 2];
            if fill(reader, &mut rest).map_err(|e| e.to_string())? < 2 {
                return Err(ends_in_header());
            }
            let len = u32::from_le_bytes([start[8], start[9], rest[0], rest[1]]);
            (len as usize, 12)
        }
        _ => return Err(format!("unsupported .npy format version {major}.{minor}")),
    };
    if header_len > MAX_HEADER_BYTES {
        return Err(format!(
            "corrupt .npy header: it claims {header_len} bytes (numpy's limit is \
             {MAX_HEADER_BYTES})"
        ));
    }
    let mut text = vec![0u8; header_len];
    if fill(reader, &mut text).map_err(|e| e.to_string())? < header_len {
        return Err(ends_in_header());
    }
    let text = String::from_utf8_lossy(&text);
    let corrupt = || {
        let shown: String = text.trim_end().chars().take(80).collect();
        format!("corrupt .npy header: {shown:?}")
    };
    if nesting(&text) > MAX_HEADER_NESTING {
        return Err(format!(
            "corrupt .npy header: nested more than {MAX_HEADER_NESTING} deep"
        ));
    }
    let dict: py_literal::Value = text.trim_end().parse().map_err(|_| corrupt())?;
    let py_literal::Value::Dict(entries) = dict else {
        return Err(corrupt());
    };
    let get = |key: &str| {
        entries
            .iter()
            .find(|(k, _)| k.as_string().is_some_and(|k| k == key))
            .map(|(_, v)| v)
            .ok_or_else(|| format!("corrupt .npy header: no '{key}'"))
    };
    let descr = get("descr")?.clone();
    let fortran_order = get("fortran_order")?
        .as_boolean()
        .ok_or_else(|| "corrupt .npy header: 'fortran_order' is not True or False".to_string())?;
    let shape = get("shape")?
        .as_tuple()
        .and_then(|dims| {
            dims.iter()
                .map(|d| d.as_integer()?.to_string().parse::<usize>().ok())
                .collect::<Option<Vec<_>>>()
        })
        .ok_or_else(|| "corrupt .npy header: 'shape' is not a tuple of sizes".to_string())?;
    Ok(Header {
        descr,
        fortran_order,
        shape,
        length: (prefix + header_len) as u64,
    })
}

/// The deepest nesting of brackets in a Python literal, outside its strings.
fn nesting(text: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let mut quote = None;
    let mut escaped = false;
    for c in text.chars() {
        match quote {
            Some(q) => {
                if escaped {
                    escaped = false;
                } else if c == '\\' {
                    escaped = true;
                } else if c == q {
                    quote = None;
                }
            }
            None => match c {
                '\'' | '"' => quote = Some(c),
                '(' | '[' | '{' => {
                    depth += 1;
                    deepest = deepest.max(depth);
                }
                ')' | ']' | '}' => depth = depth.saturating_sub(1),
                _ => {}
            },
        }
    }
    deepest
}

impl Header {
    /// (rows, columns, element type, Fortran order, whether to swap bytes) of a 2-D float16,
    /// float32 or float64 array.
    fn matrix(&self) -> std::result::Result<(usize, usize, DType, bool, bool), String> {
        let descr = self.descr.as_string().map(String::as_str);
        let little = cfg!(target_endian = "little");
        // '=' is the writer's native order, which numpy writes out as '<' or '>'; a file that
        // says '=' (or nothing) is read in this machine's order, as numpy reads it.
        let parsed = descr.and_then(|d| {
            let (swap, kind) = match d.as_bytes().first()? {
                b'<' => (!little, &d[1..]),
                b'>' => (little, &d[1..]),
                b'=' | b'|' => (false, &d[1..]),
                _ => (false, d),
            };
            let dtype = match kind {
                "f2" => DType::F16,
                "f4" => DType::F32,
                "f8" => DType::F64,
                _ => return None,
            };
            Some((dtype, swap))
        });
        let Some((dtype, swap)) = parsed else {
            // Debug formatting keeps whatever the file says on one line.
            let found = match descr {
                Some(d) => format!("'{}'", d.escape_debug()),
                None => format!("{:?}", self.descr.to_string()),
            };
            return Err(format!(
                "expected dtype float16, float32 or float64 ('<f2', '<f4', '<f8'), found \
                 {found} (convert with `a.astype(np.float32)`)"
            ));
        };
        match self.shape[..] {
            [rows, cols] => Ok((rows, cols, dtype, self.fortran_order, swap)),
            _ => Err(format!(
                "expected a 2-D array (a matrix), found {} dimension(s)",
                self.shape.len()
            )),
        }
    }
}

/// `.npy` files of a product, headers read: A, B and, optionally, C's initial value.
pub struct OperandFiles {
    /// A's file.
    pub a: NpyMatrix,
    /// B's file.
    pub b: NpyMatrix,
    /// C₀'s file, read when β ≠ 0.
    pub c: Option<NpyMatrix>,
    /// What the user should know: a C₀ given with β = 0, which is not read.
    pub notes: Vec<String>,
}

/// How operand files are used, as BLAS and numpy users expect: op() applied to A and B as
/// they are stored, and the precision asked for, which must agree with the files' type.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FileOps {
    /// A's file holds Aᵀ (K×M): the product uses its transpose, a view of the same elements.
    pub trans_a: bool,
    /// B's file holds Bᵀ (N×K).
    pub trans_b: bool,
    /// The precision's input type, when one is asked for: it must be stored as the files are
    /// (tf32 is f32 data); `None` takes the files' type.
    pub dtype: Option<DType>,
}

impl OperandFiles {
    /// Opens the files (headers only) and makes the problem C = α·A·B + β·C₀ they describe:
    /// the files' element type (A and B alike; C₀ the same), each file's order as its view
    /// (a Fortran-order file is a column-major view), C laid out as C₀'s file when there is
    /// one, else row-major.
    pub fn open(
        a: &Path,
        b: &Path,
        c: Option<&Path>,
        (alpha, beta): (f64, f64),
        ops: FileOps,
    ) -> Result<(Problem, OperandFiles)> {
        let mut files = OperandFiles {
            a: NpyMatrix::open(a)?,
            b: NpyMatrix::open(b)?,
            c: c.map(NpyMatrix::open).transpose()?,
            notes: Vec::new(),
        };
        // op(X): the file's matrix, or its transpose as a view of the same elements.
        let op = |file: &NpyMatrix, trans: bool| {
            let (rows, cols) = file.shape();
            if trans {
                ((cols, rows), file.desc().t())
            } else {
                ((rows, cols), file.desc())
            }
        };
        let (((m, k), a_desc), ((k_b, n), b_desc)) =
            (op(&files.a, ops.trans_a), op(&files.b, ops.trans_b));
        if k != k_b {
            return Err(tilemm::Error::ShapeMismatch {
                a_rows: m,
                a_cols: k,
                b_rows: k_b,
                b_cols: n,
            }
            .into());
        }
        let stored = files.a.dtype();
        let dtype = match ops.dtype {
            Some(asked) if asked.storage() != stored => {
                return Err(tilemm::Error::Precision(format!(
                    "{} holds {stored} but {asked} was asked for: give files of that type, or \
                     leave the type to the files",
                    files.a.path().display()
                ))
                .into())
            }
            Some(asked) => asked,
            None => stored,
        };
        for other in std::iter::once(&files.b).chain(&files.c) {
            if other.dtype() != stored {
                return Err(tilemm::Error::Precision(format!(
                    "{} holds {} but {} holds {stored}: give every file the same dtype",
                    other.path().display(),
                    other.dtype(),
                    files.a.path().display()
                ))
                .into());
            }
        }
        let c_desc = match &files.c {
            Some(c) if c.shape() != (m, n) => {
                return Err(tilemm::Error::InvalidView(format!(
                    "{} is {}×{} but C = op(A)·op(B) is {m}×{n}",
                    c.path().display(),
                    c.rows,
                    c.cols
                ))
                .into())
            }
            Some(c) => c.desc(),
            None => MatrixDesc::row_major(m, n),
        };
        let problem = Problem::general(
            (m, k, n, 1),
            a_desc,
            b_desc,
            c_desc,
            (alpha, beta),
            Precision::of(dtype),
        )?;
        if !problem.reads_c() {
            if let Some(c) = files.c.take() {
                files.notes.push(format!(
                    "{} is not read: β = 0 makes C = α·op(A)·op(B), as in BLAS (NaN or Inf \
                     in C₀ does not reach C)",
                    c.path().display()
                ));
            }
        }
        Ok((problem, files))
    }

    /// Reads the data: A, B and C₀ (when β ≠ 0 and given).
    pub fn read(self) -> Result<(HostData, HostData, Option<HostData>)> {
        let c = self.c.map(NpyMatrix::read).transpose()?;
        Ok((self.a.read()?, self.b.read()?, c))
    }
}

/// Where C goes, prepared before the run so that an unusable destination is refused first.
///
/// A regular file is written to a temporary file beside it and renamed over it only once C is
/// completely written and flushed to disk: a failed write (a full disk) leaves an existing file
/// as it was. A symbolic link keeps pointing where it did (the file it names is replaced). A
/// pipe or device (`/dev/stdout`) is written directly.
pub struct Output {
    path: PathBuf,
    target: Target,
}

enum Target {
    /// A temporary file, renamed over `dest` when complete.
    Replace {
        temp: tempfile::NamedTempFile,
        dest: PathBuf,
    },
    /// A pipe or device, written in place.
    Stream(File),
}

impl Output {
    /// Checks `path` and opens what C will be written through.
    pub fn create(path: &Path) -> Result<Self> {
        let error = |reason: String| Error::WriteMatrix {
            path: path.to_path_buf(),
            reason,
        };
        let io_error = |e: io::Error| error(e.to_string());
        let stream = |path: &Path| -> Result<Target> {
            let file = std::fs::OpenOptions::new()
                .write(true)
                .open(path)
                .map_err(io_error)?;
            Ok(Target::Stream(file))
        };
        // `/dev/stdout` and `/dev/fd/N` name an open file descriptor: even when it is
        // redirected to a regular file, the file must be written through it, not replaced
        // behind the descriptor's back.
        if names_a_descriptor(path) {
            let target = stream(path)?;
            return Ok(Output {
                path: path.to_path_buf(),
                target,
            });
        }
        // Where the path is a link, C goes where it points (made if missing); the link stays.
        let dest = resolve_links(path).map_err(io_error)?;
        let target = match std::fs::metadata(&dest) {
            Ok(meta) if meta.is_dir() => return Err(error("it is a directory".into())),
            Ok(meta) if !meta.is_file() => stream(&dest)?,
            Ok(meta) => {
                if !writable(&dest) {
                    return Err(error(
                        "the file is read-only (tilemm replaces it only if it may write it)".into(),
                    ));
                }
                let dir = dest.parent().unwrap_or(Path::new("/"));
                let temp = temp_in(dir).map_err(io_error)?;
                temp.as_file()
                    .set_permissions(meta.permissions())
                    .map_err(io_error)?;
                Target::Replace { temp, dest }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let dir = match dest.parent() {
                    Some(d) if !d.as_os_str().is_empty() => d,
                    _ => Path::new("."),
                };
                if !dir.is_dir() {
                    return Err(error("its directory does not exist".into()));
                }
                let temp = temp_in(dir).map_err(io_error)?;
                set_default_mode(temp.as_file()).map_err(io_error)?;
                Target::Replace { temp, dest }
            }
            Err(e) => return Err(io_error(e)),
        };
        Ok(Output {
            path: path.to_path_buf(),
            target,
        })
    }

    /// Writes C (`batch` matrices laid out as `desc` in `c`) as a `.npy` file in its own
    /// dtype (bf16, which numpy lacks, as float32: exactly) and puts it in place: a row-major
    /// C in C order (3-D for a batch), a column-major one in Fortran order, no reordering.
    pub fn write(self, c: &HostData, desc: &MatrixDesc, batch: usize) -> Result<()> {
        let (rows, cols) = (desc.rows, desc.cols);
        let dense = desc.offset == 0 && (batch == 1 || desc.batch_stride == rows * cols);
        let fortran = match desc.layout() {
            _ if !dense => None,
            Layout::RowMajor if desc.row_stride == cols || rows == 1 => Some(false),
            Layout::ColMajor if batch == 1 && (desc.col_stride == rows || cols == 1) => Some(true),
            _ => None,
        };
        let Some(fortran) = fortran else {
            return Err(Error::WriteMatrix {
                path: self.path,
                reason: "C is not a dense row- or column-major matrix".into(),
            });
        };
        let shape: Vec<usize> = if batch > 1 {
            vec![batch, rows, cols]
        } else {
            vec![rows, cols]
        };
        let len = batch * rows * cols;
        match c {
            HostData::BF16(v) => {
                let wide: Vec<f32> = v[..len].iter().map(|x| x.to_f32()).collect();
                self.write_raw(DType::F32, fortran, &shape, bytemuck::cast_slice(&wide))
            }
            _ => {
                let size = c.dtype().size_bytes();
                self.write_raw(c.dtype(), fortran, &shape, &c.as_bytes()[..len * size])
            }
        }
    }

    fn write_raw(self, dtype: DType, fortran: bool, shape: &[usize], data: &[u8]) -> Result<()> {
        let path = self.path;
        let error = |reason: String| Error::WriteMatrix {
            path: path.clone(),
            reason,
        };
        let io_error = |e: io::Error| error(e.to_string());
        let header = npy_header(dtype, fortran, shape);
        let write = |file: &File| -> Result<()> {
            let mut writer = BufWriter::with_capacity(1 << 20, file);
            writer.write_all(&header).map_err(io_error)?;
            writer.write_all(data).map_err(io_error)?;
            writer.flush().map_err(io_error)
        };
        match self.target {
            Target::Replace { temp, dest } => {
                write(temp.as_file())?;
                // Space is often claimed only when data reaches the disk: a full disk must
                // fail here, before the rename, not after.
                temp.as_file().sync_all().map_err(io_error)?;
                temp.persist(&dest).map_err(|e| io_error(e.error))?;
                set_partial(None);
                Ok(())
            }
            Target::Stream(file) => write(&file),
        }
    }
}

/// A version-1 `.npy` header for data of `dtype` in this machine's byte order, padded (as
/// numpy pads it) so that the data starts at a multiple of 64 bytes.
fn npy_header(dtype: DType, fortran: bool, shape: &[usize]) -> Vec<u8> {
    let order = if cfg!(target_endian = "little") {
        '<'
    } else {
        '>'
    };
    let kind = match dtype {
        DType::F16 | DType::BF16 => "f2",
        DType::F32 | DType::TF32 => "f4",
        DType::F64 => "f8",
    };
    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
    let shape = match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let fortran = if fortran { "True" } else { "False" };
    let dict =
        format!("{{'descr': '{order}{kind}', 'fortran_order': {fortran}, 'shape': {shape}, }}");
    let unpadded = MAGIC.len() + 4 + dict.len() + 1;
    let text = format!(
        "{dict}{}\n",
        " ".repeat(unpadded.next_multiple_of(64) - unpadded)
    );
    let mut bytes = MAGIC.to_vec();
    bytes.extend_from_slice(&[1, 0]);
    bytes.extend_from_slice(&(text.len() as u16).to_le_bytes());
    bytes.extend_from_slice(text.as_bytes());
    bytes
}

/// Whether `path` is one of the names of an open file descriptor.
fn names_a_descriptor(path: &Path) -> bool {
    ["/dev/stdout", "/dev/stderr", "/dev/fd/", "/proc/self/fd/"]
        .iter()
        .any(|prefix| path.to_string_lossy().starts_with(prefix))
}

/// `path` with its symbolic links followed, the last one even if what it names does not exist
/// yet (a dangling link is written through, not replaced).
fn resolve_links(path: &Path) -> io::Result<PathBuf> {
    let mut path = path.to_path_buf();
    for _ in 0..40 {
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let target = std::fs::read_link(&path)?;
                path = match path.parent() {
                    Some(dir) if target.is_relative() => dir.join(target),
                    _ => target,
                };
            }
            _ => return Ok(path),
        }
    }
    Err(io::Error::other("too many levels of symbolic links"))
}

/// Whether this process may write `path` (as `access(2)` says, so root's rights count).
#[cfg(unix)]
fn writable(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c_path) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: a NUL-terminated path; access only reads it.
    unsafe { libc::access(c_path.as_ptr(), libc::W_OK) == 0 }
}

#[cfg(not(unix))]
fn writable(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| !m.permissions().readonly())
}

/// The partial `--out` file being written, if any, for [`remove_partial_output`]: a C string
/// leaked for the process's life (a signal handler reads it).
static PARTIAL: std::sync::atomic::AtomicPtr<libc::c_char> =
    std::sync::atomic::AtomicPtr::new(std::ptr::null_mut());

/// Records `path` as the partial output (or none), for a signal handler to remove.
fn set_partial(path: Option<&Path>) {
    use std::os::unix::ffi::OsStrExt;
    let raw = path
        .and_then(|p| std::ffi::CString::new(p.as_os_str().as_bytes()).ok())
        .map_or(std::ptr::null_mut(), |c| c.into_raw());
    // The previous name is leaked, not freed: a handler may be reading it.
    PARTIAL.store(raw, std::sync::atomic::Ordering::SeqCst);
}

/// Removes the partial file an [`Output`] is writing, if any: for a signal handler that then
/// ends the process (^C in the CLI), so that no partial `--out` is left. Async-signal-safe: one
/// atomic load and `unlink`.
pub fn remove_partial_output() {
    let path = PARTIAL.swap(std::ptr::null_mut(), std::sync::atomic::Ordering::SeqCst);
    if !path.is_null() {
        // SAFETY: `path` is a NUL-terminated string leaked by `set_partial`, never freed.
        unsafe { libc::unlink(path) };
    }
}

fn temp_in(dir: &Path) -> io::Result<tempfile::NamedTempFile> {
    let temp = tempfile::Builder::new()
        .prefix(".tilemm-")
        .suffix(".npy.partial")
        .tempfile_in(dir)?;
    set_partial(Some(temp.path()));
    Ok(temp)
}

/// Gives a new file the permissions a plain create would (read and write for all, less the
/// umask), which a temporary file does not have.
#[cfg(unix)]
fn set_default_mode(file: &File) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    // SAFETY: umask only swaps the process's mask; it is put back at once.
    let mask = unsafe {
        let mask = libc::umask(0o022);
        libc::umask(mask);
        mask
    };
    // mode_t is u32 on Linux, u16 on macOS.
    #[allow(clippy::useless_conversion)]
    let mask = u32::from(mask);
    file.set_permissions(std::fs::Permissions::from_mode(0o666 & !mask))
}

#[cfg(not(unix))]
fn set_default_mode(_: &File) -> io::Result<()> {
    Ok(())
}

/// Reads a 2-D float32 `.npy` file: its shape (rows, columns) and its elements in row-major
/// order (a Fortran-order file reordered). For a problem's operands, [`OperandFiles::open`]
/// checks the headers before reading data and keeps each file's order as a view.
pub fn read_matrix(path: &Path) -> Result<((usize, usize), Vec<f32>)> {
    let matrix = NpyMatrix::open(path)?;
    let (shape, desc) = (matrix.shape(), matrix.desc());
    let data = matrix.read()?;
    let HostData::F32(data) = data else {
        return Err(Error::ReadMatrix {
            path: path.to_path_buf(),
            reason: format!("expected float32, found {}", data.dtype()),
        });
    };
    if desc.layout() != Layout::ColMajor {
        return Ok((shape, data));
    }
    let mut rows = host::with_capacity(data.len(), "a matrix reordered to rows")?;
    rows.extend(
        (0..shape.0)
            .flat_map(|i| (0..shape.1).map(move |j| (i, j)))
            .map(|(i, j)| data[desc.index(0, i, j)]),
    );
    Ok((shape, rows))
}

/// Writes a rows×cols row-major f32 matrix as a `.npy` file (see [`Output`]).
pub fn write_matrix(path: &Path, rows: usize, cols: usize, data: &[f32]) -> Result<()> {
    Output::create(path)?.write_raw(DType::F32, false, &[rows, cols], bytemuck::cast_slice(data))
}

/// Where A and B came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase", tag = "kind")]
pub enum Source {
    /// tilemm's own random data: uniform in [-1, 1) from a seed.
    Random {
        /// The seed.
        seed: u64,
    },
    /// `.npy` files.
    Files {
        /// A's file.
        #[serde(serialize_with = "lossy_path")]
        a: PathBuf,
        /// B's file.
        #[serde(serialize_with = "lossy_path")]
        b: PathBuf,
        /// C₀'s file, if given (else C₀ is random when β ≠ 0).
        #[serde(serialize_with = "lossy_optional_path")]
        c: Option<PathBuf>,
    },
}

impl Source {
    /// Whether these are tilemm's random inputs, for which a correct kernel's error has a
    /// statistical expectation (the verifier's precision limit); for other data none holds.
    pub fn random(&self) -> bool {
        matches!(self, Source::Random { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::Array2;

    /// A version-1 .npy file with `header` (a Python dict literal) and `data`, written by hand
    /// so that it can say anything, true or not.
    fn raw_npy(header: &str, data: &[u8]) -> Vec<u8> {
        let padded = format!("{header:<117}\n");
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&[1, 0]);
        bytes.extend_from_slice(&(padded.len() as u16).to_le_bytes());
        bytes.extend_from_slice(padded.as_bytes());
        bytes.extend_from_slice(data);
        bytes
    }

    fn f32_bytes(values: &[f32], big_endian: bool) -> Vec<u8> {
        values
            .iter()
            .flat_map(|v| {
                if big_endian {
                    v.to_be_bytes()
                } else {
                    v.to_le_bytes()
                }
            })
            .collect()
    }

    #[test]
    fn npy_round_trip_and_fortran_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.npy");
        write_matrix(&path, 2, 3, &[1., 2., 3., 4., 5., 6.]).unwrap();
        assert_eq!(
            read_matrix(&path).unwrap(),
            ((2, 3), vec![1., 2., 3., 4., 5., 6.])
        );

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
    fn half_and_double_files_round_trip_and_fortran_order_is_a_view() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.npy");
        for dtype in [DType::F16, DType::F32, DType::F64, DType::BF16] {
            let data = HostData::from_f64(dtype, (0..6).map(|x| x as f64 / 4.0));
            for desc in [MatrixDesc::row_major(2, 3), MatrixDesc::col_major(2, 3)] {
                Output::create(&path)
                    .unwrap()
                    .write(&data, &desc, 1)
                    .unwrap();
                let file = NpyMatrix::open(&path).unwrap();
                // bf16 has no numpy dtype: it is written as float32, exactly.
                let stored = if dtype == DType::BF16 {
                    DType::F32
                } else {
                    dtype
                };
                assert_eq!(
                    (file.dtype(), file.shape(), file.desc()),
                    (stored, (2, 3), desc)
                );
                let back = file.read().unwrap();
                assert_eq!(back.dtype(), stored);
                assert!(
                    (0..6).all(|i| back.get(i) == data.get(i)),
                    "{dtype} {desc:?}"
                );
            }
        }
        // A batch is written as a 3-D array, which numpy reads and `run` does not.
        let data = HostData::from_f64(DType::F32, (0..12).map(f64::from));
        Output::create(&path)
            .unwrap()
            .write(&data, &MatrixDesc::row_major(2, 3), 2)
            .unwrap();
        let err = read_matrix(&path).unwrap_err().to_string();
        assert!(err.contains("found 3 dimension(s)"), "{err}");
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(
            (bytes.len() - 12 * 4) % 64,
            0,
            "the data starts 64-byte aligned"
        );
        assert!(String::from_utf8_lossy(&bytes).contains("'shape': (2, 2, 3)"));
    }

    #[test]
    fn operand_files_make_the_problem_with_each_files_order_as_its_view() {
        let dir = tempfile::tempdir().unwrap();
        let save = |name: &str, rows, cols, desc: MatrixDesc, dtype| {
            let path = dir.path().join(name);
            let data = HostData::from_f64(dtype, (0..rows * cols).map(|x| x as f64));
            Output::create(&path)
                .unwrap()
                .write(&data, &desc, 1)
                .unwrap();
            path
        };
        let f64s = DType::F64;
        let a = save("a", 4, 3, MatrixDesc::col_major(4, 3), f64s);
        let b = save("b", 3, 5, MatrixDesc::row_major(3, 5), f64s);
        let c = save("c", 4, 5, MatrixDesc::col_major(4, 5), f64s);
        let none = FileOps::default();
        let (p, files) = OperandFiles::open(&a, &b, Some(&c), (1.0, 2.0), none).unwrap();
        assert_eq!(p.precision(), Precision::of(DType::F64));
        assert_eq!(
            (p.a().layout(), p.b().layout()),
            (Layout::ColMajor, Layout::RowMajor)
        );
        assert_eq!(p.c(), MatrixDesc::col_major(4, 5));
        let (_, _, c0) = files.read().unwrap();
        assert_eq!(c0.map(|c| c.len()), Some(20));
        // β = 0: C₀ is not read, with a note.
        let (p, files) = OperandFiles::open(&a, &b, Some(&c), (1.0, 0.0), none).unwrap();
        assert!(!p.reads_c() && files.c.is_none());
        assert!(
            files.notes[0].contains("is not read: β = 0"),
            "{:?}",
            files.notes
        );
        // op() on the files as stored: Bᵀ·Aᵀ is 5×4, each a view of its file.
        let trans = FileOps {
            trans_a: true,
            trans_b: true,
            dtype: Some(DType::F64),
        };
        let (p, _) = OperandFiles::open(&b, &a, None, (1.0, 0.0), trans).unwrap();
        assert_eq!((p.m(), p.k(), p.n()), (5, 3, 4));
        assert_eq!(p.a(), MatrixDesc::row_major(3, 5).t());
        assert_eq!(p.b(), MatrixDesc::col_major(4, 3).t());
        // A C₀ of the wrong shape, mixed dtypes, a dtype the files are not: each refused in one
        // line that names what is wrong.
        let err = |r: Result<(Problem, OperandFiles)>| r.err().unwrap().to_string();
        let small = save("s", 2, 2, MatrixDesc::row_major(2, 2), f64s);
        assert!(err(OperandFiles::open(&a, &b, Some(&small), (1.0, 1.0), none)).contains("4×5"));
        let f32_b = save("b32", 3, 5, MatrixDesc::row_major(3, 5), DType::F32);
        assert!(err(OperandFiles::open(&a, &f32_b, None, (1.0, 0.0), none)).contains("same dtype"));
        assert!(err(OperandFiles::open(&b, &a, None, (1.0, 0.0), none)).contains("don't chain"));
        let f32s = FileOps {
            dtype: Some(DType::F32),
            ..none
        };
        let e = err(OperandFiles::open(&a, &b, None, (1.0, 0.0), f32s));
        assert!(e.contains("holds f64 but f32 was asked for"), "{e}");
    }

    #[test]
    fn every_byte_order_numpy_writes_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let values = [1.5f32, -2.0, 3.25, 1e-3];
        for (descr, big) in [
            ("<f4", false),
            (">f4", true),
            ("=f4", cfg!(target_endian = "big")),
        ] {
            let path = dir.path().join("m.npy");
            let header =
                format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': (2, 2), }}");
            std::fs::write(&path, raw_npy(&header, &f32_bytes(&values, big))).unwrap();
            assert_eq!(read_matrix(&path).unwrap().1, values, "{descr}");
        }
    }

    #[test]
    fn a_header_that_claims_more_than_the_file_holds_is_refused_without_allocating_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lying.npy");
        let header = "{'descr': '<f4', 'fortran_order': False, 'shape': (100000, 100000), }";
        std::fs::write(&path, raw_npy(header, &[0u8; 64])).unwrap();
        let err = NpyMatrix::open(&path).err().unwrap().to_string();
        assert!(
            err.contains("truncated") && err.contains("40000000000"),
            "{err}"
        );
    }

    #[test]
    fn a_stream_is_read_as_it_arrives_and_its_end_is_checked() {
        use std::process::{Command, Stdio};
        let dir = tempfile::tempdir().unwrap();
        let values: Vec<f32> = (0..12).map(|i| i as f32).collect();
        let header = "{'descr': '<f4', 'fortran_order': True, 'shape': (3, 4), }";
        let path = dir.path().join("m.npy");
        std::fs::write(&path, raw_npy(header, &f32_bytes(&values, false))).unwrap();
        // A FIFO is a pipe with a name: what `--a <(cat m.npy)` hands tilemm.
        let fifo = dir.path().join("fifo");
        assert!(Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());
        let writer = Command::new("cp")
            .arg(&path)
            .arg(&fifo)
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let (shape, data) = read_matrix(&fifo).unwrap();
        assert_eq!(shape, (3, 4));
        // Fortran order: column j holds rows 0..3 at 3j..3j+3.
        assert_eq!(data[..4], [0., 3., 6., 9.]);
        assert_eq!(data[4..8], [1., 4., 7., 10.]);
        drop(writer.wait_with_output());
    }

    #[test]
    fn bad_files_are_refused_in_one_line() {
        let dir = tempfile::tempdir().unwrap();
        let cases: [(&str, Vec<u8>, &str); 7] = [
            ("empty", vec![], "empty"),
            ("text", b"not a matrix at all".to_vec(), "not a .npy file"),
            (
                "f64",
                raw_npy(
                    "{'descr': '<i8', 'fortran_order': False, 'shape': (2, 2), }",
                    &[0; 32],
                ),
                "expected dtype float16, float32 or float64 ('<f2', '<f4', '<f8'), found '<i8'",
            ),
            (
                "vec",
                raw_npy(
                    "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }",
                    &[0; 16],
                ),
                "expected a 2-D array",
            ),
            (
                "corrupt",
                raw_npy(
                    "{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2, 2)",
                    &[0; 16],
                ),
                "corrupt .npy header",
            ),
            (
                "long",
                raw_npy(
                    "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1), }",
                    &[0; 8],
                ),
                "4 bytes follow the data",
            ),
            ("short", MAGIC[..4].to_vec(), "not a .npy file"),
        ];
        for (name, bytes, expected) in cases {
            let path = dir.path().join(name);
            std::fs::write(&path, bytes).unwrap();
            let err = read_matrix(&path).unwrap_err().to_string();
            assert!(err.contains(expected), "{name}: {err}");
            assert!(err.contains(name) && !err.contains('\n'), "{name}: {err}");
        }
        let err = read_matrix(dir.path()).unwrap_err().to_string();
        assert!(err.contains("is a directory"), "{err}");
        let err = read_matrix(&dir.path().join("missing.npy"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("missing.npy") && err.contains("No such file"),
            "{err}"
        );
    }

    #[test]
    fn an_existing_output_is_replaced_whole_or_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("C.npy");
        write_matrix(&path, 1, 2, &[1., 2.]).unwrap();
        // An output prepared but never written (the run failed) leaves the old file and no
        // temporary behind.
        drop(Output::create(&path).unwrap());
        assert_eq!(read_matrix(&path).unwrap().1, vec![1., 2.]);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        // A symbolic link keeps pointing at the file, whose contents are replaced.
        let link = dir.path().join("link.npy");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        write_matrix(&link, 1, 1, &[7.]).unwrap();
        assert!(link.symlink_metadata().unwrap().file_type().is_symlink());
        assert_eq!(read_matrix(&path).unwrap().1, vec![7.]);
        let err = Output::create(dir.path()).err().unwrap().to_string();
        assert!(err.contains("is a directory"), "{err}");
        // A dangling link is written through: the file it names appears, the link stays.
        let dangling = dir.path().join("dangling.npy");
        std::os::unix::fs::symlink("made.npy", &dangling).unwrap();
        write_matrix(&dangling, 1, 1, &[5.]).unwrap();
        assert!(dangling
            .symlink_metadata()
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(
            read_matrix(&dir.path().join("made.npy")).unwrap().1,
            vec![5.]
        );
    }

    #[test]
    fn a_deeply_nested_header_is_refused_before_it_is_parsed() {
        // 1000 balanced brackets: the literal parser never finished on this.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("deep.npy");
        let deep = format!(
            "{{'descr': {}{}, 'fortran_order': False, 'shape': (1, 1), }}",
            "[".repeat(1000),
            "]".repeat(1000)
        );
        let mut bytes = MAGIC.to_vec();
        let padded = format!("{deep}\n");
        bytes.extend_from_slice(&[1, 0]);
        bytes.extend_from_slice(&(padded.len() as u16).to_le_bytes());
        bytes.extend_from_slice(padded.as_bytes());
        bytes.extend_from_slice(&[0; 4]);
        std::fs::write(&path, bytes).unwrap();
        let err = read_matrix(&path).unwrap_err().to_string();
        assert!(err.contains("nested more than 4 deep"), "{err}");
        assert_eq!(nesting("{'descr': '<f4', 'shape': (2, 3), 'x': '((('}"), 2);
    }
}
