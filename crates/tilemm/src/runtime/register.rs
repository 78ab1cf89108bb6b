//! Host memory registered with a device, as the seed's `roc.register(A, B, C)` and numba's
//! `cuda.pinned(...)` do it: the driver page-locks the arrays and maps them for its DMA
//! engines, so copies from and to them run at the link's speed instead of being staged
//! through the driver's own pinned buffers first. CUDA (`cuMemHostRegister`) and HIP
//! (`hipHostRegister`) register; wgpu and the CPU route have nothing to register (the
//! [`Registration`] says why).

use std::ffi::c_void;

/// Host arrays registered with a device for the guard's life; dropping it unregisters them.
/// The guard does not borrow the arrays, which products go on reading and writing: keep them
/// alive while it lives (an array freed first keeps its pages locked until the guard drops).
pub struct Registration {
    /// Regions this guard registered (and so unregisters), with how.
    regions: Vec<(*mut c_void, Unregister)>,
    /// Why nothing was registered, where nothing was.
    unregistered: Option<String>,
    bytes: u64,
}

// SAFETY: the pointers are only handed back to the driver that registered them, which takes
// them from any thread.
unsafe impl Send for Registration {}
unsafe impl Sync for Registration {}

/// How a region is unregistered.
#[derive(Clone, Copy)]
pub(crate) enum Unregister {
    #[cfg(feature = "cuda")]
    Cuda,
    #[cfg(feature = "hip")]
    Hip,
    /// Nothing to do (keeps the enum inhabited in builds without a vendor backend).
    #[allow(dead_code)]
    Nothing,
}

impl Registration {
    /// A guard over `arrays` that registered nothing, and why.
    pub(crate) fn none(arrays: &[&[u8]], why: String) -> Self {
        Registration {
            regions: Vec::new(),
            unregistered: Some(why),
            bytes: arrays.iter().map(|a| a.len() as u64).sum(),
        }
    }

    /// Registers each of `arrays` with `register` (which returns whether it registered the
    /// region itself: `false` for memory already registered, by the caller or an overlapping
    /// array, which is then left as it is).
    #[cfg(any(feature = "cuda", feature = "hip"))]
    pub(crate) fn each(
        arrays: &[&[u8]],
        how: Unregister,
        mut register: impl FnMut(*mut c_void, usize) -> crate::error::Result<bool>,
    ) -> crate::error::Result<Self> {
        let mut guard = Registration {
            regions: Vec::new(),
            unregistered: None,
            bytes: 0,
        };
        for array in arrays.iter().filter(|a| !a.is_empty()) {
            let at = array.as_ptr().cast_mut().cast::<c_void>();
            // On an error the guard drops here and unregisters what it registered so far.
            if register(at, array.len())? {
                guard.regions.push((at, how));
            }
            guard.bytes += array.len() as u64;
        }
        Ok(guard)
    }

    /// Whether the arrays are registered with a device (by this guard or before it).
    pub fn is_registered(&self) -> bool {
        self.unregistered.is_none()
    }

    /// Why nothing was registered: the route has no such thing (wgpu, the CPU).
    pub fn why_not(&self) -> Option<&str> {
        self.unregistered.as_deref()
    }

    /// The bytes covered.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        for &(at, how) in &self.regions {
            match how {
                #[cfg(feature = "cuda")]
                // SAFETY: `at` was registered by this guard and not unregistered since.
                Unregister::Cuda => unsafe {
                    let _ = cudarc::driver::sys::cuMemHostUnregister(at);
                },
                #[cfg(feature = "hip")]
                // SAFETY: as above.
                Unregister::Hip => unsafe {
                    let _ = cubecl_hip_sys::hipHostUnregister(at);
                },
                Unregister::Nothing => {
                    let _ = at;
                }
            }
        }
    }
}
