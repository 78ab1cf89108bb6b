//! The process's GPU sessions: one per device, opened by the first front end that needs it
//! (the front door, Python, the BLAS) and shared by all of them and every thread for the
//! process's life.

use std::sync::Mutex;

use super::DeviceSpec;
use crate::error::{Error, Result};
use crate::runtime::backend::{open_device, Backend, GpuSession};

/// What this process opened, by what was asked for (`None`: the best device): a session, or
/// for the best device, why there is none. A named device that fails to open is not kept: the
/// next call tries again.
static OPENED: Mutex<Vec<(DeviceAsked, Opened)>> = Mutex::new(Vec::new());

/// A backend and device index as asked for (`None`: the best).
type DeviceAsked = (Option<Backend>, Option<usize>);

/// A session, or why the best device is none.
pub type Opened = std::result::Result<&'static GpuSession, String>;

/// The session for `backend` and `index`, opened by the first caller. With `backend` `None`
/// (the best GPU found, CPU emulations included) a failure is not an error but the reason
/// there is no GPU. A panic inside a driver while opening is a failure too, never the
/// caller's unwinding.
pub fn session(backend: Option<Backend>, index: Option<usize>) -> Result<Opened> {
    // One opener at a time, so that two threads do not open the device twice.
    let mut opened = OPENED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, session)) = opened.iter().find(|(key, _)| *key == (backend, index)) {
        return Ok(session.clone());
    }
    // A device opened under another name (`wgpu` before `wgpu:0`) is not opened again.
    let same = |b: Backend, i: usize| {
        opened.iter().find_map(|(_, s)| {
            s.as_ref()
                .ok()
                .copied()
                .filter(|s| s.backend() == b && s.info().index == i)
        })
    };
    if let (Some(b), Some(i)) = (backend, index) {
        if let Some(session) = same(b, i) {
            opened.push(((backend, index), Ok(session)));
            return Ok(Ok(session));
        }
    }
    let mut notes = Vec::new();
    let attempt = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        open_device(backend, index, &mut notes)
    }))
    .unwrap_or_else(|payload| {
        Err(Error::NoDevice(format!(
            "opening it panicked: {}",
            crate::panic_message(&*payload)
        )))
    });
    let session = match attempt {
        Ok(Some(session)) => {
            // One session per device, however it was named (`wgpu`, `wgpu:0`, the best): a
            // device's buffers belong to its session, and two would not share them.
            let session: &'static GpuSession = match same(session.backend(), session.info().index) {
                Some(same) => same,
                None => Box::leak(Box::new(session)),
            };
            // The best device is its backend's default one too: one session for both names.
            let named = (Some(session.backend()), index);
            if backend.is_none() && !opened.iter().any(|(key, _)| *key == named) {
                opened.push((named, Ok(session)));
            }
            Ok(session)
        }
        Ok(None) => Err(notes.join("; ")),
        Err(e) if backend.is_none() => Err(format!("no GPU device could be opened ({e})")),
        Err(e) => return Err(e),
    };
    opened.push(((backend, index), session.clone()));
    Ok(session)
}

/// [`session`] for a device as named: the best GPU for `auto`, none for `cpu` (the CPU is
/// named, so there is no GPU to open, and that is the reason given).
pub fn session_for(spec: DeviceSpec) -> Result<Opened> {
    match spec {
        DeviceSpec::Auto => session(None, None),
        DeviceSpec::Gpu { backend, index } => session(Some(backend), index),
        DeviceSpec::Cpu => Ok(Err("the CPU is named (cpu), not a GPU".into())),
    }
}
