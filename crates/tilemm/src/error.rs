//! The error type of every fallible tilemm operation.

/// Everything that can go wrong between parsing a request and verifying its result.
///
/// Each message names the problem and, where there is one, what the user can do about it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A dimension is zero.
    #[error("matrix dimension {name} is 0: every dimension must be at least 1")]
    ZeroDimension {
        /// Which dimension (`m`, `k`, `n` or `batch`).
        name: &'static str,
    },

    /// The sizes are too large to be represented or allocated at all.
    #[error("problem {m}×{k}×{n} is too large: {why}")]
    TooLarge {
        /// Rows of A and C.
        m: usize,
        /// Columns of A, rows of B.
        k: usize,
        /// Columns of B and C.
        n: usize,
        /// What overflowed.
        why: String,
    },

    /// A view of A, B or C that the product cannot use: wrong shape or batch, entries of C
    /// sharing elements.
    #[error("{0}")]
    InvalidView(String),

    /// α or β is not finite (in the precision it is applied in).
    #[error("{0}")]
    InvalidScalar(String),

    /// An operand the problem reads was not given (C₀ when β ≠ 0).
    #[error("{0}")]
    MissingOperand(String),

    /// No kernel of the ladder can run the problem on the device, or none that ran computed it
    /// within the bound.
    #[error("{0}")]
    NoKernel(String),

    /// A combination of element types tilemm does not compute.
    #[error("unsupported precision: {0}")]
    Precision(String),

    /// The device lacks an element type the precision needs.
    #[error("{device} cannot compute in {dtype}: it has no {missing} ({remedy})")]
    TypeUnavailable {
        /// The type.
        dtype: crate::types::DType,
        /// The device.
        device: String,
        /// The feature it lacks.
        missing: &'static str,
        /// What to do instead.
        remedy: &'static str,
    },

    /// The inner dimensions of A and B differ.
    #[error("shapes don't chain: A is {a_rows}×{a_cols} but B is {b_rows}×{b_cols} (A's columns must equal B's rows)")]
    ShapeMismatch {
        /// Rows of A.
        a_rows: usize,
        /// Columns of A.
        a_cols: usize,
        /// Rows of B.
        b_rows: usize,
        /// Columns of B.
        b_cols: usize,
    },

    /// The data handed to a function does not have the length its problem says.
    #[error("{what} holds {got} elements but the problem needs {expected}")]
    DataLength {
        /// Which operand.
        what: &'static str,
        /// Length given.
        got: usize,
        /// Length the problem implies.
        expected: usize,
    },

    /// A part of tilemm (a backend, the peers) that this build does not contain.
    #[error("this tilemm was built without {what}: it needs the cargo feature `{feature}`")]
    NotBuilt {
        /// What is missing: "the cuda backend", "the cubek-matmul peers".
        what: String,
        /// The cargo feature that builds it.
        feature: &'static str,
    },

    /// No device of the requested backend exists on this machine.
    #[error("{0}")]
    NoDevice(String),

    /// `--device N` names an adapter that does not exist.
    #[error("no device #{index}: {count} device(s) found (list them with `tilemm devices`)")]
    DeviceIndex {
        /// Index asked for.
        index: usize,
        /// How many there are.
        count: usize,
    },

    /// `--device` given with the CPU backend, which has no devices to choose from.
    #[error("a device index picks a GPU, but the cpu backend has none: the CPU path runs on all cores (RAYON_NUM_THREADS limits its threads)")]
    CpuDeviceIndex,

    /// The problem or kernel needs more than the device allows.
    #[error("{what} needs {needed} but {device} allows at most {limit}")]
    DeviceLimit {
        /// What exceeds the limit, e.g. "matrix A (4096×8192 f32)".
        what: String,
        /// The amount needed, with unit.
        needed: String,
        /// The device's limit, with unit.
        limit: String,
        /// The device's name.
        device: String,
    },

    /// The host does not have the memory the run needs.
    #[error("the run needs {needed} of host memory{}", available_words(available))]
    HostMemory {
        /// Bytes needed, in words.
        needed: String,
        /// Bytes this process may still allocate, and which limit says so, where known.
        available: Option<String>,
    },

    /// A large allocation failed (the estimate was exceeded, or another process took the memory).
    #[error(
        "cannot allocate {bytes} bytes for {what}: out of memory within this process's limits"
    )]
    OutOfMemory {
        /// What the memory was for.
        what: String,
        /// Bytes asked for.
        bytes: u64,
    },

    /// A GPU session used in a process forked after it was opened: the driver's threads and
    /// state stayed with the parent.
    #[error(
        "{device} was opened before this process was forked, and a forked child cannot use it \
         (its driver's threads stayed with the parent): start child processes with the 'spawn' \
         method, open the device only in the child, or compute on the CPU"
    )]
    Forked {
        /// The device.
        device: String,
    },

    /// A product stopped on request (an interrupt) before it finished: C is partly written.
    #[error("interrupted: the product stopped before it finished, and its C is partly written")]
    Interrupted,

    /// The CPU path could not start its threads.
    #[error("cannot start the CPU path's threads: {0}")]
    Threads(String),

    /// A kernel the device cannot run: it lacks the precision, matrix units, instructions or
    /// plane width the kernel is built on, or the kernel's block needs more threads or shared
    /// memory than the device gives one.
    #[error(
        "the {kernel} kernel cannot run on {device}: {why} (choose another configuration, or auto)"
    )]
    KernelUnavailable {
        /// The kernel and its configuration.
        kernel: String,
        /// The device.
        device: String,
        /// What is missing.
        why: Unavailable,
    },

    /// A setting read from the environment (tilemm's own, such as `TILEMM_DEVICE`, or one for a
    /// dependency) has a value tilemm cannot use or will not pass on.
    #[error("{name}={value}: {reason}")]
    Setting {
        /// The variable.
        name: String,
        /// Its value, shown lossily where it is not UTF-8.
        value: String,
        /// What is wrong with it, and what to do.
        reason: String,
    },

    /// Device arrays of one product on different devices, or a device array used on another
    /// device than it lives on.
    #[error("{0}")]
    DeviceMismatch(String),

    /// The device or its runtime reported an error.
    #[error("device error on {device}: {reason}")]
    Device {
        /// The device's name.
        device: String,
        /// The runtime's message.
        reason: String,
    },
}

