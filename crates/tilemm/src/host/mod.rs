//! The host's memory: how much this process may still allocate, byte counts that cannot wrap,
//! and allocation that fails with an error instead of aborting the process.
//!
//! The machine's free memory is not the only limit: a process may run under an address-space
//! or data limit (`ulimit -v`, `prlimit --as`) or in a cgroup with a memory limit (containers,
//! systemd units, CI runners). A run that ignores them is killed or aborted half-way; tilemm
//! takes the tightest one into account before it allocates anything large.

pub mod cpu;
pub mod fenv;

use std::fmt;
use std::path::Path;

use crate::error::{Error, Result};
use crate::problem::DType;
use crate::types::element::HostData;

/// How much more memory this process may allocate, and which limit says so.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Headroom {
    /// Bytes.
    pub bytes: u64,
    /// The limit that gives the figure, in words a user can act on.
    pub limited_by: String,
}

impl fmt::Display for Headroom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", format_bytes(self.bytes), self.limited_by)
    }
}

/// The tightest of the machine's available memory, this process's address-space and data
/// limits, and its cgroup's memory limit; `None` where the OS tells none of them.
pub fn headroom() -> Option<Headroom> {
    let mut candidates = process_limits();
    if let Some(available) = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|meminfo| kib_field(&meminfo, "MemAvailable:"))
    {
        candidates.push(Headroom {
            bytes: available,
            limited_by: "the machine's available memory".into(),
        });
    }
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    candidates.extend(cgroup_headroom(&cgroups, Path::new("/sys/fs/cgroup")));
    candidates.into_iter().min_by_key(|h| h.bytes)
}

/// Address space a GPU driver maps when it starts and compiles its first kernels: lavapipe
/// (with LLVM and its worker threads) peaked at 1.1 GB in a run that used 0.25 GB of data.
pub const DRIVER_ADDRESS_SPACE: u64 = 1 << 30;

/// Refuses to start a GPU driver under an address-space or data limit that leaves it less than
/// [`DRIVER_ADDRESS_SPACE`]: drivers do not fail cleanly there (lavapipe segfaulted, aborted in
/// glibc, or panicked inside CubeCL at limits between 250 and 550 MB).
pub fn ensure_driver_headroom(backend: &str) -> Result<()> {
    match process_limits().into_iter().min_by_key(|h| h.bytes) {
        Some(h) if h.bytes < DRIVER_ADDRESS_SPACE => Err(Error::NoDevice(format!(
            "not starting the {backend} driver: GPU drivers map about {} of address space, but \
             {h} is left (raise the limit, or use --backend cpu)",
            format_bytes(DRIVER_ADDRESS_SPACE)
        ))),
        _ => Ok(()),
    }
}

/// This process's address-space and data limits, less what it uses already.
#[cfg(target_os = "linux")]
fn process_limits() -> Vec<Headroom> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let mut limits = Vec::new();
    for (resource, used_field, words) in [
        (
            libc::RLIMIT_AS,
            "VmSize:",
            "this process's address-space limit, `ulimit -v`",
        ),
        (
            libc::RLIMIT_DATA,
            "VmData:",
            "this process's data-size limit, `ulimit -d`",
        ),
    ] {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes one rlimit struct, which `limit` is.
        let ok = unsafe { libc::getrlimit(resource, &mut limit) } == 0;
        if ok && limit.rlim_cur != libc::RLIM_INFINITY {
            let used = kib_field(&status, used_field).unwrap_or(0);
            limits.push(Headroom {
                bytes: limit.rlim_cur.saturating_sub(used),
                limited_by: words.into(),
            });
        }
    }
    limits
}

#[cfg(not(target_os = "linux"))]
fn process_limits() -> Vec<Headroom> {
    Vec::new()
}

/// Starts measuring this process's peak resident memory afresh from now (Linux's
/// `/proc/self/clear_refs`); false where it cannot, and the peak is then the process's.
pub fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// This process's resident memory now (`VmRSS`) and at its peak so far (`VmHWM`, since
/// [`reset_peak`] where that worked), in bytes, where the OS tells them.
pub fn resident() -> Option<(u64, u64)> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    Some((kib_field(&status, "VmRSS:")?, kib_field(&status, "VmHWM:")?))
}

/// A `/proc` field given in kB, in bytes.
fn kib_field(text: &str, field: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(field))?;
    let kib: u64 = line[field.len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    kib.checked_mul(1024)
}

