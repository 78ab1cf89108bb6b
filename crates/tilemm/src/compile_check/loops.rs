//! The instruction mix of a kernel's main loop, read from machine code: NVIDIA SASS (as
//! `nvdisasm` prints a cubin) and AMD GCN/RDNA assembly (as `clang -S` writes it).
//!
//! A loop is a backward branch: the instructions from its target label to the branch. The main
//! loop is the one holding the most fused multiply-adds (the innermost such loop on a tie), and
//! its FMA share says how much of the time the inner product keeps the FMA units busy rather
//! than loading, indexing or branching: siboehm's fastest SGEMM kernels run about 80–90% FFMA
//! in their main loop.

use serde::Serialize;

/// One line of an assembly listing, reduced to what loop analysis needs.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Line {
    /// A label that branches can target.
    Label(String),
    /// An instruction: whether it is a fused multiply-add, and the label it branches to.
    Instruction { fma: bool, target: Option<String> },
}

/// A main loop's mix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct LoopMix {
    /// Fused multiply-adds in the loop body (FFMA/DFMA/HFMA2; v_fma*, v_fmac*, v_pk_fma*, …).
    pub fma: u32,
    /// Instructions in the loop body (NOPs not counted).
    pub instructions: u32,
}

impl LoopMix {
    /// The share of FMAs among the body's instructions, in percent.
    pub fn percent(&self) -> f64 {
        100.0 * f64::from(self.fma) / f64::from(self.instructions.max(1))
    }
}

/// The main loop of `lines`, if the code has a loop with an FMA in it.
fn main_loop(lines: &[Line]) -> Option<LoopMix> {
    let mut best: Option<LoopMix> = None;
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
        let mut mix = LoopMix {
            fma: 0,
            instructions: 0,
        };
        for l in &lines[begin..=end] {
            if let Line::Instruction { fma, .. } = l {
                mix.instructions += 1;
                mix.fma += u32::from(*fma);
            }
        }
        let better = match best {
            None => mix.fma > 0,
            Some(b) => mix.fma > b.fma || (mix.fma == b.fma && mix.instructions < b.instructions),
        };
        if better {
            best = Some(mix);
        }
    }
    best
}

/// The main loop of a SASS listing from `nvdisasm -c`.
pub fn sass_main_loop(listing: &str) -> Option<LoopMix> {
    let mut lines = Vec::new();
    for raw in listing.lines() {
        let text = raw.trim();
        if let Some(label) = text.strip_suffix(':').filter(|l| l.starts_with(".L")) {
            lines.push(Line::Label(label.to_string()));
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
        if opcode.starts_with('@') {
            opcode = words.next().unwrap_or("");
        }
        let base = opcode.split('.').next().unwrap_or("");
        if base.is_empty() || base == "NOP" {
            continue;
        }
        // HFMA2.MMA with zero operands is the compiler's idiom for a move.
        let fma = matches!(base, "FFMA" | "DFMA" | "HFMA2" | "FFMA2") && !opcode.contains(".MMA");
        let target = (base == "BRA")
            .then(|| code.split_once("`(").and_then(|(_, t)| t.split_once(')')))
            .flatten()
            .map(|(t, _)| t.to_string());
        lines.push(Line::Instruction { fma, target });
    }
    main_loop(&lines)
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
        let target = (mnemonic.starts_with("s_cbranch") || mnemonic == "s_branch")
            .then(|| words.next().map(|t| t.trim_end_matches(',').to_string()))
            .flatten();
        lines.push(Line::Instruction { fma, target });
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
                instructions: 4
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
                instructions: 5
            }
        );
        assert!(
            amdgpu_main_loop("\tv_dual_mov_b32 v0, v1 :: v_dual_fmac_f32 v2, v3, v4").is_none()
        );
    }
}
