//! What the rungs share: the runtime signature, element loads and epilogues ([`args`]), the
//! synchronous staging of tiles through shared memory ([`stage`]), the asynchronous 16-byte
//! staging with swizzled shared memory ([`async_copy`], the mma and pipelined rungs'), and the
//! reduction of split-K partials ([`split`]).

// CubeCL's derives generate undocumented items next to the documented ones.
#[allow(missing_docs)]
pub mod args;
#[allow(missing_docs)]
pub mod async_copy;
#[allow(missing_docs)]
pub mod split;
#[allow(missing_docs)]
pub mod stage;
