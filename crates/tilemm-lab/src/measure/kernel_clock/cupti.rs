//! The CUPTI side of [`super::KernelClock`]: buffers CUPTI writes kernel records into, and
//! the spans read off them.

use std::alloc::{alloc, dealloc, Layout};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use cudarc::cupti::result::{activity, CuptiError};
use cudarc::cupti::sys::{CUpti_ActivityFlag, CUpti_ActivityKind};

use super::{checked_span, INSTALL_HINT};
use crate::measure::bench::Sample;
use crate::Result;

/// CUPTI's kernel records, opened once per process: activity tracing is process-wide.
pub struct KernelClock {
    /// One timed run at a time: the records of a run are every kernel CUPTI saw during it.
    running: Mutex<()>,
}

/// Why the clock stopped being used, after a run it failed on.
static BROKEN: OnceLock<String> = OnceLock::new();

/// The spans (start, end, in ns of CUPTI's timestamps) of the kernels CUPTI has handed back.
static KERNELS: Mutex<Vec<(u64, u64)>> = Mutex::new(Vec::new());

/// Kernel records handed back without both timestamps, since the last run began.
static INCOMPLETE: AtomicUsize = AtomicUsize::new(0);

/// Whether a buffer could not be allocated, so that CUPTI dropped records.
static DROPPED: AtomicBool = AtomicBool::new(false);

/// The kind of record the clock reads.
const KERNEL: CUpti_ActivityKind = CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;

/// Bytes per activity buffer: a run launches a few kernels, of about 200 bytes of record each.
const BUFFER_BYTES: usize = 1 << 20;
/// CUPTI's records are 8-byte aligned.
const BUFFER_ALIGN: usize = 8;

/// The head every version of CUPTI's kernel record (`CUpti_ActivityKernel3` to `13`) shares:
/// the kind, the cache configurations, and the kernel's start and end.
#[repr(C)]
struct KernelRecordHead {
    kind: u32,
    _cache_shared_registers: [u8; 4],
    _partitioned_cache: [u32; 2],
    start: u64,
    end: u64,
}

// The head's fields where CUPTI's kernel record has them, checked by every build with CUDA.
const _: () = {
    use cudarc::cupti::sys::CUpti_ActivityKernel4 as Record;
    assert!(std::mem::offset_of!(KernelRecordHead, start) == 16);
    assert!(std::mem::offset_of!(Record, start) == 16);
    assert!(std::mem::offset_of!(Record, end) == 24);
};

fn buffer_layout() -> Layout {
    Layout::from_size_align(BUFFER_BYTES, BUFFER_ALIGN).expect("a valid layout")
}

/// CUPTI asks for a buffer to write records into.
unsafe extern "C" fn buffer_requested(
    buffer: *mut *mut u8,
    size: *mut usize,
    max_num_records: *mut usize,
) {
    // SAFETY: CUPTI passes valid pointers; the buffer goes back in `buffer_completed`.
    unsafe {
        let ptr = alloc(buffer_layout());
        if ptr.is_null() {
            DROPPED.store(true, Ordering::Relaxed);
        }
        *buffer = ptr;
        *size = if ptr.is_null() { 0 } else { BUFFER_BYTES };
        // As many records as fit.
        *max_num_records = 0;
    }
}

/// CUPTI hands a buffer back: its kernel spans are kept, the buffer freed.
unsafe extern "C" fn buffer_completed(
    _context: cudarc::driver::sys::CUcontext,
    _stream_id: u32,
    buffer: *mut u8,
    _size: usize,
    valid_size: usize,
) {
    if buffer.is_null() {
        return;
    }
    let mut spans = Vec::new();
    let mut record: *mut cudarc::cupti::sys::CUpti_Activity = std::ptr::null_mut();
    let kernel = KERNEL as u32;
    // SAFETY: `buffer` holds `valid_size` bytes of records CUPTI wrote; each record starts
    // with its kind, and a kernel record (longer than its head) with `KernelRecordHead`.
    unsafe {
        while activity::get_next_record(buffer, valid_size, &mut record).is_ok() {
            if record.cast::<u32>().read_unaligned() != kernel {
                continue;
            }
            let head = record.cast::<KernelRecordHead>().read_unaligned();
            // Without both timestamps (never the case after a wait), the run's span is unknown.
            if head.start != 0 && head.end >= head.start {
                spans.push((head.start, head.end));
            } else {
                INCOMPLETE.fetch_add(1, Ordering::Relaxed);
            }
        }
        dealloc(buffer, buffer_layout());
    }
    if let Ok(mut kernels) = KERNELS.lock() {
        kernels.extend(spans);
    }
}

fn cupti_error(what: &str, err: CuptiError) -> String {
    format!("CUPTI {what} failed: {err:?}")
}