/// What kind of failure an [`Error`] is: what a front end needs to report it in its own terms
/// (Python's exception classes, the CLI's exit status) without matching on variants, which may
/// grow. Every variant is classified here, by a match without a wildcard.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The operands' shapes, views or lengths do not make the product asked for.
    Shape,
    /// The element types are not a precision tilemm computes.
    DType,
    /// An argument or setting has a value tilemm cannot use.
    Argument,
    /// What the product needs is not there: a device, a backend, a kernel that runs, a type or
    /// a limit of the device, the CPU path's threads, a device that failed.
    Unavailable,
    /// The host does not have the memory.
    OutOfMemory,
    /// The product was stopped on request.
    Interrupted,
}

impl Error {
    /// What kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::ZeroDimension { .. }
            | Error::TooLarge { .. }
            | Error::InvalidView(_)
            | Error::ShapeMismatch { .. }
            | Error::DataLength { .. }
            | Error::MissingOperand(_) => ErrorKind::Shape,
            Error::Precision(_) => ErrorKind::DType,
            Error::InvalidScalar(_) | Error::Setting { .. } | Error::DeviceMismatch(_) => {
                ErrorKind::Argument
            }
            Error::NoKernel(_)
            | Error::TypeUnavailable { .. }
            | Error::NotBuilt { .. }
            | Error::NoDevice(_)
            | Error::DeviceIndex { .. }
            | Error::CpuDeviceIndex
            | Error::DeviceLimit { .. }
            | Error::Forked { .. }
            | Error::Threads(_)
            | Error::KernelUnavailable { .. }
            | Error::Device { .. } => ErrorKind::Unavailable,
            Error::HostMemory { .. } | Error::OutOfMemory { .. } => ErrorKind::OutOfMemory,
            Error::Interrupted => ErrorKind::Interrupted,
        }
    }
}

