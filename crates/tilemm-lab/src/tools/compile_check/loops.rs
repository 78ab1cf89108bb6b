//! The instruction mix of a kernel's main loop, read from machine code: NVIDIA SASS (as
//! `nvdisasm` prints a cubin) and AMD GCN/RDNA assembly (as `clang -S` writes it).
//!
//! A loop is a backward branch: the instructions from its target label to the branch. The main
//! loop is the one holding the most matrix instructions, or without any the most fused
//! multiply-adds (the innermost such loop on a tie). Its FMA share says how much of the time the
//! inner product keeps the FMA units busy rather than loading, indexing or branching: siboehm's
//! fastest SGEMM kernels run about 80–90% FFMA in their main loop. A matrix-unit kernel's mix
//! says the same of its matrix instructions, and how they are fed: fragments per `ldmatrix`,
//! 128-bit asynchronous copies, barriers and copy stages per K tile.

use serde::Serialize;

/// One line of an assembly listing, reduced to what loop analysis needs.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Line {
    /// A label that branches can target.
    Label(String),
    /// An instruction: what kind it is, the label it branches to, and whether it is
    /// predicated (a branch taken or not).
    Instruction {
        kind: Kind,
        target: Option<String>,
        conditional: bool,
    },
}

/// What loop analysis counts of an instruction (the flags are not exclusive: a 128-bit
/// asynchronous copy is a global load, an asynchronous copy and a wide global load).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Kind {
    fma: bool,
    matrix: bool,
    fragment_load: bool,
    scalar_shared_load: bool,
    shared_load: bool,
    wide_shared_load: bool,
    narrow: bool,
    global_load: bool,
    wide_global_load: bool,
    async_copy: bool,
    /// An asynchronous copy that zero-fills past a count read at run time (`LDGSTS….ZFILL`):
    /// a bounded one, at the operands' edges.
    zero_fill: bool,
    barrier: bool,
    copy_commit: bool,
    /// A load of an mbarrier's word at a constant shared address (sm_80's poll of its phase).
    barrier_poll: bool,
}

/// Instructions from a wait's poll to the branch past its retry path, at most (sm_80's test
/// of the phase bit takes three, and the scheduler may put a uniform no-op before the branch).
const POLL_TO_BRANCH: u32 = 5;

/// A main loop's mix.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LoopMix {
    /// Fused multiply-adds in the loop body (FFMA/DFMA/HFMA2; v_fma*, v_fmac*, v_pk_fma*, …).
    pub fma: u32,
    /// Instructions in the loop body (NOPs and never-executed `@!PT` fillers not counted).
    pub instructions: u32,
    /// Matrix-unit instructions: HMMA (NVIDIA); v_mfma, v_wmma (AMD).
    pub matrix: u32,
    /// Loads of fragments from shared memory: LDSM (NVIDIA `ldmatrix`); ds_read (AMD).
    pub fragment_loads: u32,
    /// Scalar shared-memory loads at a register address (NVIDIA `LDS`/`LDS.U16` of 32 bits or
    /// less, not a barrier's poll at a constant address): element-wise fragment loads.
    pub scalar_shared_loads: u32,
    /// Shared-memory loads at a register address, of any width.
    pub shared_loads: u32,
    /// The 128-bit ones among them (`LDS.128`).
    pub wide_shared_loads: u32,
    /// 16-bit global loads and shared stores (`LDG.E.U16`, `STS.U16`): element-wise staging.
    pub narrow_accesses: u32,
    /// Global loads: LDG and LDGSTS (NVIDIA); global_load, buffer_load (AMD).
    pub global_loads: u32,
    /// The 128-bit ones among them.
    pub wide_global_loads: u32,
    /// Asynchronous copies from global to shared memory (LDGSTS, `cp.async`).
    pub async_copies: u32,
    /// Cube barriers: BAR (NVIDIA), s_barrier (AMD).
    pub barriers: u32,
    /// Completions of asynchronous copies committed: LDGDEPBAR (commit groups) or
    /// ARRIVES.LDGSTSBAR (an mbarrier's): one per K tile in a pipeline.
    pub copy_commits: u32,
    /// The longest run of instructions without the loop's work (a matrix instruction where it
    /// has them, else an FMA), the loop taken as the cycle it runs (a run may wrap around the
    /// back edge): how long the units wait on loads, addresses and barriers between two
    /// issues of work. CUTLASS's sm80 schedule keeps it to a few instructions.
    pub longest_idle_run: u32,
    /// Whether a fragment load (`ldmatrix`) sits in the run without work that holds a barrier:
    /// fragments loaded after the barrier rather than carried over from the step before.
    pub fragment_load_at_barrier: bool,
}

