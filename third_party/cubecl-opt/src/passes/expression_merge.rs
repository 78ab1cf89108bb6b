use std::mem::take;

use cubecl_ir::{CoopMma, Instruction, Operation, Operator, UnaryOperator, Variable};
use rustc_hash::FxHashMap as HashMap;
use stable_vec::StableVec;

use crate::{AtomicCounter, Optimizer, visit_noop};

use super::OptimizerPass;

/// Upstream's forms of the two passes, as published: what `set_upstream_passes` runs.
mod upstream;

/// Inline constants or simple reassignments that don't change the type. This simplifies the code
/// and makes it easier to find optimizable expressions.
pub struct InlineAssignments;

impl OptimizerPass for InlineAssignments {
    fn apply_post_ssa(&mut self, opt: &mut Optimizer, changes: AtomicCounter) {
        if crate::upstream_passes() {
            return upstream::InlineAssignments.apply_post_ssa(opt, changes);
        }
        while inline_sweep(opt, &changes) {}
    }
}

// tilemm's change (see TILEMM.md): upstream removed one assignment at a time, each followed by
// a walk of the whole program and a restart from the first block, which made this pass
// quadratic in a kernel's size (most of a large unrolled kernel's JIT time). A sweep removes
// every inlinable assignment of a block at once and renames their uses in one walk, resolving
// chains (`b = a; c = b`) as the one-at-a-time removal did. An output assigned twice ends the
// block's batch; the next sweep takes the rest.
fn inline_sweep(opt: &mut Optimizer, changes: &AtomicCounter) -> bool {
    let mut changed = false;
    for node in opt.program.node_indices().collect::<Vec<_>>() {
        let mut removed_phi = Vec::new();
        // Remove trivial phi nodes left from PRE
        opt.program[node].phi_nodes.borrow_mut().retain(|it| {
            let reference = it.entries[0].value;
            if it.entries.iter().all(|it| it.value == reference) {
                removed_phi.push(it.clone());
                false
            } else {
                true
            }
        });

        if !removed_phi.is_empty() {
            let mut phi_assigns = removed_phi
                .into_iter()
                .map(|phi| Instruction::new(Operation::Copy(phi.entries[0].value), phi.out))
                .collect::<StableVec<_>>();

            let ops = take(&mut *opt.program[node].ops.borrow_mut());
            phi_assigns.extend(ops.into_iter().map(|(_, v)| v));
            *opt.program[node].ops.borrow_mut() = phi_assigns;
            changes.inc();
            changed = true;
        }

        let mut renames = HashMap::<Variable, Variable>::default();
        let mut removed = Vec::new();
        for (idx, op) in opt.program[node].ops.borrow().iter() {
            let (Some(out), Some(input)) = (op.out, inlinable_input(&op.operation)) else {
                continue;
            };
            if renames.contains_key(&out) {
                break;
            }
            // The input as the removals before this one left it.
            let input = resolve(&renames, input);
            if (input.is_immutable() || input.is_array())
                && (out.is_immutable() || out.is_array())
                && input.ty == out.ty
            {
                if input != out {
                    renames.insert(out, input);
                }
                removed.push(idx);
            }
        }
        if removed.is_empty() {
            continue;
        }
        let resolved = renames
            .keys()
            .map(|&var| (var, resolve(&renames, var)))
            .collect::<HashMap<_, _>>();
        opt.visit_all(
            |_, var| {
                if let Some(&to) = resolved.get(var) {
                    *var = to
                }
            },
            visit_noop,
        );
        let mut ops = opt.program[node].ops.borrow_mut();
        for idx in removed {
            ops.remove(idx);
            changes.inc();
        }
        changed = true;
    }

    changed
}

/// The input of an assignment that may be inlined: a copy, or a cast or reinterpretation (to
/// the same type, checked by the caller).
fn inlinable_input(operation: &Operation) -> Option<Variable> {
    match operation {
        Operation::Copy(input)
        | Operation::Operator(Operator::Cast(UnaryOperator { input }))
        | Operation::Operator(Operator::Reinterpret(UnaryOperator { input }))
        | Operation::CoopMma(CoopMma::Cast { input }) => Some(*input),
        _ => None,
    }
}

/// Where a chain of renames takes `var`.
fn resolve(renames: &HashMap<Variable, Variable>, mut var: Variable) -> Variable {
    // A chain is at most as long as the map; the bound only guards against a cycle.
    for _ in 0..=renames.len() {
        match renames.get(&var) {
            Some(&to) if to != var => var = to,
            _ => break,
        }
    }
    var
}

/// Merge identical and immutable expressions in the same block into a single variable.
///
/// # Example
/// ```ignore
/// let a = rank - 2;
/// let b = rank - 1;
/// // in some other function
/// let x = rank - 2;
/// ```
/// would simplify to
/// ```ignore
/// let a = rank - 2;
/// let b = rank - 1;
/// let x = a;
/// ```
/// which can get further inlined by other optimization passes.
///
pub struct MergeSameExpressions;

impl OptimizerPass for MergeSameExpressions {
    fn apply_post_ssa(&mut self, opt: &mut Optimizer, changes: AtomicCounter) {
        if crate::upstream_passes() {
            return upstream::MergeSameExpressions.apply_post_ssa(opt, changes);
        }
        // tilemm's change (see TILEMM.md): upstream compared each expression with every later
        // one of its block (quadratic in the block's length). Here the block is walked once,
        // with the first immutable occurrence of each (expression, type) in a map: an
        // expression met again becomes a copy of it, and that copy in turn a copy of the first
        // copy of it, and so on, as upstream's pairwise replacements left it.
        for node in opt.node_ids() {
            let ops = opt.program[node].ops.clone();
            let indices = ops.borrow().indices().collect::<Vec<_>>();
            let mut first = HashMap::<Operation, Vec<Variable>>::default();
            for idx in indices {
                let Some(out) = ops.borrow()[idx].out else {
                    continue;
                };
                let mut operation = ops.borrow()[idx].operation.clone();
                let mut merged = false;
                while let Some(&source) = first
                    .get(&operation)
                    .and_then(|outs| outs.iter().find(|it| it.ty == out.ty))
                {
                    if source == out {
                        break;
                    }
                    operation = Operation::Copy(source);
                    changes.inc();
                    merged = true;
                }
                if merged {
                    ops.borrow_mut()[idx].operation = operation.clone();
                }
                if is_immutable(opt, &operation, out) {
                    first.entry(operation).or_default().push(out);
                }
            }
        }
    }
}

/// Whether an instruction reads and writes only immutable variables.
fn is_immutable(opt: &mut Optimizer, operation: &Operation, out: Variable) -> bool {
    let mut operation = operation.clone();
    let mut out = Some(out);
    let mut is_mut = false;
    opt.visit_operation(&mut operation, &mut out, |_, var| {
        if !var.is_immutable() {
            is_mut = true;
        }
    });
    opt.visit_out(&mut out, |_, var| {
        if !var.is_immutable() {
            is_mut = true;
        }
    });
    !is_mut
}
