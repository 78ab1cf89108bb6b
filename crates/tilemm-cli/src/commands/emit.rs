//! `tilemm emit`: the source the JIT generates.

use std::process::ExitCode;

use tilemm::{Config, DType, Precision};
use tilemm_lab::tools::emit::{self, Target};

use crate::args::*;
use crate::CommandResult;

pub fn emit_command(
    kernel: Named<Config>,
    target: Target,
    tpb: Option<u32>,
    dtype: DType,
) -> CommandResult {
    let kernel = unnamed("--kernel", &[kernel], tpb.as_slice())?;
    let plan = plans(&kernel, tpb.as_slice())?[0];
    let source = emit::source_for(&plan, Precision::of(dtype), target)?;
    say!("{source}");
    Ok(ExitCode::SUCCESS)
}