impl LoopMix {
    /// The share of FMAs among the body's instructions, in percent.
    pub fn percent(&self) -> f64 {
        100.0 * f64::from(self.fma) / f64::from(self.instructions.max(1))
    }

    /// The share of matrix instructions among the body's instructions, in percent.
    pub fn matrix_percent(&self) -> f64 {
        100.0 * f64::from(self.matrix) / f64::from(self.instructions.max(1))
    }

    /// Matrix instructions per fragment load from shared memory (`None` without loads).
    pub fn matrix_per_fragment_load(&self) -> Option<f64> {
        (self.fragment_loads > 0).then(|| f64::from(self.matrix) / f64::from(self.fragment_loads))
    }

    /// FMAs per shared-memory load (`None` without loads).
    pub fn fma_per_shared_load(&self) -> Option<f64> {
        (self.shared_loads > 0).then(|| f64::from(self.fma) / f64::from(self.shared_loads))
    }

    /// Matrix instructions per global load (`None` without loads).
    pub fn matrix_per_global_load(&self) -> Option<f64> {
        (self.global_loads > 0).then(|| f64::from(self.matrix) / f64::from(self.global_loads))
    }

    /// Cube barriers per K tile, a tile being one commit of asynchronous copies (`None` in a
    /// loop without them).
    pub fn barriers_per_tile(&self) -> Option<f64> {
        (self.copy_commits > 0).then(|| f64::from(self.barriers) / f64::from(self.copy_commits))
    }

    /// K tiles whose copies are in flight while one is computed: a loop that cycles through
    /// S stages, each with its own commit, waits on the oldest while S − 1 are in flight
    /// (`None` without commits).
    pub fn stages_in_flight(&self) -> Option<u32> {
        self.copy_commits
            .checked_sub(1)
            .filter(|_| self.copy_commits > 0)
    }

    /// The runs without work ([`LoopMix::longest_idle_run`]) of a loop body, in order.
    fn runs(&mut self, body: &[Kind]) {
        let work = |k: &Kind| if self.matrix > 0 { k.matrix } else { k.fma };
        let Some(first) = body.iter().position(work) else {
            self.longest_idle_run = body.len() as u32;
            return;
        };
        let (mut run, mut barrier, mut fragment) = (0, false, false);
        // From the instruction after the first work round to that work again.
        for step in 1..=body.len() {
            let kind = &body[(first + step) % body.len()];
            if work(kind) {
                self.longest_idle_run = self.longest_idle_run.max(run);
                self.fragment_load_at_barrier |= barrier && fragment;
                (run, barrier, fragment) = (0, false, false);
            } else {
                run += 1;
                barrier |= kind.barrier;
                fragment |= kind.fragment_load;
            }
        }
    }

    fn add(&mut self, kind: Kind) {
        self.instructions += 1;
        let count = |flag: bool| u32::from(flag);
        self.fma += count(kind.fma);
        self.matrix += count(kind.matrix);
        self.fragment_loads += count(kind.fragment_load);
        self.scalar_shared_loads += count(kind.scalar_shared_load);
        self.shared_loads += count(kind.shared_load);
        self.wide_shared_loads += count(kind.wide_shared_load);
        self.narrow_accesses += count(kind.narrow);
        self.global_loads += count(kind.global_load);
        self.wide_global_loads += count(kind.wide_global_load);
        self.async_copies += count(kind.async_copy);
        self.barriers += count(kind.barrier);
        self.copy_commits += count(kind.copy_commit);
    }
}