/// The headroom under the memory limit of this process's cgroup and of each cgroup above it
/// (v2: `memory.max` − `memory.current`; v1: `memory.limit_in_bytes` − `memory.usage_in_bytes`),
/// given `/proc/self/cgroup`'s text and the cgroup file system's mount point.
fn cgroup_headroom(proc_self_cgroup: &str, root: &Path) -> Option<Headroom> {
    let mut tightest: Option<u64> = None;
    for line in proc_self_cgroup.lines() {
        let mut fields = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) =
            (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let (base, max_file, current_file) = match controllers {
            "" => (root.to_path_buf(), "memory.max", "memory.current"),
            c if c.split(',').any(|c| c == "memory") => (
                root.join("memory"),
                "memory.limit_in_bytes",
                "memory.usage_in_bytes",
            ),
            _ => continue,
        };
        let mut dir = base.join(path.trim_start_matches('/'));
        loop {
            let read = |file: &str| std::fs::read_to_string(dir.join(file)).ok();
            // "max" (v2) or a huge page-rounded i64::MAX (v1) means no limit.
            if let (Some(max), Some(current)) = (read(max_file), read(current_file)) {
                if let (Ok(max), Ok(current)) =
                    (max.trim().parse::<u64>(), current.trim().parse::<u64>())
                {
                    if max < (1 << 62) {
                        let room = max.saturating_sub(current);
                        tightest = Some(tightest.map_or(room, |t| t.min(room)));
                    }
                }
            }
            if dir == base || !dir.pop() {
                break;
            }
        }
    }
    tightest.map(|bytes| Headroom {
        bytes,
        limited_by: "this process's cgroup memory limit".into(),
    })
}

/// A sum of byte counts that reports overflow instead of wrapping.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Bytes(Option<u64>);

impl Bytes {
    /// Zero bytes.
    pub const ZERO: Bytes = Bytes(Some(0));

    /// `count` elements of `size` bytes each.
    pub fn of(count: usize, size: usize) -> Self {
        Bytes((count as u64).checked_mul(size as u64))
    }

    /// This many bytes.
    pub fn exactly(bytes: u64) -> Self {
        Bytes(Some(bytes))
    }

    /// `self` times `factor`.
    pub fn times(self, factor: u64) -> Self {
        Bytes(self.0.and_then(|b| b.checked_mul(factor)))
    }

    /// The total, or `None` if it overflowed 64 bits.
    pub fn get(self) -> Option<u64> {
        self.0
    }
}

impl std::ops::Add for Bytes {
    type Output = Bytes;

    fn add(self, other: Bytes) -> Bytes {
        Bytes(self.0.zip(other.0).and_then(|(a, b)| a.checked_add(b)))
    }
}

impl std::iter::Sum for Bytes {
    fn sum<I: Iterator<Item = Bytes>>(iter: I) -> Bytes {
        iter.fold(Bytes::ZERO, |a, b| a + b)
    }
}

/// Refuses a run that needs `needed` bytes of host memory when the process does not have them.
pub fn ensure_headroom(needed: Bytes, headroom: Option<&Headroom>) -> Result<()> {
    let Some(needed) = needed.get() else {
        return Err(Error::HostMemory {
            needed: "more than 2⁶⁴ bytes".into(),
            available: headroom.map(Headroom::to_string),
        });
    };
    match headroom {
        Some(h) if needed > h.bytes => Err(Error::HostMemory {
            needed: format_bytes(needed),
            available: Some(h.to_string()),
        }),
        _ => Ok(()),
    }
}

/// Element types whose all-zero bit pattern is the value zero, so a zeroed allocation is a
/// valid vector of zeros.
pub trait Zeroable: Copy + private::Sealed {}
impl Zeroable for f32 {}
impl Zeroable for f64 {}
impl Zeroable for half::f16 {}
impl Zeroable for half::bf16 {}

mod private {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
    impl Sealed for half::f16 {}
    impl Sealed for half::bf16 {}
}

/// `len` zeros, or an error naming `what` when the allocation fails (never an abort).
///
/// The memory comes zeroed from the OS and is committed only as it is written, so a buffer
/// that a short stream fills only in part costs only what was written.
pub fn zeros<T: Zeroable>(len: usize, what: &str) -> Result<Vec<T>> {
    let fail = || Error::OutOfMemory {
        what: what.to_string(),
        bytes: Bytes::of(len, size_of::<T>()).get().unwrap_or(u64::MAX),
    };
    let layout = std::alloc::Layout::array::<T>(len).map_err(|_| fail())?;
    if layout.size() == 0 {
        return Ok(Vec::new());
    }
    // SAFETY: the layout has a non-zero size; the allocation, if any, is zeroed, and zero bits
    // are a valid T (Zeroable), so it is a valid Vec of `len` elements with that capacity,
    // allocated by the global allocator with the layout Vec<T> uses.
    unsafe {
        let ptr = std::alloc::alloc_zeroed(layout).cast::<T>();
        if ptr.is_null() {
            return Err(fail());
        }
        Ok(Vec::from_raw_parts(ptr, len, len))
    }
}

