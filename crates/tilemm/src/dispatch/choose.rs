//! The kernel a product runs, when none is named: the tuner's verified choice for the device
//! and shape class ([`crate::tune`]), kept for the process.
//!
//! The first-call policy: with the default budget ([`TuneBudget::None`]) no call waits on a
//! search. A class the cache holds gets the cached choice; a class never seen gets the model's
//! best-ranked kernel among those quick to compile, verified on the class's proxy before it is
//! kept (in the process and in the cache, for later processes). Searching is asked for:
//! `tilemm tune`, [`crate::Gemm::tune_budget`], Python's `tilemm.tune`, `--tune-budget`, or
//! `TILEMM_TUNE_BUDGET`.

use std::sync::Mutex;
use std::time::Instant;

use super::memo::Memo;
use crate::error::Result;
use crate::problem::Problem;
use crate::runtime::backend::GpuSession;
use crate::tune::{self, TuneBudget, TuneOptions, TuneReport};

/// One tuning at a time in this process: threads sharing a device would disturb each other's
/// timings, and the last to save would drop what the others timed.
static TUNING: Mutex<()> = Mutex::new(());

/// The kernels this process has chosen, by key: the first choice of a class is final for the
/// process, so that a given product always gets the same kernel, and so the same bits; and
/// repeated products of a class do not read the cache file and rank every candidate again.
static FINAL: Memo<String, TuneReport> = Memo::new();

/// The kernel for `problem` on `gpu` within `budget`, from this process's earlier choice for
/// the class where there is one.
pub fn kernel(gpu: &GpuSession, problem: &Problem, budget: TuneBudget) -> Result<TuneReport> {
    let start = Instant::now();
    let key = tune::TuneKey::new(gpu, problem).text();
    // This process's choice for the class, as a cache hit of this call.
    let chosen = || {
        FINAL.get(&key).map(|report| TuneReport {
            cache: tune::CacheUse::Hit,
            timed: Vec::new(),
            saved: false,
            notes: Vec::new(),
            time: start.elapsed(),
            ..report.clone()
        })
    };
    if let Some(report) = chosen() {
        return Ok(report);
    }
    let options = TuneOptions {
        on_tuning: None,
        budget,
        ..TuneOptions::default()
    };
    let _turn = TUNING.lock().unwrap_or_else(|e| e.into_inner());
    // Another thread may have chosen while this one waited for its turn: its choice stands.
    if let Some(report) = chosen() {
        return Ok(report);
    }
    let report = tune::choose(gpu, problem, &options)?;
    Ok(FINAL.keep(key, report))
}