/// The main loop of `lines`: the loop with the most matrix instructions, or (without any) the
/// most FMAs; the innermost (fewest instructions) on a tie. `None` where no loop has either.
fn main_loop(lines: &[Line]) -> Option<LoopMix> {
    // Every loop (a backward branch to its label) with work in it.
    let mut loops = Vec::new();
    for (end, line) in lines.iter().enumerate() {
        let Line::Instruction {
            target: Some(target),
            ..
        } = line
        else {
            continue;
        };
        let Some(begin) = lines[..end]
            .iter()
            .rposition(|l| matches!(l, Line::Label(name) if name == target))
        else {
            continue; // a forward branch
        };
        let mut mix = LoopMix::default();
        let body: Vec<Kind> = lines[begin..=end]
            .iter()
            .filter_map(|l| match l {
                Line::Instruction { kind, .. } => Some(*kind),
                Line::Label(_) => None,
            })
            .collect();
        for kind in &body {
            mix.add(*kind);
        }
        mix.runs(&body);
        if mix.matrix > 0 || mix.fma > 0 {
            loops.push((begin, end, mix));
        }
    }
    // The interior loops: an outer loop (over K tiles, say) around a loop with the work is not
    // where the work runs.
    let interior = |&&(begin, end, _): &&(usize, usize, LoopMix)| {
        !loops
            .iter()
            .any(|&(b, e, _)| begin <= b && e <= end && (b, e) != (begin, end))
    };
    let work = |m: &LoopMix| (m.matrix, m.fma);
    loops
        .iter()
        .filter(interior)
        .map(|&(_, _, mix)| mix)
        .max_by(|x, y| {
            work(x)
                .cmp(&work(y))
                .then(y.instructions.cmp(&x.instructions))
        })
}

/// What an NVIDIA SASS opcode (with its modifiers, e.g. `LDGSTS.E.BYPASS.128`) and its
/// operands are, for loop analysis.
fn sass_kind(opcode: &str, operands: &str) -> Kind {
    let base = opcode.split('.').next().unwrap_or("");
    let has = |modifier: &str| opcode.split('.').skip(1).any(|m| m == modifier);
    let global_load = matches!(base, "LDG" | "LDGSTS");
    // A load from a constant shared address (`LDS R8, [0xc]`) polls a barrier's phase.
    let constant_address = operands
        .split_once('[')
        .is_some_and(|(_, a)| a.trim_start().starts_with("0x"));
    let wide = has("128");
    Kind {
        // HFMA2.MMA with zero operands is the compiler's idiom for a move.
        fma: matches!(base, "FFMA" | "DFMA" | "HFMA2" | "FFMA2") && !has("MMA"),
        matrix: matches!(base, "HMMA" | "HGMMA" | "IMMA" | "BMMA"),
        fragment_load: base == "LDSM",
        scalar_shared_load: base == "LDS" && !constant_address && !(wide || has("64")),
        shared_load: base == "LDS" && !constant_address,
        wide_shared_load: base == "LDS" && !constant_address && wide,
        narrow: (matches!(base, "LDG" | "STS") && (has("U16") || has("S16")))
            || (base == "LDS" && (has("U16") || has("S16"))),
        global_load,
        wide_global_load: global_load && wide,
        async_copy: base == "LDGSTS",
        zero_fill: base == "LDGSTS" && has("ZFILL"),
        barrier: base == "BAR",
        copy_commit: base == "LDGDEPBAR" || (base == "ARRIVES" && has("LDGSTSBAR")),
        barrier_poll: base == "LDS" && constant_address,
    }
}