/// An empty vector with room for `len` elements, or an error naming `what`.
pub fn with_capacity<T>(len: usize, what: &str) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| Error::OutOfMemory {
        what: what.to_string(),
        bytes: Bytes::of(len, size_of::<T>()).get().unwrap_or(u64::MAX),
    })?;
    Ok(v)
}

/// `len` zeros of `dtype`'s storage; see [`zeros`].
pub fn zeros_of(dtype: DType, len: usize, what: &str) -> Result<HostData> {
    Ok(match dtype {
        DType::F16 => HostData::F16(zeros(len, what)?),
        DType::BF16 => HostData::BF16(zeros(len, what)?),
        DType::F32 | DType::TF32 => HostData::F32(zeros(len, what)?),
        DType::F64 => HostData::F64(zeros(len, what)?),
    })
}

/// `dst` = `src`, element by element, on the CPU path's threads when it is large (4 MiB and
/// more): the one host copy a product cannot avoid (C from the device's bytes into the
/// caller's array, an operand no route reads as it lies) at the memory's speed rather than
/// one core's.
pub fn copy_into<T: Copy + Send + Sync>(
    mut dst: ndarray::ArrayViewMut3<T>,
    src: ndarray::ArrayView3<T>,
) -> Result<()> {
    use ndarray::{Axis, Zip};
    if dst.len() * size_of::<T>() < 4 << 20 {
        dst.assign(&src);
        return Ok(());
    }
    // Lines along the axis where the destination is densest, one per task.
    let along = if dst.strides()[2].unsigned_abs() <= dst.strides()[1].unsigned_abs() {
        Axis(2)
    } else {
        Axis(1)
    };
    cpu::on_pool(|| {
        Zip::from(dst.lanes_mut(along))
            .and(src.lanes(along))
            .par_for_each(|mut d, s| d.assign(&s))
    })
}

/// A copy of `data`, or an error naming `what` when the allocation fails.
pub fn copy_of_slice(data: crate::types::element::HostSlice<'_>, what: &str) -> Result<HostData> {
    crate::with_slice!(data, v => {
        let mut out = with_capacity(v.len(), what)?;
        out.extend_from_slice(v);
        Ok(HostData::from(out))
    })
}

/// A copy of `data`, or [`Error::OutOfMemory`] naming `what`.
pub fn copy_of(data: &HostData, what: &str) -> Result<HostData> {
    let mut copy = zeros_of(data.dtype(), data.len(), what)?;
    crate::with_data!(&mut copy, v => {
        bytemuck::cast_slice_mut(v.as_mut_slice()).copy_from_slice(data.as_bytes())
    });
    Ok(copy)
}

/// `data` rounded (or widened) to `dtype`'s storage, or an error naming `what` when the
/// allocation fails.
pub fn converted(data: &HostData, dtype: DType, what: &str) -> Result<HostData> {
    use crate::types::element::Element;
    let mut out = zeros_of(dtype, data.len(), what)?;
    crate::with_data!(&mut out, v => {
        for (i, x) in v.iter_mut().enumerate() {
            *x = Element::from_f64(data.get(i));
        }
    });
    Ok(out)
}