impl From<crate::types::UnsupportedPrecision> for Error {
    fn from(e: crate::types::UnsupportedPrecision) -> Self {
        Error::Precision(e.0)
    }
}

/// A panic's message (its payload, where it is text), for the one line that reports it.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}

/// A message that may span several lines (a runtime's, often with a backtrace; a parser's) as
/// one line: tilemm's refusals are one line each.
pub fn one_line(message: &str) -> String {
    let message = message.split("Backtrace:").next().unwrap_or(message);
    message
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

fn available_words(available: &Option<String>) -> String {
    available.as_ref().map_or_else(String::new, |a| {
        format!(" but this process can allocate only {a}")
    })
}

/// Result with tilemm's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a device cannot run a kernel (see [`Error::KernelUnavailable`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Unavailable {
    /// The kernel does not compute this precision on any device.
    Precision(crate::types::Precision),
    /// The kernel is laid out for planes of another width than the device's.
    PlaneWidth {
        /// The width the configuration is built for.
        built: u32,
        /// The device's (0: not fixed, or no plane operations).
        device: u32,
    },
    /// The device registers no matrix unit of the fragment shape and types the kernel uses.
    MatrixUnit {
        /// The shape and types wanted.
        wanted: crate::types::MatrixUnit,
        /// What the device registers.
        registered: Vec<crate::types::MatrixUnit>,
    },
    /// The device has no warp-level MMA on registers (`mma.sync`) of the shape and types
    /// the kernel uses: NVIDIA sm_80 and later, through the cuda backend.
    RegisterMma {
        /// The shape and types wanted.
        wanted: crate::types::MatrixUnit,
    },
    /// The device has no asynchronous copies from global to shared memory (`cp.async`).
    AsyncCopy,
    /// The kernel's block needs more of something than the device gives one block.
    Limit {
        /// What, with its unit: "threads per block", "bytes of shared memory".
        what: &'static str,
        /// How much the kernel needs.
        needed: u64,
        /// The most the device allows.
        limit: u64,
    },
}

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unavailable::Precision(p) => {
                write!(f, "it does not compute {p}")
            }
            Unavailable::PlaneWidth { built, device: 0 } => write!(
                f,
                "it is laid out for planes of {built} units, and the device's planes have no \
                 fixed width or no plane operations"
            ),
            Unavailable::PlaneWidth { built, device } => write!(
                f,
                "it is laid out for planes of {built} units, the device's are {device} wide"
            ),
            Unavailable::MatrixUnit { wanted, registered } if registered.is_empty() => write!(
                f,
                "the device registers no matrix units (cooperative matrices, tensor cores) for \
                 {wanted}: lavapipe has them from Mesa 26, other Vulkan drivers with \
                 VK_KHR_cooperative_matrix"
            ),
            Unavailable::MatrixUnit { wanted, registered } => {
                let list: Vec<String> = registered.iter().map(|u| u.to_string()).collect();
                write!(f, "its matrix units are {}, not {wanted}", list.join(", "))
            }
            Unavailable::RegisterMma { wanted } => write!(
                f,
                "it has no warp-level mma.sync for {wanted} (NVIDIA GPUs from sm_80 on, through \
                 the cuda backend)"
            ),
            Unavailable::AsyncCopy => write!(
                f,
                "it has no asynchronous copies to shared memory (cp.async: NVIDIA sm_80 and \
                 later, through the cuda backend)"
            ),
            Unavailable::Limit {
                what,
                needed,
                limit,
            } => write!(
                f,
                "it needs {needed} {what}, the device allows at most {limit}"
            ),
        }
    }
}