/// The main loop of a SASS listing from `nvdisasm -c`.
///
/// A wait on an mbarrier compiles to a poll (sm_90's `SYNCS.PHASECHK…TRYWAIT`; before it, an
/// `LDS` of the barrier's word at a constant address and a test) and a branch past its retry
/// path (a loop of back-off, polls and `NANOSLEEP`) when the phase has completed. The retry
/// path runs only while the copies awaited are still in flight, a stall no schedule hides: it
/// is left out, as the waits that complete at once run (the poll, its test and its branch).
pub fn sass_main_loop(listing: &str) -> Option<LoopMix> {
    let mut lines = Vec::new();
    // The label that ends the retry path being skipped, and how many instructions ago the
    // last poll was (its branch follows within a few).
    let (mut retry_end, mut since_poll): (Option<String>, u32) = (None, u32::MAX);
    for raw in listing.lines() {
        let text = raw.trim();
        if let Some(label) = text.strip_suffix(':').filter(|l| l.starts_with(".L")) {
            if retry_end.as_deref() == Some(label) {
                retry_end = None;
            }
            lines.push(Line::Label(label.to_string()));
            continue;
        }
        if retry_end.is_some() {
            continue;
        }
        // `/*01a0*/  @!P0 BRA `(.L_x_4) ;`
        let Some(rest) = text.strip_prefix("/*") else {
            continue;
        };
        let Some((_, code)) = rest.split_once("*/") else {
            continue;
        };
        let mut words = code.split_whitespace();
        let mut opcode = words.next().unwrap_or("");
        if opcode == "@!PT" {
            continue; // never executed: the scheduler's filler
        }
        if opcode.starts_with('@') {
            opcode = words.next().unwrap_or("");
        }
        let base = opcode.split('.').next().unwrap_or("");
        if base.is_empty() || base == "NOP" {
            continue;
        }
        let operands = code.split_once(opcode).map_or("", |(_, o)| o);
        let target = (base == "BRA")
            .then(|| code.split_once("`(").and_then(|(_, t)| t.split_once(')')))
            .flatten()
            .map(|(t, _)| t.to_string());
        // A poll's branch forward (to a label not seen yet) skips the retry path.
        let forward = |t: &String| !lines.iter().any(|l| matches!(l, Line::Label(n) if n == t));
        if since_poll <= POLL_TO_BRANCH && code.trim_start().starts_with('@') && target.is_some() {
            retry_end = target.clone().filter(forward);
        }
        let kind = sass_kind(opcode, operands);
        let conditional = code.trim_start().starts_with('@');
        since_poll = if (opcode.starts_with("SYNCS.PHASECHK") && opcode.contains("TRYWAIT"))
            || kind.barrier_poll
        {
            0
        } else {
            since_poll.saturating_add(1)
        };
        lines.push(Line::Instruction {
            kind,
            target,
            conditional,
        });
    }
    main_loop(&without_edge_arms(lines))
}

/// `lines` without the arms that only edge tiles run. A tile known at run time to be whole or
/// not (the pipelined rung's copies) compiles to a diamond: a conditional branch forward, two
/// arms, one ending in a jump past the other, both rejoining. Where one arm's copies are all
/// bounded (zero-filling past the operands' edges) and the other's all whole, tiles inside the
/// operands take the whole arm: the bounded one is left out, so that a loop is read as those
/// tiles run it (products of 1024–8192 run their edge tiles once, if at all).
fn without_edge_arms(mut lines: Vec<Line>) -> Vec<Line> {
    let label_at = |lines: &[Line], name: &str| {
        lines
            .iter()
            .position(|l| matches!(l, Line::Label(n) if n == name))
    };
    let copies = |arm: &[Line]| {
        let (mut bounded, mut whole) = (0, 0);
        for line in arm {
            if let Line::Instruction { kind, .. } = line {
                bounded += u32::from(kind.async_copy && kind.zero_fill);
                whole += u32::from(kind.async_copy && !kind.zero_fill);
            }
        }
        (bounded, whole)
    };
    let mut i = 0;
    while i < lines.len() {
        let Line::Instruction {
            target: Some(taken),
            conditional: true,
            ..
        } = &lines[i]
        else {
            i += 1;
            continue;
        };
        // The taken arm's label, ahead; the fall-through arm's last instruction, a jump to the
        // join, ahead of that.
        let diamond = label_at(&lines, taken)
            .filter(|&t| t > i + 1)
            .and_then(|t| match &lines[t - 1] {
                Line::Instruction {
                    target: Some(join),
                    conditional: false,
                    ..
                } => label_at(&lines, join).filter(|&j| j > t).map(|j| (t, j)),
                _ => None,
            });
        let Some((taken_at, join_at)) = diamond else {
            i += 1;
            continue;
        };
        let (fall, taken) = (i + 1..taken_at - 1, taken_at + 1..join_at);
        match (copies(&lines[fall.clone()]), copies(&lines[taken.clone()])) {
            // Whole tiles branch past the bounded arm (and its jump).
            ((b, 0), (0, w)) if b > 0 && w > 0 => {
                lines.drain(fall.start..taken_at);
            }
            // Whole tiles fall through and jump past the bounded arm.
            ((0, w), (b, 0)) if b > 0 && w > 0 => {
                lines.drain(taken);
            }
            _ => {}
        }
        i += 1;
    }
    lines
}

