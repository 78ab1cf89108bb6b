//! The host thread's floating-point environment, kept as the host had it while tilemm works
//! on the thread: a host program (the drop-in BLAS's) must not see tilemm's own flags (its checks
//! compare with NaN, a driver's compiler raises its own), nor be stopped by them where it traps
//! (gfortran's `-ffpe-trap=invalid`).

/// The thread's floating-point environment (exception flags, traps, rounding), held in
/// non-stop mode (no flags, no traps) from [`FloatEnvironment::held`] and restored when dropped.
pub struct FloatEnvironment(Box<[u64; 8]>);

extern "C" {
    // C99 <fenv.h>, in glibc's libm; `fenv_t` is 32 bytes on x86-64, and 64 are given.
    fn feholdexcept(env: *mut [u64; 8]) -> std::os::raw::c_int;
    fn fesetenv(env: *const [u64; 8]) -> std::os::raw::c_int;
}

impl FloatEnvironment {
    /// Saves the environment, then clears the flags and the traps until dropped.
    pub fn held() -> Self {
        let mut env = Box::new([0u64; 8]);
        // SAFETY: a buffer larger than fenv_t, suitably aligned.
        unsafe { feholdexcept(&mut *env) };
        FloatEnvironment(env)
    }
}

impl Drop for FloatEnvironment {
    fn drop(&mut self) {
        // SAFETY: an environment feholdexcept filled.
        unsafe { fesetenv(&*self.0) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    extern "C" {
        fn feclearexcept(excepts: std::os::raw::c_int) -> std::os::raw::c_int;
        fn feraiseexcept(excepts: std::os::raw::c_int) -> std::os::raw::c_int;
        fn fetestexcept(excepts: std::os::raw::c_int) -> std::os::raw::c_int;
    }
    /// FE_INVALID on x86-64.
    const INVALID: std::os::raw::c_int = 1;

    #[test]
    fn flags_raised_while_held_do_not_reach_the_host_and_its_own_stay() {
        unsafe {
            feclearexcept(INVALID);
            {
                let _held = FloatEnvironment::held();
                feraiseexcept(INVALID);
                assert_ne!(fetestexcept(INVALID), 0, "raised while held");
            }
            assert_eq!(fetestexcept(INVALID), 0, "tilemm's flag reached the host");
            feraiseexcept(INVALID);
            {
                let _held = FloatEnvironment::held();
                assert_eq!(fetestexcept(INVALID), 0, "held: no flags");
            }
            assert_ne!(fetestexcept(INVALID), 0, "the host's own flag was lost");
            feclearexcept(INVALID);
        }
    }
}