/// Hands back every record CUPTI holds, even from buffers not yet full.
fn flush() -> std::result::Result<(), CuptiError> {
    activity::flush_all(CUpti_ActivityFlag::CUPTI_ACTIVITY_FLAG_FLUSH_FORCED as u32)
}

impl KernelClock {
    /// The process's clock, or why there is none: libcupti not found, or CUPTI refused (another
    /// profiler, such as Nsight, holds it).
    pub fn get() -> std::result::Result<&'static KernelClock, &'static str> {
        static CLOCK: OnceLock<std::result::Result<KernelClock, String>> = OnceLock::new();
        if let Some(why) = BROKEN.get() {
            return Err(why);
        }
        CLOCK
            .get_or_init(|| {
                // SAFETY: only tries to dlopen libcupti.
                if !unsafe { cudarc::cupti::sys::is_culib_present() } {
                    return Err(format!("libcupti not found: {INSTALL_HINT}"));
                }
                activity::register_callbacks(Some(buffer_requested), Some(buffer_completed))
                    .map_err(|e| cupti_error("buffer callbacks", e))?;
                // Once, so that CUPTI's own start-up is not in a run.
                activity::enable(KERNEL)
                    .and_then(|()| activity::disable(KERNEL))
                    .and_then(|()| timestamp().map(drop))
                    .map_err(|e| cupti_error("kernel tracing", e))?;
                Ok(KernelClock {
                    running: Mutex::new(()),
                })
            })
            .as_ref()
            .map_err(String::as_str)
    }

    /// Runs `run`, which launches kernels and waits for them, with CUPTI tracing kernels, and
    /// returns the span from the first kernel's start to the last one's end, with the host
    /// clock's time for the whole call. Only kernels between CUPTI's timestamps before and
    /// after the call count. Refused ([`crate::Error::Clock`]) when it saw no kernel, a record
    /// without its timestamps or a dropped one, or a span longer than the call: then this row
    /// is timed otherwise. When CUPTI itself fails, the clock is out of use for the process
    /// ([`KernelClock::get`] says why).
    pub fn time(&self, run: impl FnOnce() -> Result<()>) -> Result<Sample> {
        let _one_at_a_time = self.running.lock().unwrap_or_else(|e| e.into_inner());
        let failed = |what: &str, err| {
            let why = cupti_error(what, err);
            let _ = BROKEN.set(format!("it failed on a run: {why}"));
            crate::Error::Clock(why)
        };
        // Records of earlier work, delivered now, are dropped.
        flush().map_err(|e| failed("flush", e))?;
        take_kernels();
        INCOMPLETE.store(0, Ordering::Relaxed);
        let before = timestamp().map_err(|e| failed("timestamp", e))?;
        activity::enable(KERNEL).map_err(|e| failed("kernel tracing", e))?;
        // Tracing stops however the run ends (a panic included).
        let tracing = Tracing;
        let start = Instant::now();
        let ran = run();
        let host_ms = start.elapsed().as_secs_f64() * 1e3;
        let after = timestamp();
        let flushed = flush();
        std::mem::forget(tracing);
        let stopped = activity::disable(KERNEL);
        let kernels = take_kernels();
        ran?;
        stopped.map_err(|e| failed("kernel tracing", e))?;
        flushed.map_err(|e| failed("flush", e))?;
        let after = after.map_err(|e| failed("timestamp", e))?;
        if DROPPED.load(Ordering::Relaxed) {
            let why = "CUPTI dropped records: a buffer could not be allocated";
            let _ = BROKEN.set(why.into());
            return Err(crate::Error::Clock(why.into()));
        }
        let incomplete = INCOMPLETE.swap(0, Ordering::Relaxed);
        if incomplete > 0 {
            return Err(crate::Error::Clock(format!(
                "CUPTI handed back {incomplete} kernel records without timestamps"
            )));
        }
        let ours: Vec<(u64, u64)> = kernels
            .into_iter()
            .filter(|&(first, last)| first >= before && last <= after)
            .collect();
        let ms = checked_span(&ours, host_ms).map_err(crate::Error::Clock)?;
        Ok(Sample { ms, host_ms })
    }
}

/// Kernel tracing on, until dropped.
struct Tracing;

impl Drop for Tracing {
    fn drop(&mut self) {
        let _ = activity::disable(KERNEL);
    }
}

/// CUPTI's timestamp now, on the clock of its records.
fn timestamp() -> std::result::Result<u64, CuptiError> {
    let mut now = 0u64;
    // SAFETY: CUPTI writes one u64 through the pointer.
    unsafe { cudarc::cupti::result::get_timestamp(&mut now) }?;
    Ok(now)
}

fn take_kernels() -> Vec<(u64, u64)> {
    std::mem::take(&mut *KERNELS.lock().unwrap_or_else(|e| e.into_inner()))
}
