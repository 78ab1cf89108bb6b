//! The CUPTI side of [`super::KernelClock`]: buffers CUPTI writes kernel records into, and
//! the spans read off them.

use std::alloc::{alloc, dealloc, Layout};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use cudarc::cupti::result::{activity, CuptiError};
use cudarc::cupti::sys::{CUpti_ActivityFlag, CUpti_ActivityKind};

use super::INSTALL_HINT;
use crate::measure::bench::Sample;
use crate::Result;

/// CUPTI's kernel records, opened once per process: activity tracing is process-wide.
pub struct KernelClock {
    /// One timed run at a time: the records of a run are every kernel CUPTI saw during it.
    running: Mutex<()>,
}

/// Why the clock stopped being used, after a run it failed on.
static BROKEN: OnceLock<String> = OnceLock::new();

/// The spans (start, end, in ns of the GPU's timer) of the kernels CUPTI has handed back.
static KERNELS: Mutex<Vec<(u64, u64)>> = Mutex::new(Vec::new());

/// Bytes per activity buffer: a run launches a few kernels, of about 200 bytes of record each.
const BUFFER_BYTES: usize = 1 << 20;
/// CUPTI's records are 8-byte aligned.
const BUFFER_ALIGN: usize = 8;

/// The head every version of CUPTI's kernel record (`CUpti_ActivityKernel2` to `13`) shares:
/// the kind, the cache configurations, and the kernel's start and end.
#[repr(C)]
struct KernelRecordHead {
    kind: u32,
    _cache_shared_registers: [u8; 4],
    _partitioned_cache: [u32; 2],
    start: u64,
    end: u64,
}

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
    let kernel = CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL as u32;
    // SAFETY: `buffer` holds `valid_size` bytes of records CUPTI wrote; each record starts
    // with its kind, and a kernel record (longer than its head) with `KernelRecordHead`.
    unsafe {
        while activity::get_next_record(buffer, valid_size, &mut record).is_ok() {
            if record.cast::<u32>().read_unaligned() != kernel {
                continue;
            }
            let head = record.cast::<KernelRecordHead>().read_unaligned();
            // A record without both timestamps (never the case after a wait) says nothing.
            if head.start != 0 && head.end >= head.start {
                spans.push((head.start, head.end));
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
                activity::enable(CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
                    .and_then(|()| {
                        activity::disable(CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
                    })
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
    /// clock's time for the whole call. Refused ([`crate::Error::Clock`]) when CUPTI fails, saw
    /// no kernel, or a span longer than the call (then the records are not this run's): the
    /// clock is then out of use for the process ([`KernelClock::get`] says why).
    pub fn time(&self, run: impl FnOnce() -> Result<()>) -> Result<Sample> {
        let timed = self.time_once(run);
        if let Err(crate::Error::Clock(why)) = &timed {
            let _ = BROKEN.set(format!("it failed on a run: {why}"));
        }
        timed
    }

    fn time_once(&self, run: impl FnOnce() -> Result<()>) -> Result<Sample> {
        let _one_at_a_time = self.running.lock().unwrap_or_else(|e| e.into_inner());
        let kind = CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
        let failed = |what: &str, err| crate::Error::Clock(cupti_error(what, err));
        // Records of earlier work, delivered now, are dropped.
        flush().map_err(|e| failed("flush", e))?;
        take_kernels();
        activity::enable(kind).map_err(|e| failed("kernel tracing", e))?;
        let start = Instant::now();
        let ran = run();
        let host_ms = start.elapsed().as_secs_f64() * 1e3;
        let flushed = flush();
        let stopped = activity::disable(kind);
        let kernels = take_kernels();
        ran?;
        stopped.map_err(|e| failed("kernel tracing", e))?;
        flushed.map_err(|e| failed("flush", e))?;
        let ms = checked_span(&kernels, host_ms).map_err(crate::Error::Clock)?;
        Ok(Sample { ms, host_ms })
    }
}

fn take_kernels() -> Vec<(u64, u64)> {
    std::mem::take(&mut *KERNELS.lock().unwrap_or_else(|e| e.into_inner()))
}

/// From the first start to the last end, in ms, of a run that took `host_ms` on the host
/// clock: refused for no kernel, or for a span longer than the run (records not its own).
fn checked_span(kernels: &[(u64, u64)], host_ms: f64) -> std::result::Result<f64, String> {
    let (Some(first), Some(last)) = (
        kernels.iter().map(|k| k.0).min(),
        kernels.iter().map(|k| k.1).max(),
    ) else {
        return Err("CUPTI recorded no kernel for a timed run".into());
    };
    let ms = last.saturating_sub(first) as f64 * 1e-6;
    if ms > host_ms {
        return Err(format!(
            "CUPTI's kernels span {ms:.4} ms, more than the {host_ms:.4} ms the run took"
        ));
    }
    Ok(ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_span_runs_from_the_first_start_to_the_last_end_within_the_run() {
        let kernels = [(2_000_000, 2_500_000), (1_000_000, 1_400_000)];
        let ms = checked_span(&kernels, 2.0).unwrap();
        assert!((ms - 1.5).abs() < 1e-12, "{ms}");
        assert!(checked_span(&[], 2.0).unwrap_err().contains("no kernel"));
        // Records spanning more than the run are not the run's.
        assert!(checked_span(&kernels, 1.0)
            .unwrap_err()
            .contains("more than"));
    }

    #[test]
    fn the_record_head_matches_cuptis_kernel_record() {
        use cudarc::cupti::sys::CUpti_ActivityKernel4 as Record;
        assert_eq!(std::mem::offset_of!(KernelRecordHead, start), 16);
        assert_eq!(std::mem::offset_of!(Record, start), 16);
        assert_eq!(std::mem::offset_of!(Record, end), 24);
    }
}