/// Bytes an unprivileged process may still write on the file system holding `path`.
pub fn free_disk_bytes(path: &Path) -> std::io::Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::other("the path has a NUL byte"))?;
    let mut stat = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: a NUL-terminated path and a buffer statvfs fills on success.
    if unsafe { libc::statvfs(c_path.as_ptr(), stat.as_mut_ptr()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: statvfs returned 0, so it filled the buffer.
    let stat = unsafe { stat.assume_init() };
    Ok(stat.f_bavail.saturating_mul(stat.f_frsize))
}

/// Bytes in the unit a person reads best (B, KiB, MiB, GiB).
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {} ({bytes} bytes)", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_copy_on_the_pool_puts_every_element_where_assign_would() {
        use ndarray::{s, Array3};
        // 2 × 1024 × 640 f32 (5 MiB): past the threshold, into a column-major destination,
        // from a source with reversed rows and a step.
        let big = Array3::from_shape_fn((2, 1024, 1280), |(e, i, j)| (e * 7 + i * 3 + j) as f32);
        let src = big.slice(s![.., ..;-1, ..;2]);
        let mut want = Array3::<f32>::zeros((2, 640, 1024));
        let mut got = want.clone();
        let (mut w, mut g) = (want.view_mut(), got.view_mut());
        w.swap_axes(1, 2);
        g.swap_axes(1, 2);
        w.assign(&src);
        copy_into(g, src).unwrap();
        assert_eq!(got, want);
        assert!(got.iter().any(|&x| x != 0.0));
    }

    #[test]
    fn byte_sums_report_overflow_instead_of_wrapping() {
        // C of the 2147483647×1×1073741824: 2⁶³ − 2³³ bytes; three copies overflow.
        let c = Bytes::of(2_147_483_647 * 1_073_741_824, 4);
        assert!((c + c).get().is_some());
        assert_eq!((c + c + c).get(), None);
        assert_eq!(c.times(3).get(), None);
        assert_eq!(
            [Bytes::of(3, 4), Bytes::exactly(1)]
                .into_iter()
                .sum::<Bytes>()
                .get(),
            Some(13)
        );
        let err = ensure_headroom(c.times(3), None).unwrap_err().to_string();
        assert!(err.contains("more than 2⁶⁴ bytes"), "{err}");
    }

    #[test]
    fn a_run_beyond_the_headroom_is_refused_naming_the_limit() {
        let h = Headroom {
            bytes: 1 << 30,
            limited_by: "this process's address-space limit, `ulimit -v`".into(),
        };
        assert!(ensure_headroom(Bytes::exactly(1 << 29), Some(&h)).is_ok());
        let err = ensure_headroom(Bytes::exactly(3 << 30), Some(&h))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("3.0 GiB") && err.contains("ulimit -v"),
            "{err}"
        );
    }

    #[test]
    fn impossible_allocations_are_errors_not_aborts() {
        // Sizes that overflow the layout arithmetic, and sizes the allocator is asked for and
        // refuses: 2⁴⁸ bytes is a valid layout but more address space than x86-64 gives a
        // process (2⁴⁷), so the allocator itself returns null.
        let err = zeros::<f64>(usize::MAX / 4, "the test's buffer").unwrap_err();
        assert!(matches!(err, Error::OutOfMemory { .. }), "{err}");
        assert!(err.to_string().contains("the test's buffer"), "{err}");
        let err = zeros::<f64>(1 << 45, "a 256 TiB buffer").unwrap_err();
        assert!(err.to_string().contains("a 256 TiB buffer"), "{err}");
        let err = with_capacity::<f32>(1 << 62, "another").unwrap_err();
        assert!(matches!(err, Error::OutOfMemory { .. }), "{err}");
        let err = with_capacity::<f32>(1 << 46, "a 256 TiB vector").unwrap_err();
        assert!(err.to_string().contains("a 256 TiB vector"), "{err}");
        assert_eq!(zeros::<f32>(5, "small").unwrap(), vec![0.0; 5]);
    }

    #[test]
    fn cgroup_limits_are_read_for_v1_and_v2_up_the_hierarchy() {
        let root = tempfile::tempdir().unwrap();
        let write = |rel: &str, text: &str| {
            let path = root.path().join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        };
        // v2: the parent's limit is the tighter one.
        write("a/b/memory.max", "max\n");
        write("a/b/memory.current", "100\n");
        write("a/memory.max", "5000\n");
        write("a/memory.current", "1000\n");
        let h = cgroup_headroom("0::/a/b\n", root.path()).unwrap();
        assert_eq!(h.bytes, 4000);
        // v1: the memory controller's own hierarchy; an unlimited cgroup says nothing.
        write("memory/x/memory.limit_in_bytes", "2048\n");
        write("memory/x/memory.usage_in_bytes", "48\n");
        write("memory/memory.limit_in_bytes", "9223372036854771712\n");
        write("memory/memory.usage_in_bytes", "5\n");
        let h = cgroup_headroom("4:memory:/x\n1:cpu:/\n", root.path()).unwrap();
        assert_eq!(h.bytes, 2000);
        assert!(cgroup_headroom("4:memory:/\n", root.path()).is_none());
        assert!(cgroup_headroom("", root.path()).is_none());
    }
}