/// Matrix-unit instructions anywhere in a SASS listing: HMMA (tensor cores, sm_70 on), HGMMA
/// (Hopper's warpgroup MMA), IMMA, not HFMA2.MMA (a move idiom).
pub fn sass_matrix_ops(listing: &str) -> u32 {
    listing
        .lines()
        .filter_map(|l| l.split_once("*/").map(|(_, code)| code))
        .filter(|code| {
            code.split_whitespace()
                .find(|w| !w.starts_with('@'))
                .is_some_and(|op| {
                    let base = op.split('.').next().unwrap_or("");
                    matches!(base, "HMMA" | "HGMMA" | "IMMA" | "BMMA")
                })
        })
        .count() as u32
}

/// Matrix-unit instructions anywhere in an AMDGPU listing: MFMA (CDNA) and WMMA (RDNA 3).
pub fn amdgpu_matrix_ops(listing: &str) -> u32 {
    listing
        .lines()
        .map(|l| l.split(';').next().unwrap_or("").trim())
        .filter(|t| {
            ["v_mfma", "v_wmma", "v_smfmac"]
                .iter()
                .any(|p| t.starts_with(p))
        })
        .count() as u32
}

/// The main loop of an AMDGPU assembly listing from `clang -S`.
pub fn amdgpu_main_loop(listing: &str) -> Option<LoopMix> {
    let mut lines = Vec::new();
    for raw in listing.lines() {
        let text = raw.split(';').next().unwrap_or("").trim();
        if text.is_empty() {
            continue;
        }
        if let Some(label) = text.strip_suffix(':') {
            lines.push(Line::Label(label.to_string()));
            continue;
        }
        if text.starts_with('.') {
            continue; // a directive
        }
        let mut words = text.split_whitespace();
        let mnemonic = words.next().unwrap_or("");
        if !mnemonic.starts_with(|c: char| c.is_ascii_lowercase()) || mnemonic == "s_nop" {
            continue;
        }
        let is_fma = |m: &str| {
            let m = m.trim_start_matches("v_dual_");
            [
                "v_fma", "v_fmac", "v_pk_fma", "v_mac_", "v_fmaak", "v_fmamk", "fmac_", "fma_",
            ]
            .iter()
            .any(|p| m.starts_with(p))
        };
        // RDNA 3's dual issue (`v_dual_fmac_f32 … :: v_dual_fmac_f32 …`) counts as one
        // instruction word; its FMA counts when either half is one.
        let fma = is_fma(mnemonic)
            || text
                .split_once("::")
                .is_some_and(|(_, second)| second.split_whitespace().next().is_some_and(is_fma));
        let global_load =
            mnemonic.starts_with("global_load") || mnemonic.starts_with("buffer_load");
        let wide = ["dwordx4", "b128"].iter().any(|w| mnemonic.ends_with(w));
        let kind = Kind {
            fma,
            matrix: ["v_mfma", "v_wmma", "v_smfmac"]
                .iter()
                .any(|p| mnemonic.starts_with(p)),
            fragment_load: mnemonic.starts_with("ds_read") || mnemonic.starts_with("ds_load"),
            narrow: [
                "global_load_ushort",
                "global_load_u16",
                "ds_write_b16",
                "ds_store_b16",
            ]
            .iter()
            .any(|p| mnemonic.starts_with(p)),
            global_load,
            wide_global_load: global_load && wide,
            barrier: mnemonic == "s_barrier",
            ..Kind::default()
        };
        let target = (mnemonic.starts_with("s_cbranch") || mnemonic == "s_branch")
            .then(|| words.next().map(|t| t.trim_end_matches(',').to_string()))
            .flatten();
        lines.push(Line::Instruction {
            kind,
            target,
            conditional: false,
        });
    }
    main_loop(&lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matrix_instructions_are_counted_and_the_move_idiom_is_not() {
        let sass = "        /*0100*/                   HMMA.16816.F32 R4, R8, R12, R4 ;\n\
                    /*0110*/              @P0 HMMA.1688.F32 R4, R8, R12, R4 ;\n\
                    /*0120*/                   HFMA2.MMA R3, -RZ, RZ, 0, 0 ;";
        assert_eq!(sass_matrix_ops(sass), 2);
        let amd = "\tv_wmma_f32_16x16x16_f16 v[0:7], v[8:15], v[16:23], v[0:7]\n\
                   \tv_mfma_f32_32x32x8f16 a[0:15], v[0:1], v[2:3], a[0:15]\n\
                   \tv_fma_f32 v0, v1, v2, v3 ; v_wmma in a comment";
        assert_eq!(amdgpu_matrix_ops(amd), 2);
    }

    #[test]
    fn the_sass_main_loop_is_the_backward_branch_with_the_most_ffma() {
        let listing = "\
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        /*0030*/                   HFMA2.MMA R11, -RZ, RZ, 0, 0 ;
        /*0050*/              @!P0 BRA `(.L_x_0) ;
.L_x_4:
        /*01a0*/                   LDG.E R16, desc[UR4][R2.64+0x8] ;
        /*0280*/                   FFMA R23, R6, R23, R11 ;
        /*02d0*/                   FFMA R6, R16, R19, R23 ;
        /*02e0*/                   NOP ;
        /*02f0*/              @P0 BRA `(.L_x_4) ;
.L_x_5:
        /*0300*/                   FFMA R2, R3, R4, R2 ;
        /*0310*/                   IADD3 R5, R5, 0x1, RZ ;
        /*0320*/              @P1 BRA `(.L_x_5) ;
.L_x_0:
        /*0330*/                   EXIT ;";
        let mix = sass_main_loop(listing).unwrap();
        assert_eq!(
            mix,
            LoopMix {
                fma: 2,
                instructions: 4,
                global_loads: 1,
                // The branch and the load, around the back edge.
                longest_idle_run: 2,
                ..LoopMix::default()
            }
        );
        assert_eq!(mix.percent(), 50.0);
        // Straight-line code has no loop.
        assert_eq!(
            sass_main_loop("        /*0000*/  FFMA R1, R2, R3, R1 ;"),
            None
        );
    }

    #[test]
    fn a_waits_retry_path_is_left_out_of_the_runs_without_work() {
        // sm_90's poll (TRYWAIT) and sm_80's (an LDS of the barrier's word and its test), each
        // with a retry loop of back-off; then the barrier. The runs are the poll, its test and
        // branch, and the barrier: the retry paths' instructions (and their loops) are not.
        for poll in [
            "        /*0110*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR4], R2 ;\n",
            "        /*0110*/                   LDS R3, [0x4] ;\n\
             /*0118*/                   LOP3.LUT P0, RZ, R3, 0x80000000, R2, 0x48, !PT ;\n\
             /*011c*/                   @!UPT UIADD3 URZ, URZ, URZ, URZ ;\n",
        ] {
            let listing = format!(
                "\
.L_x_1:
        /*0100*/                   HMMA.16816.F32 R4, R8, R12, R4 ;
{poll}        /*0120*/               @P0 BRA `(.L_x_3) ;
.L_x_2:
        /*0130*/                   CS2R R6, SR_GLOBALTIMERLO ;
        /*0140*/                   NANOSLEEP 0x10 ;
        /*0150*/                   IADD3 R7, R7, 0x1, RZ ;
        /*0160*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR4], R2 ;
        /*0170*/              @!P0 BRA `(.L_x_2) ;
.L_x_3:
        /*0180*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*0190*/                   LDSM.16.M88.4 R8, [R8] ;
        /*01a0*/                   HMMA.16816.F32 R4, R8, R12, R4 ;
        /*01b0*/              @P1 BRA `(.L_x_1) ;"
            );
            let mix = sass_main_loop(&listing).unwrap();
            let polls = poll.lines().count() as u32;
            // Poll, branch, BAR, LDSM; and the back edge's branch.
            assert_eq!(mix.longest_idle_run, polls + 3, "{poll}");
            assert_eq!(mix.instructions, polls + 6, "{poll}");
            assert!(mix.fragment_load_at_barrier);
        }
    }

    #[test]
    fn the_bounded_copies_arm_is_left_out_where_the_other_copies_whole() {
        // A trip of the pipelined rung: a tile known whole or not branches between bounded
        // copies (zero-filling, with their count's arithmetic) and whole ones, then FMAs.
        let bounded = "\
        /*0110*/                   ISETP.GE.U32.AND P1, PT, R8, R9, PT ;
        /*0120*/                   SEL R10, R11, RZ, P1 ;
        /*0130*/                   IADD3 R12, -R10, 0x10, RZ ;
        /*0140*/                   LDGSTS.E.BYPASS.128.ZFILL [R4], desc[UR12][R6.64], P1 ;";
        let whole = "\
        /*0160*/                   LDGSTS.E.BYPASS.128 [R4], desc[UR12][R6.64] ;";
        let trip = |fall: &str, taken: &str| {
            format!(
                "\
.L_x_1:
        /*0100*/              @P0 BRA `(.L_x_2) ;
{fall}
        /*0150*/                   BRA `(.L_x_3) ;
.L_x_2:
{taken}
.L_x_3:
        /*0170*/                   FFMA R0, R1, R2, R0 ;
        /*0180*/                   FFMA R3, R1, R2, R3 ;
        /*0190*/              @P2 BRA `(.L_x_1) ;"
            )
        };
        // Whole tiles branch past the bounded arm: the branch, the whole copy, two FFMAs and
        // the back edge.
        let mix = sass_main_loop(&trip(bounded, whole)).unwrap();
        assert_eq!((mix.instructions, mix.async_copies, mix.fma), (5, 1, 2));
        assert_eq!(mix.longest_idle_run, 3);
        // Whole tiles fall through and jump past it: the jump runs too.
        let mix = sass_main_loop(&trip(whole, bounded)).unwrap();
        assert_eq!((mix.instructions, mix.async_copies), (6, 1));
        // Both arms bounded (or both whole): nothing is left out.
        let mix = sass_main_loop(&trip(bounded, bounded)).unwrap();
        assert_eq!((mix.instructions, mix.async_copies), (13, 2));
        let mix = sass_main_loop(&trip(whole, whole)).unwrap();
        assert_eq!((mix.instructions, mix.async_copies), (7, 2));
    }

    #[test]
    fn the_innermost_loop_wins_a_tie_and_amd_fma_forms_count() {
        let listing = "\
k:
	s_load_dwordx2 s[0:1], s[4:5], 0x0
.LBB0_1:                                ; outer
	s_mov_b32 s2, 0
.LBB0_2:                                ; =>This Inner Loop Header
	global_load_dword v1, v[2:3], off
	v_fmac_f32_e32 v0, v1, v4
	v_pk_fma_f32 v[6:7], v[8:9], v[10:11], v[6:7]
	s_waitcnt vmcnt(0)
	s_nop 1
	s_cbranch_scc1 .LBB0_2
	s_add_i32 s2, s2, 1
	s_cbranch_vccnz .LBB0_1
	v_dual_fmac_f32 v0, v1, v2 :: v_dual_mov_b32 v3, v4
	s_endpgm";
        let mix = amdgpu_main_loop(listing).unwrap();
        // The inner body: the load, fmac, pk_fma, waitcnt and the branch (s_nop not counted).
        assert_eq!(
            mix,
            LoopMix {
                fma: 2,
                instructions: 5,
                global_loads: 1,
                longest_idle_run: 3,
                ..LoopMix::default()
            }
        );
        assert!(
            amdgpu_main_loop("\tv_dual_mov_b32 v0, v1 :: v_dual_fmac_f32 v2, v3, v4").is_none()
        );
    }

    #[test]
    fn a_matrix_loop_is_read_for_how_its_mmas_are_fed() {
        // Two K tiles of a pipelined loop, as nvdisasm prints one: per tile a barrier poll at
        // a constant address, a cube barrier, two 128-bit copies and their mbarrier arrive,
        // an ldmatrix and four HMMA; a scalar LDS and a 16-bit global load stand out.
        let listing = "\
.L_x_7:
        /*0100*/                   LDS R8, [0xc] ;
        /*0110*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*0120*/                   LDGSTS.E.BYPASS.128 [R7], desc[UR12][R10.64] ;
        /*0130*/                   LDGSTS.E.BYPASS.128.ZFILL [R7+0x80], desc[UR12][R12.64], P0 ;
        /*0140*/                   ARRIVES.LDGSTSBAR.64.TRANSCNT [UR4] ;
        /*0150*/                   LDSM.16.MT88.4 R20, [R237+0x80] ;
        /*0160*/              @!PT LDS RZ, [RZ] ;
        /*0170*/                   HMMA.16816.F32 R4, R20, R24, R4 ;
        /*0180*/                   HMMA.16816.F32 R8, R20, R26, R8 ;
        /*0190*/                   HMMA.16816.F32 R12, R22, R24, R12 ;
        /*01a0*/                   HMMA.16816.F32 R16, R22, R26, R16 ;
        /*01b0*/                   LDS R9, [0x14] ;
        /*01c0*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*01d0*/                   LDGSTS.E.BYPASS.128 [R7], desc[UR12][R10.64] ;
        /*01e0*/                   ARRIVES.LDGSTSBAR.64.TRANSCNT [UR5] ;
        /*01f0*/                   LDSM.16.M88.4 R20, [R236] ;
        /*0200*/                   LDS.U16 R30, [R31] ;
        /*0210*/                   LDG.E.U16 R32, desc[UR12][R10.64] ;
        /*0220*/                   HMMA.16816.F32 R4, R20, R24, R4 ;
        /*0230*/              @P1 BRA `(.L_x_7) ;";
        let mix = sass_main_loop(listing).unwrap();
        assert_eq!(
            (mix.matrix, mix.instructions, mix.fragment_loads),
            (5, 19, 2)
        );
        assert_eq!(
            (mix.async_copies, mix.wide_global_loads, mix.global_loads),
            (3, 3, 4)
        );
        assert_eq!((mix.barriers, mix.copy_commits), (2, 2));
        assert_eq!((mix.scalar_shared_loads, mix.narrow_accesses), (1, 2));
        // The barrier's poll at a constant address is not a load of data.
        assert_eq!((mix.shared_loads, mix.wide_shared_loads), (1, 0));
        assert_eq!(mix.matrix_percent(), 500.0 / 19.0);
        assert_eq!(mix.matrix_per_fragment_load(), Some(2.5));
        assert_eq!(mix.barriers_per_tile(), Some(1.0));
        assert_eq!(mix.stages_in_flight(), Some(1));
        // Seven instructions without an HMMA before each tile's first: the branch, the poll,
        // the barrier, the copies and the ldmatrix, which sits in the barrier's run.
        assert_eq!(mix.longest_idle_run, 7);
        assert!(mix.fragment_load_at_barrier);
    }

    #[test]
    fn a_carried_fragment_keeps_the_barrier_run_free_of_ldmatrix() {
        // CUTLASS's order: the next step's fragments loaded between the MMAs, the barrier and
        // the copies with MMAs on either side.
        let listing = "\
.L_x_9:
        /*0100*/                   HMMA.16816.F32 R4, R20, R24, R4 ;
        /*0110*/                   LDSM.16.M88.4 R28, [R236] ;
        /*0120*/                   HMMA.16816.F32 R8, R20, R26, R8 ;
        /*0130*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*0140*/                   LDGSTS.E.BYPASS.128 [R7], desc[UR12][R10.64] ;
        /*0150*/                   HMMA.16816.F32 R12, R28, R24, R12 ;
        /*0160*/              @P1 BRA `(.L_x_9) ;";
        let mix = sass_main_loop(listing).unwrap();
        assert_eq!((mix.matrix, mix.longest_idle_run), (3, 2));
        assert!(!mix.fragment_load_at_barrier);
    }
}
