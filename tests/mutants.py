"""``python tests/mutants.py --write docs/mutants.md``: hand-made mutants of revseq.

Each mutant changes one thing a reader could get wrong (a comparison, an off-by-one, a
check left out) in a copy of the source tree, and names the test aimed at it. The copy
is installed into a folder of its own and that test alone runs against it: the mutant
is caught only when the test aimed at it fails, never by another test that happens to
fail. A mutant the test passes is a survivor: a gap in the test, or a change that
computes the same (the page says which, where known). Each anchor must occur exactly
once in its file, so a mutant that no longer applies fails the run instead of passing
unseen.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
_TREE = (
    "ops", "passes", "src", "models", "bench", "tests", "docs", "pyproject.toml", "README.md",
    "LICENSE",
)  # fmt: skip
_PYTEST = ["-q", "-p", "no:randomly", "-p", "no:cacheprovider"]


@dataclasses.dataclass(frozen=True)
class Mutant:
    """One change: ``old`` (occurring once in ``path``) becomes ``new``."""

    name: str
    path: str
    old: str
    new: str
    aimed: str  # the test that catches it (path::name)
    equivalent: str = ""  # why it computes the same, where it does


MUTANTS = (
    Mutant(
        "blame: a decomposition's output blamed on the model",
        "src/revseq/equivalence/blame.py",
        """    label = f"{node.op_type} {node.name!r}" if node.name else node.op_type
    if node.op_type == "ReverseSequence":""",
        """    label = f"{node.op_type} {node.name!r}" if node.name else node.op_type
    if False:""",
        aimed="tests/equivalence/test_whole_model.py::"
        "test_the_first_differing_tensor_is_blamed_on_who_wrote_it",
    ),
    Mutant(
        "RKNN's storage: a NaN held narrower not quieted",
        "src/revseq/equivalence/inputs/values.py",
        "    mantissa = (payload & ((1 << small.nmant) - 1)) | quiet",
        "    mantissa = payload & ((1 << small.nmant) - 1)",
        aimed="tests/backends/rknn/test_rknn.py::"
        "test_what_a_backend_holds_narrower_is_rounded_as_ieee_converts",
    ),
    Mutant(
        "RKNN: int32 arithmetic built (its build crashes)",
        "src/revseq/backends/rknn/__init__.py",
        "    if crashing is not None:",
        "    if False:",
        aimed="tests/backends/rknn/test_rknn.py::"
        "test_rknn_refuses_up_front_the_int32_arithmetic_its_build_crashes_on",
    ),
    Mutant(
        "ncnn: every batch-1 time-major flip over a batch-leading view, whatever reads it",
        "passes/inline/simplify.py",
        "        and all(use.node.op_type in op_types for use in uses)",
        "        and True",
        aimed="tests/test_tf_models.py::"
        "test_ncnn_target_writes_a_time_major_flip_with_the_batch_leading",
    ),
    Mutant(
        "fixed shapes: computed shapes never folded",
        "passes/graph/shapes.py",
        "    if _inputs_fixed(model) and not _all_static(found[0]):",
        "    if False:",
        aimed="tests/test_tf_models.py::"
        "test_ncnn_target_at_fixed_shapes_writes_each_flip_as_one_slice",
    ),
    Mutant(
        "profile: the rank RKNN's rounding starts at read one off",
        "ops/targets/profile.py",
        '                    int(r["from_rank"]),',
        '                    int(r["from_rank"]) + 1,',
        aimed="tests/ops/targets/test_profiles.py::"
        "test_rknn_s_profile_says_what_it_rounds_and_its_adapter_reads_it_there",
    ),
    Mutant(
        "restore: a flip of data of unknown rank proven at no rank",
        "passes/restore/full_reversals.py",
        '        if dims is not None\n        else [[f"rank{rank}_dim{axis}"',
        '        if True\n        else [[f"rank{rank}_dim{axis}"',
        aimed="tests/test_tf_models.py::test_inline_check_and_restore_every_reversal",
    ),
    Mutant(
        "check: whole models within tolerance taken as proof without a reversal of 2",
        "src/revseq/equivalence/_check.py",
        "    exercised = _exercised(ref, cand, checked, generator, input_sets)",
        "    exercised = whole_model or _exercised(ref, cand, checked, generator, input_sets)",
        aimed="tests/equivalence/test_verdicts.py::"
        "test_whole_models_that_agree_where_nothing_reversed_2_steps_are_inconclusive",
    ),
    Mutant(
        "check: a model that runs only at 1 never tried there",
        "src/revseq/equivalence/inputs/sizes.py",
        "    above = [key for key in free if sizes[key] > 1]",
        "    above = []",
        aimed="tests/equivalence/inputs/test_check_inputs.py::"
        "test_a_model_that_runs_only_at_batch_1_is_checked_with_no_flag",
    ),
    Mutant(
        "slices: rank 4 reversed over its rank-3 view without the Reshape back",
        "ops/forms/_slices.py",
        "        return op.Reshape(out, const(op, list(sig.static_dims() or ())))",
        "        return out",
        aimed="tests/backends/test_adapters.py::"
        "test_ncnn_s_own_target_reverses_constant_lengths_by_slices_exactly",
    ),
    Mutant(
        "forms: CoreML's clamp l - max(T - l, 0), checked with no flag",
        "ops/forms/_emit.py",
        "        return op.Sub(floor, op.Max(op.Sub(floor, top), zero))",
        "        return op.Sub(floor, op.Max(op.Sub(top, floor), zero))",
        aimed="tests/equivalence/inputs/test_check_inputs.py::"
        "test_check_with_no_flag_catches_a_clamp_wrong_only_strictly_between_1_and_t",
    ),
    Mutant(
        "check: ids that index two gathers drawn below the larger axis",
        "src/revseq/equivalence/inputs/generator.py",
        "                bounds[name] = min(bounds.get(name, size), size)",
        "                bounds[name] = max(bounds.get(name, size), size)",
        aimed="tests/equivalence/inputs/test_check_inputs.py::"
        "test_ids_that_index_two_embeddings_stay_below_the_smaller",
    ),
    Mutant(
        "backends: a worker that died while idle not started afresh",
        "src/revseq/backends/_isolated.py",
        "            if process is None or process.poll() is not None:",
        "            if process is None:",
        aimed="tests/backends/test_foreign_backends.py::"
        "test_a_worker_that_died_while_idle_is_started_afresh_on_the_next_call",
    ),
    Mutant(
        "inline: the finite domain declared only where every node took one_hot",
        "passes/inline/inline.py",
        "        if any(plan.replacement == ONE_HOT for plan in plans):",
        "        if all(plan.replacement == ONE_HOT for plan in plans):",
        aimed="tests/ops/forms/test_finite_target.py::"
        "test_a_model_where_one_node_takes_slices_and_another_one_hot_declares_the_domain",
    ),
    Mutant(
        "forms: CoreML's clamp by Max and Sub without its floor at 0",
        "ops/forms/_emit.py",
        "        floor = op.Max(lens, zero)",
        "        floor = lens",
        aimed="tests/passes/inline/test_inline_targets.py::"
        "test_coreml_takes_symbolic_dims_with_its_ops_alone[float32-time-major]",
    ),
    Mutant(
        "converter: the gather exported too",
        "src/revseq/backends/onnx2torch/converter.py",
        "        fused = torch.compiler.is_compiling() and not torch.compiler.is_exporting()",
        "        fused = torch.compiler.is_compiling()",
        aimed="tests/backends/onnx2torch/test_converter.py::"
        "test_rows_are_taken_whole_except_where_inductor_fuses_the_gather",
    ),
    Mutant(
        "inline: a symbolic-dims refusal gives the first form's reason",
        "passes/inline/refusal.py",
        "        reasons = _symbolic_blockers(profile) or reasons",
        "        reasons = reasons or _symbolic_blockers(profile)",
        aimed="tests/cli/test_cli_usage.py::test_a_refusal_gives_its_reason_once",
    ),
    Mutant(
        "check: the sizes CAND fixed ignored",
        "src/revseq/equivalence/_check.py",
        "    input_shapes = {**fixed_by(cand, ref), **(input_shapes or {})}",
        "    input_shapes = dict(input_shapes or {})",
        aimed="tests/passes/inline/test_fixed_shapes.py::"
        "test_check_feeds_an_input_the_candidate_fixed_at_its_sizes_unasked",
    ),
    Mutant(
        "check: CAND fed REF's input types",
        "src/revseq/equivalence/whole_models.py",
        "        cand_runners = {k: fed_as_declared(cand, r) for k, r in cand_runners.items()}"
        "\n",
        "\n",
        aimed="tests/ops/forms/test_finite_target.py::"
        "test_outside_its_domain_the_form_differs_and_the_check_draws_inside_it",
    ),
    Mutant(
        "CLI: inline --check silent on the domain it checked on",
        "src/revseq/cli/_commands.py",
        '    on = f" on {report.domain}" if report.domain else ""',
        '    on = ""',
        aimed="tests/cli/test_cli.py::"
        "test_inline_for_the_finite_target_says_what_changed_and_what_was_checked",
    ),
    Mutant(
        "bench: a variant with wrong values timed",
        "src/revseq/measure/floor.py",
        "        if want is not None and any(",
        "        if False and any(",
        aimed="tests/measure/test_bench.py::"
        "test_a_variant_with_wrong_values_is_not_timed_and_the_page_says_so",
    ),
    Mutant(
        "bench: a variant checked against float32's truth, not what the backend holds",
        "src/revseq/measure/floor.py",
        '    held_x = held({"x": feeds["x"]}, backend.storage)["x"]',
        '    held_x = feeds["x"]',
        aimed="tests/measure/test_bench.py::"
        "test_a_variant_with_wrong_values_is_not_timed_and_the_page_says_so",
    ),
    Mutant(
        "a crash told by what the worker wrote for an earlier request",
        "src/revseq/backends/_isolated.py",
        """            if line == REQUEST_MARK:  # what came before was another request's
                self._stderr.clear()""",
        """            if line == REQUEST_MARK:  # what came before was another request's
                pass""",
        aimed="tests/backends/test_foreign_backends.py::"
        "test_a_crash_is_told_by_what_the_worker_wrote_while_it_ran_the_model",
    ),
    Mutant(
        "int32 lengths clamped in int32 on a target with int64 index arithmetic only",
        "ops/forms/_emit.py",
        "    narrow = sig.lens_dtype == ir.DataType.INT32 and not int64_only",
        "    narrow = sig.lens_dtype == ir.DataType.INT32",
        aimed="tests/backends/rknn/test_rknn.py::"
        "test_rknn_s_target_widens_int32_lengths_before_any_arithmetic",
    ),
    Mutant(
        "a target's opset limit not applied",
        "passes/inline/inline.py",
        "        limit = self.target.opset_limit",
        "        limit = None",
        aimed="tests/passes/inline/test_inline_output.py::"
        "test_a_target_s_converter_gets_the_latest_opset_it_reads",
    ),
    Mutant(
        "check: a node's data failing alone on the runtime not said",
        "src/revseq/equivalence/_decompositions_alone.py",
        '    theirs = "" if data is None else _fails_on_data_alone(',
        '    theirs = "" if True else _fails_on_data_alone(',
        aimed="tests/equivalence/test_verdict_mechanics.py::"
        "test_a_decomposition_failing_where_the_runtime_takes_no_such_data_says_whose",
    ),
    Mutant(
        "a run in another environment timed with the pipe",
        "src/revseq/measure/_timing.py",
        "    return result.seconds if isinstance(result, MeasuredOutputs) else elapsed",
        "    return elapsed",
        aimed="tests/backends/test_foreign_backends.py::"
        "test_a_run_is_timed_where_it_ran_and_timing_counts_that_time",
    ),
    Mutant(
        "one_hot: lengths not clamped",
        "ops/forms/_one_hot.py",
        "    column = unsqueeze(op, op.Clip(floats, zero, top), [1], sig)",
        "    column = unsqueeze(op, floats, [1], sig)",
        aimed="tests/ops/forms/test_finite_target.py::"
        "test_invalid_lengths_are_clamped_as_the_exact_forms_clamp_them",
    ),
    Mutant(
        "one_hot: source step L - t, not L - 1 - t",
        "ops/forms/_one_hot.py",
        "    span = op.Sub(op.Sub(column, one), const(op, 2 * steps, np.float32))",
        "    span = op.Sub(column, const(op, 2 * steps, np.float32))",
        aimed="tests/ops/forms/test_finite_target.py::test_one_hot_is_exact_on_finite_data",
    ),
    Mutant(
        "check ignores the candidate's finite domain",
        "src/revseq/equivalence/_check.py",
        "    specials = not whole_model and domain is None",
        "    specials = not whole_model",
        aimed="tests/ops/forms/test_finite_target.py::"
        "test_outside_its_domain_the_form_differs_and_the_check_draws_inside_it",
    ),
    Mutant(
        "finite lengths not read through their int32 Cast",
        "passes/inline/inline.py",
        "        return int32_source(lens) or lens",
        "        return lens",
        aimed="tests/ops/forms/test_finite_target.py::"
        "test_lengths_cast_from_int32_are_read_as_the_float32_input_they_came_from",
    ),
    Mutant(
        "a lengths input another node reads made float32",
        "passes/inline/inline.py",
        "        return bool(uses) and all(",
        "        return bool(uses) and any(",
        aimed="tests/ops/forms/test_finite_target.py::"
        "test_lengths_another_node_reads_keep_their_type_and_are_cast",
    ),
    Mutant(
        "reversed steps off by one",
        "ops/forms/_emit.py",
        "    next_step = op.Add(steps, one)\n    bias = next_step",
        "    next_step = op.Add(steps, one)\n    bias = steps",
        aimed="tests/passes/inline/test_inline.py::test_every_type[bfloat16-time_major-auto]",
    ),
    Mutant(
        "select at t <= L",
        "ops/forms/_emit.py",
        "return op.Where(op.Less(lens, next_step), forward, backward)",
        "return op.Where(op.Less(lens, steps), forward, backward)",
        aimed="tests/passes/inline/test_inline.py::test_every_type[bfloat16-time_major-auto]",
    ),
    Mutant(
        "lengths not clamped at T",
        "ops/forms/_emit.py",
        "        return op.Where(op.Less(top, lens), top, lens)",
        "        return lens",
        aimed="tests/passes/inline/test_inline.py::test_invalid_lengths_are_clamped[auto]",
    ),
    Mutant(
        "negative lengths not clamped at 0",
        "ops/forms/_emit.py",
        "        return op.Where(op.Less(lens, zero), zero, lens)",
        "        return lens",
        aimed="tests/passes/inline/test_inline.py::"
        "test_lengths_beyond_int32_are_clamped_before_any_narrowing[symbolic-None]",
    ),
    Mutant(
        "full reversal from T, not T-1",
        "ops/forms/__init__.py",
        "    last = op.Sub(time_len, const(op, [1]))",
        "    last = time_len",
        aimed="tests/passes/inline/test_simplify.py::"
        "test_tf_reverse_becomes_a_reversal_and_the_length_chain_goes[None-ops1]",
    ),
    Mutant(
        "static index off by one",
        "ops/signature.py",
        "clamped[None, :] - 1 - steps",
        "clamped[None, :] - steps",
        aimed="tests/passes/inline/test_inline.py::test_onnx_backend_cases[test_reversesequence_time]",
    ),
    Mutant(
        "lengths of 2 taken as trivial",
        "passes/inline/simplify.py",
        "all(v <= 1 for v in sig.lens)",
        "all(v <= 2 for v in sig.lens)",
        aimed="tests/passes/inline/test_simplify.py::"
        "test_lengths_that_reverse_some_steps_are_no_trivial_node[lens0]",
    ),
    Mutant(
        "lengths of T-1 taken as a full reversal",
        "passes/inline/simplify.py",
        "all(v >= time_len for v in sig.lens)",
        "all(v >= time_len - 1 for v in sig.lens)",
        aimed="tests/passes/inline/test_simplify.py::"
        "test_lengths_that_reverse_some_steps_are_no_trivial_node[lens1]",
    ),
    Mutant(
        "int32 lengths fused into ONNX's op",
        "passes/restore/fusion.py",
        '    if fused_domain(match) != "" or lengths.dtype != ir.DataType.INT32:',
        "    if True:",
        aimed="tests/test_exports.py::"
        "test_inline_then_restore_gives_back_every_reversal[tf_reverse_sequence_opset10.onnx-None]",
    ),
    Mutant(
        "the Slice at rank 4 and more without its probe",
        "ops/forms/_slices.py",
        "        return frozenset({REVERSING_SLICE, REVERSING_SLICE_HIGH_RANK})",
        "        return frozenset({REVERSING_SLICE})",
        aimed="tests/passes/inline/test_simplify.py::"
        "test_a_full_reversal_is_a_slice_where_the_target_steps_back_over_the_rank[None-4-False-False]",
    ),
    Mutant(
        "lengths of another size than the batch accepted",
        "passes/graph/reverse_sequence.py",
        "    if batch is not None and lens_size is not None and batch != lens_size:",
        "    if False:",
        aimed="tests/passes/inline/test_inline_output.py::test_wrong_input_counts_and_batch_mismatch",
    ),
    Mutant(
        "int16 lengths read through a Cast as int32",
        "passes/graph/reverse_sequence.py",
        "return source if source is not None and source.dtype == ir.DataType.INT32 else None",
        "return source",
        aimed="tests/passes/inline/test_inline_targets.py::"
        "test_int32_lengths_cast_to_int64_are_read_as_int32[5-webgpu-False-dims0-False]",
    ),
    Mutant(
        "any Cast to int64 looked through",
        "passes/graph/reverse_sequence.py",
        '        or cast.attributes.get_int("to") != ir.DataType.INT64\n',
        "",
        equivalent="the same values: ONNX's lengths are int64, so a Cast that makes "
        "them casts to int64",
        aimed="tests/passes/inline/test_inline_targets.py::test_int32_lengths_cast_to_int64_are_read_as_int32",
    ),
    Mutant(
        "not a whole-axis Slice restored as a reversal",
        "passes/restore/full_reversals.py",
        "    if start != -1 or end != _INT64_MIN or step != -1 or axis is None:",
        "    if step != -1 or axis is None:",
        aimed="tests/passes/restore/test_restore_exports.py::"
        "test_a_slice_of_part_of_the_axis_is_no_full_reversal[-2-None]",
    ),
    Mutant(
        "restore fuses lengths of any element type",
        "passes/restore/match.py",
        "        if lengths.dtype is not None and lengths.dtype not in LENGTH_TYPES:",
        "        if False:",
        aimed="tests/equivalence/inputs/test_check_inputs.py::"
        "test_restore_fuses_no_lengths_of_a_type_the_op_refuses",
    ),
    Mutant(
        "a broadcast of two different dims taken as the first",
        "passes/graph/producers.py",
        "    return rest.pop() if len(rest) == 1 else None",
        "    return rest.pop() if len(rest) == 1 else keys[0]",
        aimed="tests/equivalence/inputs/test_check_inputs.py::"
        "test_broadcast_of_two_symbolic_dims_is_no_full_reversal",
    ),
    # The check.
    Mutant(
        "shared lengths span the longer T",
        "src/revseq/equivalence/inputs/generator.py",
        "                    min(shape[t % len(shape)] for shape, t, _ in observed),",
        "                    max(shape[t % len(shape)] for shape, t, _ in observed),",
        aimed="tests/equivalence/inputs/test_check_inputs.py::"
        "test_check_gives_a_verdict_without_any_flag[two_time_lengths]",
    ),
    Mutant(
        "outputs compared without their element type",
        "src/revseq/equivalence/reports.py",
        "    if expected.shape != got.shape or expected.dtype != got.dtype:",
        "    if expected.shape != got.shape:",
        aimed="tests/equivalence/inputs/test_check_inputs.py::test_a_comparison_tells_element_types_apart",
    ),
    Mutant(
        "token ids up to the embedding's size, not below it",
        "src/revseq/equivalence/inputs/generator.py",
        "                top = max(bounds[name] - 1, 0)",
        "                top = max(bounds[name], 0)",
        aimed="tests/equivalence/inputs/test_check_inputs.py::"
        "test_check_gives_a_verdict_without_any_flag[bidirectional_ids]",
    ),
    Mutant(
        "an index through a Cast not followed",
        "src/revseq/equivalence/inputs/uses.py",
        '        return integer and node.attributes.get_int("to", 0) in _INTEGER_TYPES',
        "        return False",
        aimed="tests/equivalence/inputs/test_check_inputs.py::"
        "test_int32_ids_through_a_cast_and_a_reshape_stay_within_the_embedding",
    ),
    Mutant(
        "special floats in every input",
        "src/revseq/equivalence/inputs/generator.py",
        "                specials = self.specials and name in self._reversed",
        "                specials = self.specials",
        aimed="tests/equivalence/inputs/test_check_inputs.py::"
        "test_special_floats_only_where_they_reach_a_reversal",
    ),
    Mutant(
        "symbolic dims never grown",
        "src/revseq/equivalence/inputs/generator.py",
        "            itertools.islice(larger, MAX_FIT_RUNS), sizes_of_one(symbols, free)",
        "            itertools.islice(larger, 0), sizes_of_one(symbols, free)",
        aimed="tests/equivalence/inputs/test_check_inputs.py::"
        "test_check_gives_a_verdict_without_any_flag[broadcast_of_two_dims]",
    ),
    Mutant(
        "dims named apart never made equal",
        "src/revseq/equivalence/inputs/sizes.py",
        "        for size in sorted({sizes[k] for k in free if sizes[k] > sizes[key]}):",
        "        for size in ():",
        aimed="tests/equivalence/inputs/test_check_inputs.py::"
        "test_dims_named_apart_but_broadcast_together_are_made_equal",
    ),
    Mutant(
        "given values replaced by generated ones",
        "src/revseq/equivalence/inputs/generator.py",
        "                feeds[name] = np.asarray(given.values[name])\n"
        "                continue\n"
        "            if name in self.lengths:",
        "                pass\n            if name in self.lengths:",
        aimed="tests/equivalence/test_equivalence.py::test_user_inputs_and_mismatched_signatures",
    ),
    Mutant(
        "given values' sizes not pinned",
        "src/revseq/equivalence/inputs/sizes.py",
        "            pins.pin(dim, size, source)",
        "            pass",
        aimed="tests/equivalence/inputs/test_check_inputs.py::"
        "test_given_values_are_used_and_fix_the_sizes_of_the_rest",
    ),
    # The command line and the file writer.
    Mutant(
        "a one-step per-node run taken as conclusive",
        "src/revseq/cli/_commands.py",
        "not failed and not any(r.longest >= 2 for r in reports):",
        "not failed and not any(r.longest >= 1 for r in reports):",
        aimed="tests/equivalence/inputs/test_check_inputs.py::"
        "test_per_node_with_a_reversal_of_one_step_is_inconclusive",
    ),
    Mutant(
        "--dims not passed to the check",
        "src/revseq/cli/_commands.py",
        "        dims.update(each)",
        "        pass",
        aimed="tests/equivalence/inputs/test_check_inputs.py::test_cli_takes_input_files_dims_shapes_and_ranges",
    ),
    Mutant(
        "no warning for a model without the op",
        "src/revseq/cli/_commands.py",
        '    if verb == "inline" and not before[0]:',
        "    if False:",
        aimed="tests/equivalence/inputs/test_check_inputs.py::"
        "test_a_model_without_the_op_is_copied_with_a_warning[inline]",
    ),
    Mutant(
        "the model file written in place",
        "src/revseq/files.py",
        "            with _temporary_next_to(path) as temporary:\n"
        "                temporary.write_bytes(proto.SerializeToString())\n"
        "                _fsync(temporary)\n"
        "                os.replace(temporary, path)",
        "            path.write_bytes(proto.SerializeToString())",
        aimed="tests/cli/test_bad_inputs.py::test_atomic_save_leaves_previous_output",
    ),
    Mutant(
        "ids not followed through arithmetic to their gather",
        "src/revseq/equivalence/inputs/uses.py",
        'elif arithmetic and node.domain in ("", "ai.onnx") and node.op_type in _ARITHMETIC:',
        "elif False:",
        aimed="tests/equivalence/inputs/test_check_inputs.py::"
        "test_check_gives_a_verdict_without_any_flag[negative_id_wrap]",
    ),
    Mutant(
        "an optimised run set aside though the reference's outputs did not move",
        "src/revseq/equivalence/whole_models.py",
        'if tolerance is None and level != "off" and moved is not None:',
        'if tolerance is None and level != "off" and plain is not None:',
        aimed="tests/equivalence/inputs/test_check_inputs.py::"
        "test_a_difference_the_reference_does_not_share_is_reported[reference1-candidate1]",
    ),
    Mutant(
        "one symbol fixed at two sizes",
        "passes/graph/fixed_shapes.py",
        "if symbol is not None and symbols.setdefault(symbol, size) != size:",
        "if symbol is not None and symbols.setdefault(symbol, size) != size and False:",
        aimed="tests/passes/inline/test_fixed_shapes.py::"
        "test_a_shape_that_does_not_fit_is_one_line_and_nothing_is_written",
    ),
    Mutant(
        "the rest of a sliced run read from one step early",
        "ops/forms/_slices.py",
        "rest = op.Slice(part, const(op, [length]), const(op, [_LAST]), axis)",
        "rest = op.Slice(part, const(op, [length - 1]), const(op, [_LAST]), axis)",
        aimed="tests/passes/inline/test_planner.py::"
        "test_constant_lengths_become_slices_where_no_gather_runs",
    ),
    Mutant(
        "an index lack raised while the form is traced",
        "passes/graph/builder.py",
        "        self._lacks.append(reason)\n",
        "        self._lacks.append(reason)\n"
        "        from revseq.errors import StrategyError\n\n"
        "        raise StrategyError(reason)\n",
        aimed="tests/passes/inline/test_planner.py::"
        "test_what_a_form_does_with_the_data_is_seen_whatever_its_index_lacks",
    ),
    Mutant(
        "what the index lacked said before the gathers that move no such data",
        "passes/inline/planner.py",
        "    reason = reason or _why_gathers_misfit(sig, strategy, found.gathers, profile)\n"
        "    reason = reason or (lacks[0] if lacks else None)",
        "    reason = reason or (lacks[0] if lacks else None)\n"
        "    reason = reason or _why_gathers_misfit(sig, strategy, found.gathers, profile)",
        aimed="tests/passes/inline/test_planner.py::"
        "test_a_target_that_moves_no_such_data_is_told_so_before_what_the_index_lacks",
    ),
    Mutant(
        "blame: the bisection names the node before the one the runtime fails at",
        "src/revseq/equivalence/blame.py",
        "    return nodes[high]",
        "    return nodes[max(high - 1, 0)]",
        aimed="tests/equivalence/test_verdict_mechanics.py::"
        "test_the_bisection_names_the_very_node_the_runtime_fails_at",
    ),
    Mutant(
        "RKNN's float16 storage: the truth made by truncation, not to nearest",
        "src/revseq/equivalence/inputs/values.py",
        "    kept = array.astype(narrow)",
        "    kept = (array.view(np.uint32) & np.uint32(0xFFFFE000)).view(array.dtype)"
        ".astype(narrow)",
        aimed="tests/equivalence/test_verdict_mechanics.py::"
        "test_float32_held_as_float16_rounds_to_nearest_even_not_by_truncation",
    ),
    Mutant(
        "ncnn: a flip read by an Unsqueeze put over the batch-leading view",
        "src/revseq/backends/ncnn/ncnn.json",
        '"batch_leads": [\n    "GRU",',
        '"batch_leads": [\n    "Unsqueeze",\n    "GRU",',
        aimed="tests/equivalence/test_verdict_mechanics.py::"
        "test_ncnn_s_batch_leading_view_is_written_only_for_readers_pnnx_drops_the_batch_of",
    ),
    Mutant(
        "Backend.rounding: RKNN's int64 rounding read from rank 5",
        "src/revseq/backends/_adapter.py",
        "if rounded == dtype and rank >= from_rank:",
        "if rounded == dtype and rank > from_rank:",
        aimed="tests/equivalence/test_verdict_mechanics.py::test_rknn_s_int64_rounding_starts_at_rank_4_exactly",
    ),
    Mutant(
        "check: the batch-1 retry tried for the first symbolic dim only",
        "src/revseq/equivalence/inputs/sizes.py",
        "    for key in above:",
        "    for key in above[:1]:",
        aimed="tests/equivalence/test_verdict_mechanics.py::"
        "test_where_no_larger_size_runs_each_symbolic_dim_is_tried_at_1_alone",
    ),
    Mutant(
        "whole model: NaN in both outputs counted as a difference",
        "src/revseq/equivalence/reports.py",
        "        close = np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=True)",
        "        close = np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=False)",
        aimed="tests/equivalence/test_verdicts.py::test_nan_in_both_outputs_is_no_difference_across_runtimes",
    ),
    Mutant(
        "check: lengths read from shapes alone varied like an input's",
        "src/revseq/equivalence/_counterparts.py",
        "        fixed = self.constant_lengths or "
        '(self.shape_lengths and self.scope == "main")',
        "        fixed = self.constant_lengths",
        aimed="tests/equivalence/test_verdicts.py::"
        "test_a_decomposition_as_a_function_is_fed_only_the_lengths_its_model_gives",
    ),
    Mutant(
        "check: a restored model's reversals not read from its run",
        "src/revseq/equivalence/_check.py",
        "    if any(_longest_reversal(m, input_sets) >= 2 for m in (cand, ref)):",
        "    if False:",
        aimed="tests/equivalence/test_verdicts.py::"
        "test_restore_after_inline_is_proven_by_the_restored_nodes_own_reversals",
    ),
    Mutant(
        "whole model: a runtime's own rounding taken for revseq's",
        "src/revseq/equivalence/across.py",
        "    if located.writer != OWN or unchecked:",
        "    if True:",
        aimed="tests/equivalence/test_verdicts.py::"
        "test_a_runtime_that_rounds_otherwise_is_told_apart_from_a_wrong_rewrite",
    ),
    Mutant(
        "check: int32 lengths an exporter cast not varied where the form reads them",
        "src/revseq/equivalence/_counterparts.py",
        "                lengths_source=source.name\n",
        "                lengths_source=None\n",
        aimed="tests/equivalence/test_verdicts.py::"
        "test_lengths_an_exporter_cast_from_int32_are_varied_where_the_form_reads_them",
    ),
    Mutant(
        "whole model: a runtime's message naming the model's own op taken at its word",
        "src/revseq/equivalence/whole_models.py",
        'or AMBIGUOUS in named or "the model\'s own" in named:',
        "or AMBIGUOUS in named:",
        aimed="tests/equivalence/test_verdict_mechanics.py::"
        "test_a_runtime_naming_the_model_s_own_op_is_checked_against_the_model_alone",
    ),
    Mutant(
        "whole model: a tensor the runtime did not give back compared",
        "src/revseq/equivalence/blame.py",
        "            if not _given_back(expected[name], got[name]):",
        "            if False:",
        aimed="tests/equivalence/test_verdict_mechanics.py::"
        "test_a_tensor_the_runtime_does_not_give_back_is_skipped_not_blamed",
    ),
    Mutant(
        "whole model: the engines line leaves out the runtime the decompositions ran alone on",
        "src/revseq/equivalence/across.py",
        'return dataclasses.replace(whose, alone_on=engine.label if ran else "")',
        'return dataclasses.replace(whose, alone_on="")',
        aimed="tests/equivalence/test_verdict_mechanics.py::"
        "test_the_engines_line_names_the_runtime_the_decompositions_also_ran_alone_on",
    ),
    Mutant(
        "forms: the steps kept with the gathered lengths are the lengths",
        "ops/forms/_axes.py",
        "    gathered.meta[_GATHERED_BY] = steps",
        "    gathered.meta[_GATHERED_BY] = lens",
        aimed="tests/passes/inline/test_inline_output.py::"
        "test_lengths_of_a_dim_of_their_own_count_the_batch_once",
    ),
    Mutant(
        "forms: a counted batch counts the gathered lengths again",
        "ops/forms/_axes.py",
        "lens.meta.get(_GATHERED_BY) if counted",
        "None if counted",
        aimed="tests/passes/inline/test_inline_output.py::"
        "test_lengths_of_a_dim_of_their_own_count_the_batch_once",
    ),
    Mutant(
        "forms: a dim cast to int32 through its int64 Cast",
        "ops/forms/_emit.py",
        '    if read is not None and read.op_type == "Cast" and _reads_shape(read.inputs[0]):',
        "    if False:",
        aimed="tests/passes/inline/test_inline_output.py::"
        "test_a_dim_is_cast_to_int32_from_its_shape_read_once",
    ),
    Mutant(
        "share page: a gather's index left computed",
        "bench/share.py",
        "            node.input[1] = name",
        "            pass",
        aimed="tests/measure/test_share.py::"
        "test_the_gathers_alone_compute_what_the_inlined_model_computes_on_its_inputs",
    ),
    Mutant(
        "speed page: the bar the tighter of the two",
        "bench/_backend_bench.py",
        "        bar = max(GATHER_BAR * gather, COPY_BAR)",
        "        bar = min(GATHER_BAR * gather, COPY_BAR)",
        aimed="tests/measure/test_bench.py::"
        "test_each_default_is_set_against_the_bar_with_its_index_arithmetic_s_part",
    ),
    Mutant(
        "forms: lengths of a dim of their own read as declared with general axes too",
        "ops/forms/__init__.py",
        "return sig.lens_own_dim and sig.lead_rank == 2",
        "return sig.lens_own_dim",
        aimed="tests/passes/inline/test_templates.py::"
        "test_lengths_stay_aligned_where_other_axes_lead",
    ),
    Mutant(
        "templates: lengths of a dim of their own always gathered at the batch's steps",
        "passes/inline/templates.py",
        "    if not forms.lengths_may_stay_declared(sig):\n        return aligned",
        "    if True:\n        return aligned",
        aimed="tests/passes/inline/test_templates.py::"
        "test_a_form_that_counts_no_batch_reads_the_lengths_as_declared",
    ),
    Mutant(
        "forms: the table taken at a symbolic batch whatever the clamp",
        "ops/forms/_index.py",
        'or (batch is None and not (sig.target_has("Clip") or sig.target_has(CLIP_CAST)))',
        "or False",
        aimed="tests/ops/forms/test_index_table.py::"
        "test_a_target_clamping_by_two_selects_keeps_the_arithmetic_at_a_symbolic_batch",
    ),
    Mutant(
        "forms: a symbolic batch's row offsets left out",
        "ops/forms/_index.py",
        "rows = op.Add(rows, affine(op, steps, factor, None))  # counted at run time",
        "pass  # counted at run time",
        aimed="tests/ops/forms/test_index_table.py::"
        "test_a_symbolic_batch_with_a_static_time_is_exact_for_every_target",
    ),
    Mutant(
        "forms: a static batch of one given zero offsets",
        "ops/forms/_index.py",
        "            if batch > 1:  # a batch of one has no offset to add",
        "            if True:",
        aimed="tests/ops/forms/test_index_table.py::"
        "test_a_batch_of_one_or_a_symbolic_one_adds_no_constant_offsets",
    ),
    Mutant(
        "forms: int32 lengths widened for the table's Gather",
        "ops/forms/_index.py",
        "    clamped = lengths_in_range(op, lens, sig, np.int32 if narrow else np.int64)",
        "    clamped = lengths_in_range(op, lens, sig, np.int64)",
        aimed="tests/ops/forms/test_index_table.py::"
        "test_int32_lengths_index_the_table_as_they_are_where_gather_takes_int32",
    ),
    Mutant(
        "forms: time-major rows at a symbolic batch transposed last",
        "ops/forms/_index.py",
        "    early = t < b and batch is None",
        "    early = False",
        aimed="tests/ops/forms/test_index_table.py::"
        "test_time_major_rows_at_a_symbolic_batch_meet_the_batch_s_steps_without_an_unsqueeze",
    ),
    Mutant(
        "sweep: any integer difference called rounding",
        "bench/sweep.py",
        "        abs(w) >= 2**53 and abs(c - w) <= np.spacing(np.float64(abs(w))) / 2",
        "        True",
        aimed="tests/measure/test_sweep.py::"
        "test_float64_rounding_of_large_integers_is_told_from_a_wrong_value",
    ),
    Mutant(
        "sweep: a static T run at the symbolic sizes' T",
        "bench/sweep.py",
        "        return [(SIZES[0][0], batch) for _, batch in SIZES]",
        "        return list(SIZES)",
        aimed="tests/measure/test_sweep.py::"
        "test_a_static_time_with_a_symbolic_batch_runs_at_its_own_time_length",
    ),
    Mutant(
        "share page: reversals in subgraphs sent to the gathers' run",
        "bench/share.py",
        "    if not last:  # its reversals sit in subgraphs",
        "    if False:  # its reversals sit in subgraphs",
        aimed="tests/measure/test_share.py::"
        "test_a_model_whose_reversals_sit_in_subgraphs_has_no_gathers_to_give",
    ),
    Mutant(
        "builder: an instance shares its template's constant tensors",
        "passes/graph/builder.py",
        "    return copy.copy(value) if isinstance(value, ir.TensorProtocol) else value",
        "    return value",
        aimed="tests/passes/graph/test_builder.py::test_an_instance_holds_its_own_constants",
    ),
    Mutant(
        "ranking: a node weighed the same on data of any size",
        "passes/inline/ranking.py",
        "    return 1.0 if nbytes is None else NODE_COST_BYTES / max(nbytes, 1)",
        "    return 1.0",
        aimed="tests/passes/inline/test_ranking_node_cost.py::"
        "test_static_data_weighs_a_node_by_how_small_the_data_is",
    ),
    Mutant(
        "ranking: a form's weighed cost its best over the members",
        "passes/inline/ranking.py",
        "    known = {name: max(costs) for name, costs in each.items()}",
        "    known = {name: min(costs) for name, costs in each.items()}",
        aimed="tests/passes/inline/test_ranking_node_cost.py::"
        "test_the_default_weighs_each_member_and_takes_the_worst",
    ),
    Mutant(
        "planner: the first fitting form taken where the target timed a node",
        "passes/inline/planner.py",
        '    weighing = strategy == "auto" and weighs_nodes(fitted, profile)',
        "    weighing = False",
        aimed="tests/passes/inline/test_ranking_node_cost.py::"
        "test_a_costly_node_tips_symbolic_dims_to_the_form_of_fewer_nodes",
    ),
    Mutant(
        "ranking: weighed costs within 10% of each other not a tie",
        "passes/inline/ranking.py",
        "        return all(c <= b * COST_TIE for c, b in zip(each[form], best, strict=True))",
        "        return all(c <= b for c, b in zip(each[form], best, strict=True))",
        aimed="tests/passes/inline/test_ranking_node_cost.py::"
        "test_a_costly_node_tips_symbolic_dims_to_the_form_of_fewer_nodes",
    ),
    Mutant(
        "ranking: a weighed tie judged on the worst costs alone",
        "passes/inline/ranking.py",
        "        return all(c <= b * COST_TIE for c, b in zip(each[form], best, strict=True))",
        "        return known[form] <= max(best) * COST_TIE",
        aimed="tests/passes/inline/test_ranking_node_cost.py::"
        "test_a_tie_goes_to_fewer_nodes_only_where_no_member_pays_beyond_the_noise_for_it",
    ),
    Mutant(
        "node cost: the longer chain's ratio alone, over its links",
        "src/revseq/measure/node_cost.py",
        '(ratios["long"] - ratios["short"]) / CHAIN',
        'ratios["long"] / CHAIN',
        aimed="tests/measure/test_node_cost.py::"
        "test_a_node_costs_what_the_longer_chain_costs_more_over_its_extra_links",
    ),
    Mutant(
        "cost: the mean read at every size",
        "ops/targets/cost.py",
        "        if nbytes is None or not points:",
        "        if True:",
        aimed="tests/ops/targets/test_cost.py::"
        "test_a_timed_size_reads_its_own_ratio_and_the_ends_hold_beyond_them",
    ),
    Mutant(
        "cost: interpolated on the size, not on its log",
        "ops/targets/cost.py",
        "                share = math.log(nbytes / low) / math.log(high / low)",
        "                share = (nbytes - low) / (high - low)",
        aimed="tests/ops/targets/test_cost.py::"
        "test_between_two_sizes_the_ratio_is_interpolated_on_the_log_of_the_size",
    ),
    Mutant(
        "ranking: a weighed form's gather read at no size",
        "passes/inline/ranking.py",
        "    weight, nbytes = _node_weight(sig), data_bytes(sig)",
        "    weight, nbytes = _node_weight(sig), None",
        aimed="tests/passes/inline/test_ranking_node_cost.py::"
        "test_static_data_takes_the_form_cheapest_at_its_own_size",
    ),
    Mutant(
        "ranking: static forms ordered by their mean costs",
        "passes/inline/ranking.py",
        "        return _cheapest(profile, STATIC, STATIC_PREFERENCE, nbytes=data_bytes(sig))",
        "        return _cheapest(profile, STATIC, STATIC_PREFERENCE)",
        aimed="tests/passes/inline/test_ranking_node_cost.py::"
        "test_static_data_takes_the_form_cheapest_at_its_own_size",
    ),
    Mutant(
        "costs: each case's ratio dropped, the mean kept",
        "src/revseq/measure/costs.py",
        "    return Cost(round(mean, 2), nodes, by_bytes)",
        "    return Cost(round(mean, 2), nodes)",
        aimed="tests/measure/test_bench.py::"
        "test_probe_costs_take_each_case_s_median_over_passes_of_fresh_runners",
    ),
)


def _apply(tree: pathlib.Path, mutant: Mutant) -> None:
    path = tree / mutant.path
    text = path.read_text()
    count = text.count(mutant.old)
    if count != 1:
        raise SystemExit(f"{mutant.name}: its anchor occurs {count} times in {mutant.path}")
    path.write_text(text.replace(mutant.old, mutant.new))


def _copy(destination: pathlib.Path) -> None:
    for name in _TREE:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(
                source, destination / name, ignore=shutil.ignore_patterns("__pycache__")
            )
        elif source.exists():
            shutil.copy2(source, destination / name)


def run(mutant: Mutant | None, tests: list[str], timeout: float) -> tuple[str, float]:
    """How ``tests`` ended on the tree with ``mutant``: "" if they passed, else the first
    failing test's id (or pytest's exit status); and the seconds it took.
    """
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as scratch:
        tree, site = pathlib.Path(scratch, "tree"), pathlib.Path(scratch, "site")
        tree.mkdir()
        _copy(tree)
        if mutant is not None:
            _apply(tree, mutant)
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--no-deps",
             "--no-build-isolation", "--target", str(site), str(tree)],
            check=True, capture_output=True,
        )  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(site)}
        ran = subprocess.run(
            [sys.executable, "-m", "pytest", *_PYTEST, *tests],
            cwd=tree, env=env, capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip
    seconds = time.monotonic() - started
    if ran.returncode == 0:
        return "", seconds
    failed = re.search(r"^(?:FAILED|ERROR) (\S+)", ran.stdout, re.MULTILINE)
    return (failed.group(1) if failed else f"exit {ran.returncode}"), seconds


def _changes(mutant: Mutant) -> str:
    """What the mutant changes, as the page shows it: the first line that differs."""
    old, new = mutant.old.splitlines(), mutant.new.splitlines()
    pairs = [(o.strip(), n.strip()) for o, n in zip(old, new, strict=False) if o != n]
    before, after = pairs[0] if pairs else (old[0].strip(), "".join(new).strip() or "(gone)")
    return f"`{before}` → `{after}`".replace("|", "\\|")


def main(argv: list[str] | None = None) -> int:
    """Run each mutant's aimed test (and all of them on the unmutated tree first)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", metavar="PAGE", help="write the page (docs/mutants.md)")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per run")
    args = parser.parse_args(argv)
    aimed = sorted({m.aimed for m in MUTANTS})
    failed, seconds = run(None, aimed, args.timeout)
    if failed:
        print(f"the unmutated tree fails {failed}: fix that first", file=sys.stderr)
        return 1
    print(f"the unmutated tree passes the {len(aimed)} aimed tests ({seconds:.0f} s)")
    rows, survivors = [], []
    for mutant in MUTANTS:
        failed, seconds = run(mutant, [mutant.aimed], args.timeout)
        verdict = "caught" if failed else "**survived**"
        if not failed:
            survivors.append(mutant)
            if mutant.equivalent:
                verdict += f" (computes the same: {mutant.equivalent})"
        print(f"{mutant.name}: {verdict} ({seconds:.0f} s)", flush=True)
        test = mutant.aimed  # its path from the checkout: tests/ follows the package
        rows.append(
            f"| {mutant.name} | `{mutant.path}` | {_changes(mutant)} | `{test}` | {verdict} |"
        )
    body = (
        "Each mutant changes one thing in a copy of the source (`tests/mutants.py` holds "
        "the change whole) and names the test aimed at it; that test alone runs on the "
        "copy, and the mutant counts as caught only when it fails. The unmutated source "
        f"passes all {len(aimed)} aimed tests first.\n\n"
        "| mutant | file | change | aimed test | result |\n|---|---|---|---|---|\n"
        + "\n".join(rows)
        + f"\n\n{len(MUTANTS) - len(survivors)} of {len(MUTANTS)} caught."
    )
    if survivors:
        body += " Survivors: " + "; ".join(
            f"{m.name} ({m.equivalent or 'a gap in its test'})" for m in survivors
        )
    print(body)
    if args.write:
        sys.path.insert(0, str(ROOT))  # the page writers run from the checkout
        from bench.pages import write_measured_page

        command = "python tests/mutants.py --write " + args.write
        context = f"Python {sys.version.split()[0]}"
        write_measured_page(args.write, "Mutants", command, context, body + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
